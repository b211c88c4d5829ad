"""BudgetMix (docs/algorithms.md#budgetmix; RT §5.2 and App. A.4): train under budgets drawn per group.
RT: "What Does Multi-Turn Reinforcement Learning Really Improve in LLM Agents?"

- Candidates (:func:`arlkit.budgets.budget_candidates`, with the parser of every budget setting):
  ``T_i = ceil(i·T_max/10)`` for i = 1..10, computed in integers as ``(i*T_max + 9) // 10``
  (the float form ``ceil(i*0.1*T_max)`` gives 4 instead of 3 for T_max = 10, i = 3), duplicates removed.
- Each task group draws one candidate uniformly; all rollouts of the group use it; the prompt announces
  it; a trajectory that exhausts it without success gets reward 0; GiGPO anchors carry the remaining
  budget (:func:`arlkit.algos.budget_anchor`). Full-budget RL and BudgetMix RL differ only in this draw.

:func:`audit_run` checks a finished run's ``rollouts.jsonl`` against these rules and reports a verdict
per check, including a chi-square test of the drawn budgets against the uniform distribution.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arlkit.budgets import Budget, budget_candidates

__all__ = [
    "AuditCheck",
    "AuditReport",
    "audit_run",
    "budget_candidates",
    "budget_checks",
    "chi_square_uniform",
    "sample_group_budgets",
]


def sample_group_budgets(candidates: Sequence[int], n_groups: int, rng: np.random.Generator) -> list[int]:
    """One budget per group, drawn uniformly (with replacement) from ``candidates``."""
    if not candidates:
        raise ValueError("no candidate budgets")
    picks = rng.integers(0, len(candidates), size=n_groups)
    return [int(candidates[i]) for i in picks]


# -- chi-square without scipy ------------------------------------------------------------------------


def _gammainc_upper(a: float, x: float) -> float:
    """Regularised upper incomplete gamma Q(a, x), by its series (x < a + 1) or continued fraction."""
    if x <= 0:
        return 1.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        denom = a
        for _ in range(10_000):
            denom += 1.0
            term *= x / denom
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    # Lentz's method for the continued fraction of Q.
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return min(1.0, math.exp(log_front) * h)


def chi_square_uniform(counts: Sequence[int]) -> tuple[float, float]:
    """Pearson's chi-square statistic of ``counts`` against equal expected counts, and its p-value
    (k − 1 degrees of freedom). One category, or no observations, gives (0, 1)."""
    k = len(counts)
    n = sum(counts)
    if k < 2 or n == 0:
        return 0.0, 1.0
    expected = n / k
    stat = sum((c - expected) ** 2 / expected for c in counts)
    return stat, _gammainc_upper((k - 1) / 2.0, stat / 2.0)


# -- audit -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditCheck:
    """One audit check.

    Attributes:
        name: what is checked.
        passed: the verdict.
        detail: the evidence (counts, the first violation, the p-value).
    """

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class AuditReport:
    """All checks of :func:`audit_run`.

    Attributes:
        run: the audited run directory.
        mode: the run's budget setting (``full``, ``budgetmix`` or turns).
        t_max: the environment's T_max.
        groups: groups found in the logs.
        checks: the verdicts.
    """

    run: Path
    mode: str
    t_max: int
    groups: int
    checks: tuple[AuditCheck, ...]

    @property
    def passed(self) -> bool:
        """Every check passed."""
        return all(c.passed for c in self.checks)

    def render(self) -> str:
        """Human-readable verdicts, one line per check."""
        lines = [f"BudgetMix audit of {self.run} (budget: {self.mode}, T_max = {self.t_max}, {self.groups} groups)"]
        for c in self.checks:
            lines.append(f"  [{'PASS' if c.passed else 'FAIL'}] {c.name}: {c.detail}")
        lines.append(f"verdict: {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(lines)


def _read_run(run: Path) -> tuple[dict, list[dict]]:
    info_path = run / "run.json"
    log_path = run / "rollouts.jsonl"
    if not info_path.is_file() or not log_path.is_file():
        raise FileNotFoundError(f"{run} is not a training run directory (needs run.json and rollouts.jsonl)")
    info = json.loads(info_path.read_text(encoding="utf-8"))
    groups = []
    for number, line in enumerate(log_path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            groups.append(json.loads(line))
        except json.JSONDecodeError:
            raise ValueError(f"{log_path}:{number}: not a JSON line") from None
    return info, groups


def budget_checks(mode: str, t_max: int, budgets: Sequence[int], *, alpha: float = 0.01) -> list[AuditCheck]:
    """The checks on the groups' budgets alone (one per group): every budget allowed by ``mode``
    and, for BudgetMix, their counts consistent with uniform over the candidates (chi-square p-value
    >= ``alpha``). Shared by :func:`audit_run` and the audit of verl data files."""
    allowed = list(Budget.parse(mode).turns(t_max))
    outside = [b for b in budgets if b not in allowed]
    checks = [AuditCheck(
        "budgets from the allowed set", not outside,
        f"allowed {allowed}; " + (f"{len(outside)} groups outside, e.g. budget {outside[0]}"
                                  if outside else "all budgets allowed"),
    )]
    if mode == "budgetmix":
        counts = Counter(budgets)
        observed = [counts.get(c, 0) for c in allowed]
        stat, p = chi_square_uniform(observed)
        checks.append(AuditCheck(
            "budgets uniform over the candidates", p >= alpha,
            f"counts {dict(zip(allowed, observed, strict=True))}; chi-square {stat:.2f} on {len(allowed) - 1} df, "
            f"p = {p:.3g} (fail below {alpha})",
        ))
    return checks


def audit_run(run: str | Path, *, alpha: float = 0.01) -> AuditReport:
    """Check a finished run's logs against the BudgetMix rules (module docstring).

    Checks: exactly one budget per group; every budget allowed (BudgetMix candidates, or T_max / the
    fixed budget); budget counts consistent with uniform over the candidates (chi-square p-value >=
    ``alpha``; BudgetMix only); every prompt announced the group's budget with the right counters;
    every trajectory that used its whole budget without success got outcome reward 0.
    """
    run = Path(run)
    info, groups = _read_run(run)
    mode = str(info["config"]["budget"])
    t_max = int(info["t_max"])
    checks = []

    bad_groups = [g for g in groups if len({t["budget"] for t in g["trajectories"]} | {g["budget"]}) != 1]
    checks.append(AuditCheck(
        "one budget per group", not bad_groups and bool(groups),
        f"{len(groups) - len(bad_groups)}/{len(groups)} groups ran all trajectories under the group's budget"
        + (f"; first violation: group {bad_groups[0]['group']}" if bad_groups else ""),
    ))

    checks += budget_checks(mode, t_max, [int(g["budget"]) for g in groups], alpha=alpha)

    hidden = info["config"]["prompt"]["budget_mode"] == "hidden"
    wrong_prompt = []
    turns_seen = 0
    for g in groups:
        for t in g["trajectories"]:
            for turn, counters in enumerate(t["announced"]):
                turns_seen += 1
                expected = None if hidden else [t["budget"], turn, t["budget"] - turn]
                if (list(counters) if counters is not None else None) != expected:
                    wrong_prompt.append((g["group"], t["sample"], turn, counters))
            if len(t["announced"]) != t["turns"]:
                wrong_prompt.append((g["group"], t["sample"], -1, ("prompts", len(t["announced"]), t["turns"])))
    checks.append(AuditCheck(
        "prompts hid the budget" if hidden else "prompts announced the sampled budget",
        not wrong_prompt and turns_seen > 0,
        f"{turns_seen} prompts checked" + ("" if hidden else " (total, completed, remaining)")
        + (f"; first violation (group, sample, turn, announced): {wrong_prompt[0]}" if wrong_prompt else ""),
    ))

    exhausted = [t for g in groups for t in g["trajectories"] if t["turns"] >= t["budget"] and not t["success"]]
    paid = [t for t in exhausted if t["outcome"] != 0]
    checks.append(AuditCheck(
        "exhausted trajectories got zero reward", not paid,
        f"{len(exhausted)} trajectories exhausted their budget"
        + (f"; {len(paid)} got a non-zero outcome reward, e.g. {paid[0]['outcome']}" if paid else ", all with outcome 0"),
    ))
    return AuditReport(run, mode, t_max, len(groups), tuple(checks))
