"""What ``arlkit demo`` writes for people (:mod:`arlkit.recipes.demo`): tables, findings, summary, plots.

- :func:`write_tables`: ``table.csv`` (Pass@k per budget, method and k with 95% bootstrap CIs over maps,
  and the paired differences Full - Base, BudgetMix - Full, BudgetMix - Base; a method's RL runs pooled,
  and each seed's run on its own), ``passkt.png`` and ``training_dynamics.png``.
- :func:`rl_runs`, :func:`eval_folders`, :func:`run_label`: where the RL runs and evaluations live, and
  their names.
- :func:`demo_findings`: the experiment's four findings, each stated as measured with its CI and a plain
  MET / MISSED (a missed finding is reported, never hidden).

``summary.md`` is written by :mod:`arlkit.recipes.demo_summary`.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from arlkit.report.figures import fig_dynamics, fig_passkt
from arlkit.report.outputs import save_figure
from arlkit.rundir import atomic_path

if TYPE_CHECKING:
    from arlkit.recipes.demo_plan import DemoPlan

__all__ = ["BOUND_LABEL", "METHODS", "RL_METHODS", "DemoTables", "base_r_single", "demo_findings",
           "eval_folders", "rl_runs", "run_label", "seed_caveat", "with_ci", "write_tables"]

METHODS = ("Base", "Full", "BudgetMix")
RL_METHODS = ("Full", "BudgetMix")

BASE_SHARE_OF_OPTIMUM = 0.5
"""Finding 1: the base's Pass@1 at T_max is at least this share of the expected optimum ..."""
BASE_R_SINGLE = 0.8
"""... and its R_single (mean oracle step quality on the fixed pool) at least this."""
RL_GAIN = 0.05
"""Finding 2: Full - Base at T_max is at least this (5 points) with its CI above 0."""
BUDGETMIX_SLACK = 0.02
"""Finding 4: at T_max BudgetMix is at most this (2 points) below Full."""



def seed_caveat(seeds: Sequence[int]) -> str:
    """Said under the findings (summary.md, report.html): what the findings' CIs do and do not cover."""
    if len(seeds) == 1:
        return ("The CIs cover the choice of held-out maps for one RL run per method; they do not cover the RL seed, "
                "which moves these differences by several points (docs/training.md, section 9, \"RL seeds\"); "
                "`arlkit demo --rl-seeds 0,1,2,3` pools four runs per method.")
    return (f"Full and BudgetMix are each pooled over {len(seeds)} RL runs (seeds {', '.join(map(str, seeds))}; per map, "
            "the mean of the runs' Pass@k). The CIs cover the choice of held-out maps; they do not cover the spread "
            "between RL seeds, which moves one run's differences by several points (each seed's differences: "
            "summary.md, \"Per RL seed\"; docs/training.md, section 9, \"RL seeds\").")


def run_label(method: str, seed: int | None) -> str:
    """``Base``, ``Full seed 0``, ...: how tables, plots and the report name a policy."""
    return method if seed is None else f"{method} seed {seed}"


def rl_runs(out: Path, plan: DemoPlan) -> dict[tuple[str, int], Path]:
    """``(method, seed) -> out/rl-<method>-s<seed>``: one RL run per method and RL seed, in plan order."""
    return {(method, seed): out / f"rl-{method.lower()}-s{seed}" for method in RL_METHODS for seed in plan.rl_seeds}


def eval_folders(plan: DemoPlan) -> dict[tuple[str, int | None], str]:
    """``(method, seed) -> `` the policy's folder under ``eval/`` (``base``, ``full-s0``, ...); Base has seed None."""
    return {("Base", None): "base", **{(m, s): f"{m.lower()}-s{s}" for m in RL_METHODS for s in plan.rl_seeds}}


_EPS = 1e-9  # thresholds compare with this slack (a 5.0-point gain computed as 0.04999999999 still counts)

BOUND_LABEL = "expected optimum (mean exact success probability; sampled Pass@k can exceed it)"


