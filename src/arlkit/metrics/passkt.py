"""Pass@(K,T) tables from trajectory records (docs/metrics.md#pass-at-kt to #budget-headroom; RT §2.2, App. B.3).

RT: "What Does Multi-Turn Reinforcement Learning Really Improve in LLM Agents?" (docs/glossary.md)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from arlkit.metrics.bootstrap import bootstrap_mean
from arlkit.metrics.passk import pass_at_k_per_task, successes_within
from arlkit.rollout.records import Trajectory

__all__ = [
    "CSV_HEADER",
    "PassRow",
    "default_ks",
    "pass_table",
    "per_task_pass",
    "task_counts",
    "expected_optimum_per_task",
]


@dataclass(frozen=True)
class PassRow:
    """One cell of the Pass@(K,T) grid (one line of ``passkt.csv``)."""

    env: str
    policy: str
    budget_mode: str
    T: int
    T_frac: float
    k: int
    pass_: float
    ci_low: float
    ci_high: float
    expected_optimum: float | None
    n_tasks: int
    n_samples: int
    headroom: float | None = None

    def csv_row(self) -> list[str]:
        ub = "" if self.expected_optimum is None else f"{self.expected_optimum:.6f}"
        hr = "" if self.headroom is None else f"{self.headroom:.6f}"
        return [
            self.env,
            self.policy,
            self.budget_mode,
            str(self.T),
            f"{self.T_frac:.4f}",
            str(self.k),
            f"{self.pass_:.6f}",
            f"{self.ci_low:.6f}",
            f"{self.ci_high:.6f}",
            ub,
            str(self.n_tasks),
            str(self.n_samples),
            hr,
        ]


CSV_HEADER = [
    "env", "policy", "budget_mode", "T", "T_frac", "k", "pass", "ci_low", "ci_high", "expected_optimum", "n_tasks",
    "n_samples", "headroom",
]  # fmt: skip


def default_ks(samples: int) -> list[int]:
    """Powers of two up to ``samples``."""
    ks, k = [], 1
    while k <= samples:
        ks.append(k)
        k *= 2
    return ks


def task_counts(
    trajectories: Sequence[Trajectory], T: int, budget_mode: str, task_ids: Sequence[str]
) -> list[tuple[int, int]]:
    """``(n, c)`` of each task in ``task_ids``: trajectories and successes within budget ``T``.

    ``announced``: only trajectories run under budget ``T`` count (never mix announced budgets).
    ``hidden``: trajectories run under any budget ``>= T`` count, truncated at ``T``
    (``c(T) = #{success_turn <= T}``); they must all come from one run budget.
    """
    by_task: dict[str, list[int | None]] = defaultdict(list)
    run_budgets = set()
    for traj in trajectories:
        if budget_mode == "announced":
            if traj.budget != T:
                continue
        elif traj.budget < T:
            continue
        run_budgets.add(traj.budget)
        by_task[traj.task_id].append(traj.success_turn)
    if budget_mode == "hidden" and len(run_budgets) > 1:
        raise ValueError(f"hidden-mode records come from several run budgets {sorted(run_budgets)}; use one run")
    return [(len(by_task.get(tid, [])), successes_within(by_task.get(tid, []), T)) for tid in task_ids]


def per_task_pass(
    trajectories: Sequence[Trajectory], T: int, k: int, budget_mode: str, task_ids: Sequence[str]
) -> np.ndarray:
    """pass@k of each task in ``task_ids`` within budget ``T`` (see :func:`task_counts`)."""
    counts = task_counts(trajectories, T, budget_mode, task_ids)
    for task_id, (n, _) in zip(task_ids, counts, strict=True):
        if n < k:
            raise ValueError(f"task {task_id} has {n} trajectories at T={T}, fewer than k={k}")
    return pass_at_k_per_task(counts, k)


def expected_optimum_per_task(success_probabilities: np.ndarray, k: int) -> np.ndarray:
    """The best Pass@k any policy can reach per task: ``1 - (1 - p*)^k`` with ``p*`` the optimal
    single-trajectory success probability within the budget. For deterministic environments
    ``p*`` is 0 or 1 and this is the structural bound (shortest solution <= T)."""
    return 1.0 - (1.0 - np.clip(success_probabilities, 0.0, 1.0)) ** k


def pass_table(
    trajectories: Sequence[Trajectory],
    *,
    env: str,
    policy: str,
    budget_mode: str,
    budgets: Sequence[int],
    ks: Sequence[int],
    t_max: int,
    task_ids: Sequence[str],
    success_probability: Callable[[int], np.ndarray] | None = None,
    headroom: Callable[[int], np.ndarray] | None = None,
    resamples: int = 2000,
    seed: int = 0,
    clusters: Mapping[str, object] | None = None,
) -> list[PassRow]:
    """Every (T, k) cell for one policy, with bootstrap CIs over tasks and the expected optimum.

    ``success_probability(T)`` returns ``p*`` per task (in ``task_ids`` order) when the
    environment has an oracle; ``headroom(T)`` the budget headroom per task when it has one.
    """
    rows = []
    labels = [clusters[t] for t in task_ids] if clusters else None
    for T in budgets:
        probs = success_probability(T) if success_probability is not None else None
        mean_headroom = float(np.mean(headroom(T))) if headroom is not None else None
        n_samples = min((n for n, _ in task_counts(trajectories, T, budget_mode, task_ids)), default=0)
        for k in ks:
            values = per_task_pass(trajectories, T, k, budget_mode, task_ids)
            est = bootstrap_mean(values, resamples=resamples, seed=seed, clusters=labels)
            ub = float(expected_optimum_per_task(probs, k).mean()) if probs is not None else None
            rows.append(
                PassRow(
                    env, policy, budget_mode, T, T / t_max, k, est.value, est.low, est.high, ub, len(task_ids),
                    n_samples, mean_headroom,
                )  # fmt: skip
            )
    return rows