@dataclass
class DemoTables:
    """The numbers behind ``table.csv`` and ``summary.md``.

    Attributes:
        rows: rows of ``table.csv``: ``budget`` (``25%``), ``T``, ``k``, ``method`` (a method or a paired
            difference ``A - B``), ``pass``, ``ci_low``, ``ci_high`` (shares in [0, 1]; differences in [-1, 1]).
        budgets_T: the evaluated budgets in turns, in plan order.
        ks: the k of Pass@k.
        headroom: mean budget headroom of the evaluated maps per T.
        bound: the expected optimum per T: the mean over maps of the exact success probability of
            the optimal policy within T turns.
        dynamics: per RL run (by :func:`run_label`), the first and last R_multi, R_single and training success.
        t_max: the environment's T_max.
    """

    rows: list[dict[str, Any]]
    budgets_T: list[int]
    ks: list[int]
    headroom: dict[int, float]
    bound: dict[int, float]
    dynamics: dict[str, dict[str, float]]
    t_max: int


def _load(out: Path, folder: str, budget: str) -> tuple[list[Any], int]:
    from arlkit.rollout.records import read_trajectories

    run = out / "eval" / folder / budget.rstrip("%")
    trajectories = read_trajectories(run / "trajectories.jsonl")
    with open(run / "passkt.csv", encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    return trajectories, int(row["T"])


def write_tables(out: Path, plan: DemoPlan, runs: Mapping[tuple[str, int], Path]) -> DemoTables:
    """``table.csv``, ``passkt.png`` and ``training_dynamics.png`` from the evaluations in ``out/eval/``.

    A method's value on a map is the mean of its runs' per-map Pass@k (each from that run's own samples):
    the expected Pass@k of the method with its RL seed drawn at random. With several seeds, each run also
    gets its own rows (``Full seed 0``), with its differences ``Full seed 0 - Base`` and ``BudgetMix seed 0
    - Full seed 0`` (the same seed, paired over maps)."""
    from arlkit.envs import make
    from arlkit.metrics import bootstrap_mean, paired_bootstrap_difference
    from arlkit.metrics.passkt import per_task_pass

    env = make(plan.env.name, **plan.env.args)
    tasks = env.tasks("test", plan.eval_tasks)
    task_ids = [t.task_id for t in tasks]
    ks = [k for k in (1, 2, 4, 8, 16) if k <= plan.eval_samples]
    folders = eval_folders(plan)
    seeds = list(plan.rl_seeds)
    rows: list[dict[str, Any]] = []
    budgets_T: list[int] = []

    def add(budget: str, T: int, k: int, name: str, est: Any) -> None:
        rows.append({"budget": budget, "T": T, "k": k, "method": name, "pass": est.value, "ci_low": est.low,
                     "ci_high": est.high})

    for budget in plan.budgets:
        per_run: dict[tuple[str, int | None], dict[int, np.ndarray]] = {}
        for key, folder in folders.items():
            trajectories, T = _load(out, folder, budget)
            per_run[key] = {k: per_task_pass(trajectories, T, k, "announced", task_ids) for k in ks}
        if T not in budgets_T:
            budgets_T.append(T)
        pooled = {m: {k: np.mean([per_run[key][k] for key in folders if key[0] == m], axis=0) for k in ks}
                  for m in METHODS}
        singles = [key for key in folders if key[1] is not None] if len(seeds) > 1 else []
        for k in ks:
            for method in METHODS:
                add(budget, T, k, method, bootstrap_mean(pooled[method][k], resamples=2000, seed=0))
            for key in singles:
                add(budget, T, k, run_label(*key), bootstrap_mean(per_run[key][k], resamples=2000, seed=0))
        for k in ks:
            for a, b in (("BudgetMix", "Full"), ("Full", "Base"), ("BudgetMix", "Base")):
                diff = paired_bootstrap_difference(pooled[a][k], pooled[b][k], resamples=2000, seed=0)
                add(budget, T, k, f"{a} - {b}", diff)
            for seed in seeds if singles else []:
                for a, b in ((("Full", seed), ("Base", None)), (("BudgetMix", seed), ("Full", seed))):
                    diff = paired_bootstrap_difference(per_run[a][k], per_run[b][k], resamples=2000, seed=0)
                    add(budget, T, k, f"{run_label(*a)} - {run_label(*b)}", diff)
    headroom, bound = {}, {}
    for T in budgets_T:
        h, p = [], []
        for task in tasks:
            env.reset(task, 0)
            h.append(env.headroom(T))
            p.append(env.success_probability(T))
        headroom[T], bound[T] = float(np.mean(h)), float(np.mean(p))
    with atomic_path(out / "table.csv") as tmp, open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["budget", "T", "k", "method", "pass", "ci_low", "ci_high"])
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, **{k: f"{row[k]:.6f}" for k in ("pass", "ci_low", "ci_high")}})
    _plot_pass(out / "passkt.png", rows, bound)
    dynamics = _dynamics(out / "training_dynamics.png", runs)
    return DemoTables(rows, budgets_T, ks, headroom, bound, dynamics, int(env.t_max))


def base_r_single(runs: Mapping[Any, Path]) -> float | None:
    """The base (behaviour-cloned) model's optimal-action rate on the R_single state pool (the issue's
    "R_single >= 0.8"; ``val/r_single_optimal``: the share of sampled replies that are oracle-optimal for
    the announced remaining budget). The RL runs validate their starting checkpoint at step 0
    (:mod:`arlkit.recipes.rl`), each on the pool its seed draws, so it is the mean of the runs' step-0
    values (``None`` when no run validated step 0)."""
    from arlkit.train import read_metrics

    values = [float(line["val/r_single_optimal"]) for run in runs.values() for line in read_metrics(run / "metrics.jsonl")
              if int(line["step"]) == 0 and "val/r_single_optimal" in line]
    return float(np.mean(values)) if values else None


# -- findings ------------------------------------------------------------------------------------------


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def with_ci(row: Mapping[str, Any], signed: bool = True) -> str:
    f = _points if signed else (lambda x: f"{100 * x:.1f}")
    return f"{f(row['pass'])} [{f(row['ci_low'])}, {f(row['ci_high'])}]"


def _verdict(met: bool) -> str:
    return "MET" if met else "MISSED"


def demo_findings(rows: Sequence[Mapping[str, Any]], bound: Mapping[int, float], r_single: float | None) -> list[str]:
    """The experiment's four findings on the held-out maps (Pass@1, 95% CIs: bootstrap over maps, paired
    for the differences), one line each, stated as measured with ``MET`` or ``MISSED``:

    1. the base plays: Base Pass@1 at T_max >= :data:`BASE_SHARE_OF_OPTIMUM` x the expected optimum,
       and its optimal-action rate >= :data:`BASE_R_SINGLE` (``r_single``; ``None``: not measured, so missed);
    2. RL helps where the budget is ample: Full - Base at T_max >= :data:`RL_GAIN` with the CI above 0;
    3. and less where it is tight: Full - Base at the smallest budget is below that at T_max, which is
       resolvably positive (CI above 0); by point estimate (the line says whether the two CIs overlap);
    4. BudgetMix is robust: BudgetMix - Full at the smallest budget > 0 with the CI above 0, and at
       T_max no more than :data:`BUDGETMIX_SLACK` below 0.

    Args:
        rows: ``table.csv``'s rows (:attr:`DemoTables.rows`); only ``k = 1`` is read.
        bound: the expected optimum per T (:attr:`DemoTables.bound`).
        r_single: the base model's optimal-action rate on the R_single pool (:func:`base_r_single`).
    """
    cell = {(r["method"], int(r["T"])): r for r in rows if int(r["k"]) == 1}
    budget = {int(r["T"]): str(r["budget"]) for r in rows}
    t_max, tight = max(budget), min(budget)

    def at(T: int) -> str:
        return f"T={T} ({budget[T]})"

    base, optimum = cell[("Base", t_max)], bound[t_max]
    plays = base["pass"] >= BASE_SHARE_OF_OPTIMUM * optimum - _EPS
    steps = r_single is not None and r_single >= BASE_R_SINGLE - _EPS
    shown = "not measured (no step-0 validation)" if r_single is None else f"{r_single:.3f}"
    one = (f"1. The base plays: {_verdict(plays and steps)}. Base Pass@1 at {at(t_max)} is {with_ci(base, False)}% "
           f"({'>=' if plays else '<'} {BASE_SHARE_OF_OPTIMUM:g} x the expected optimum {100 * optimum:.1f}% = "
           f"{100 * BASE_SHARE_OF_OPTIMUM * optimum:.1f}%); its optimal-action rate on the fixed R_single state "
           f"pools (mean of the RL runs' step-0 validations) is {shown} (needs >= {BASE_R_SINGLE:g}).")

    gain = cell[("Full - Base", t_max)]
    helps = gain["pass"] >= RL_GAIN - _EPS and gain["ci_low"] > 0
    two = (f"2. RL helps where the budget is ample: {_verdict(helps)}. Full - Base at {at(t_max)} is "
           f"{with_ci(gain)} points (needs >= {_points(RL_GAIN)} with the CI above 0).")

    small = cell[("Full - Base", tight)]
    shrinks = gain["ci_low"] > 0 and small["pass"] < gain["pass"]
    overlap = small["ci_high"] >= gain["ci_low"] and gain["ci_high"] >= small["ci_low"]
    if small["pass"] < gain["pass"]:
        how = "the advantage shrinks"
    else:
        how = "the advantage does not shrink: it is as large or larger at the tight budget (RT found it smaller)"
    if gain["ci_low"] <= 0:
        how += "; at T_max it is not resolvable (CI contains 0)"
    three = (f"3. ... and less where the budget is tight: {_verdict(shrinks)}. Full - Base is {with_ci(small)} points at "
             f"{at(tight)} vs {with_ci(gain)} at {at(t_max)}: {how} (point estimates; the two CIs "
             f"{'overlap' if overlap else 'do not overlap'}).")

    mix_tight, mix_full = cell[("BudgetMix - Full", tight)], cell[("BudgetMix - Full", t_max)]
    robust = mix_tight["pass"] > 0 and mix_tight["ci_low"] > 0
    parity = mix_full["pass"] >= -BUDGETMIX_SLACK - _EPS
    four = (f"4. BudgetMix is robust: {_verdict(robust and parity)}. BudgetMix - Full is {with_ci(mix_tight)} points at "
            f"{at(tight)} (needs > 0 with the CI above 0: {'yes' if robust else 'no'}) and {with_ci(mix_full)} at "
            f"{at(t_max)} (needs >= {_points(-BUDGETMIX_SLACK)}: {'yes' if parity else 'no'}).")
    return [one, two, three, four]


_COLOURS = {"Base": "tab:gray", "Full": "tab:blue", "BudgetMix": "tab:orange"}
_SEED_COLOURS = {"Full": ("tab:blue", "tab:cyan", "navy", "tab:purple"),
                 "BudgetMix": ("tab:orange", "tab:red", "gold", "tab:brown")}


def _plot_pass(path: Path, rows: list[dict[str, Any]], bound: dict[int, float]) -> None:
    """``passkt.png``: the three methods' Pass@(K,T) with the optimum at K = 1."""
    curves = [{"policy": r["method"], **r, "expected_optimum": bound[r["T"]] if r["k"] == 1 else None}
              for r in rows if r["method"] in METHODS]  # fmt: skip
    save_figure(fig_passkt(curves, title="Base, Full and BudgetMix on held-out maps", colors=_COLOURS), path)


def _dynamics(path: Path, runs: Mapping[tuple[str, int], Path]) -> dict[str, dict[str, float]]:
    """``training_dynamics.png`` (R_multi, R_single and training success, a line per RL run) and each run's
    first and last value of each, by :func:`run_label`."""
    from arlkit.train import read_metrics

    metrics = {run_label(*key): read_metrics(run / "metrics.jsonl") for key, run in runs.items()}
    seeds = sorted({seed for _, seed in runs})
    colours = {run_label(m, s): _SEED_COLOURS[m][i % 4] for m, s in runs for i in [seeds.index(s)]}
    panels = [("val/reward", "R_multi: held-out reward (T_max)"), ("val/r_single", "R_single: oracle step quality (fixed pool)"),
              ("reward/success", "training success (own budgets)")]  # fmt: skip
    save_figure(fig_dynamics(metrics, panels, colors=colours), path)
    summary: dict[str, dict[str, float]] = {}
    for label, records in metrics.items():
        d: dict[str, float] = {}
        for key, name in (("val/reward", "r_multi"), ("val/r_single", "r_single"), ("reward/success", "succ")):
            seen = [m[key] for m in records if key in m]
            if seen:
                d[f"{name}_0"], d[f"{name}_1"] = seen[0], seen[-1]
        summary[label] = d
    return summary
