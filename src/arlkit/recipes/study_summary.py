"""What ``arlkit study`` writes for people (:mod:`arlkit.recipes.study`): RT's takeaways stated for the pair,
``summary.md`` and ``report.html``.

Each takeaway gives the measured number with its 95% CI (a percentile bootstrap over tasks; RL − Base
paired over tasks) and a plain reading of the CI: better, worse, or no resolvable difference. The
readings never decide beyond the CI: a difference whose CI contains 0 is reported as unresolved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arlkit.recipes.readings import (
    analysis_readings, depth_reading, difference_reading, flows_reading, judge_reading, likelihood_reading, resolved,
)
from arlkit.report.outputs import estimate_dict
from arlkit.rundir import atomic_write_text

if TYPE_CHECKING:
    from arlkit.recipes.eval import EvalResult
    from arlkit.recipes.study import StudyConfig

__all__ = ["pass_takeaways", "write_study_summary"]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _diff(est: Any) -> str:
    return f"{100 * est.value:+.1f} [{100 * est.low:+.1f}, {100 * est.high:+.1f}] points"


def _resolved(est: Any) -> bool:
    return resolved(estimate_dict(est))


def _reading(est: Any, better: str, worse: str) -> str:
    return difference_reading(estimate_dict(est), better, worse)


def pass_takeaways(rows: Sequence[Any], differences: Mapping[tuple[int, int], Any], labels: Mapping[str, str]) -> list[str]:
    """RT's trajectory-level takeaways for the pair: Pass@1 and Pass@K at the largest budget, how the gain
    moves with the budget, and the share of the expected optimum each model reaches.

    ``rows`` are :class:`~arlkit.metrics.passkt.PassRow` of both models, ``differences`` the paired
    RL − Base estimates by ``(T, k)``, ``labels`` maps each row's policy to ``Base`` or ``RL``."""
    cell = {(labels[r.policy], r.T, r.k): r for r in rows if r.policy in labels}
    budgets = sorted({T for (T, _) in differences})
    ks = sorted({k for (_, k) in differences})
    if not budgets:
        return ["- Pass@(K,T): no cell has both models (see summary.md's notes)."]
    top, low, k1, kmax = budgets[-1], budgets[0], ks[0], ks[-1]

    def both(T: int, k: int) -> str:
        return f"Base {_pct(cell['Base', T, k].pass_)}%, RL {_pct(cell['RL', T, k].pass_)}%"

    d1 = differences[(top, k1)]
    lines = [f"- **Pass@{k1} at T = {top}** (the largest budget): {both(top, k1)}; RL - Base {_diff(d1)}: "
             f"{_reading(d1, 'RL solves more tasks per try', 'RL solves fewer tasks per try')}."]
    if kmax > k1:
        dk = differences[(top, kmax)]
        trend = ("Neither difference is resolvable, so no trend over K can be read" if not (_resolved(d1) or _resolved(dk))
                 else "The gain is smaller than at K = 1: RL mostly sharpens what Base reaches within K tries"
                 if dk.value < d1.value else "The gain is at least as large as at K = 1: RL also widens what K tries reach")
        lines.append(f"- **Pass@{kmax} at T = {top}**: {both(top, kmax)}; RL - Base {_diff(dk)}: "
                     f"{_reading(dk, 'RL reaches more tasks', 'RL reaches fewer tasks')}. {trend} "
                     "(point estimates; read the CIs).")
    if low < top:
        dl = differences[(low, k1)]
        trend = ("neither is resolvable, so no trend over the budget can be read" if not (_resolved(d1) or _resolved(dl))
                 else f"the gain {'grows' if d1.value > dl.value else 'does not grow'} with the budget")
        lines.append(f"- **Turn budget**: RL - Base at Pass@{k1} is {_diff(dl)} at T = {low} and {_diff(d1)} at T = "
                     f"{top}: {trend} (point estimates; read the CIs).")
    optimum = cell["Base", top, k1].expected_optimum
    if optimum:
        lines.append(f"- **Expected optimum at T = {top}**: {_pct(optimum)}% (docs/metrics.md, Expected optimum); "
                     f"Base reaches {100 * cell['Base', top, k1].pass_ / optimum:.0f}% of it, RL "
                     f"{100 * cell['RL', top, k1].pass_ / optimum:.0f}% at Pass@{k1}.")
    return lines


def _dynamics(runs: Sequence[str]) -> list[str]:
    from arlkit.train import read_metrics

    lines = []
    for run in runs:
        path = Path(run) / "metrics.jsonl"
        records = read_metrics(path) if path.is_file() else []
        parts = []
        for key, name in (("val/reward", "R_multi"), ("val/r_single", "R_single"), ("reward/success", "training success")):
            seen = [m[key] for m in records if key in m]
            if seen:
                parts.append(f"{name} {seen[0]:.3f} -> {seen[-1]:.3f}")
        shown = "; ".join(parts) or "its curves are in report.html"
        lines.append(f"- Training run {Path(run).name} ({len(records)} steps logged): {shown}.")
    return lines


def _table(rows: Sequence[Any], differences: Mapping[tuple[int, int], Any], labels: Mapping[str, str]) -> list[str]:
    cell = {(labels[r.policy], r.T, r.k): r for r in rows if r.policy in labels}
    lines = ["| T | k | Base | RL | RL - Base (paired) |", "|---|---|---|---|---|"]
    for (name, T, k), row in sorted(cell.items(), key=lambda item: (item[0][1], item[0][2])):
        if name != "Base" or ("RL", T, k) not in cell:
            continue
        rl = cell["RL", T, k]
        diff = differences.get((T, k))
        lines.append(f"| {T} | {k} | {_pct(row.pass_)} [{_pct(row.ci_low)}, {_pct(row.ci_high)}] | "
                     f"{_pct(rl.pass_)} [{_pct(rl.ci_low)}, {_pct(rl.ci_high)}] | {_diff(diff) if diff else 'n/a'} |")
    return lines


def write_study_summary(out: Path, config: StudyConfig, result: EvalResult, stages: Mapping[str, str],
                        seconds: Mapping[str, float]) -> list[str]:
    """``summary.md`` and ``report.html`` of the study in ``out``; the takeaways."""
    from arlkit.report.eval_sections import EvalRun, group_eval_runs, paired_differences
    from arlkit.report.html import write_html_report

    labels = {config.base: "Base", config.rl: "RL"}
    groups = group_eval_runs([EvalRun.load(result.out)], names=labels, roots=[out])
    differences = {(d.T, d.k): d.estimate for g in groups for d in paired_differences(
        g, resamples=config.eval.bootstrap, seed=config.eval.seed, every_k=True) if (d.minuend, d.subtrahend) == ("RL", "Base")}
    analysis, top = out / "analysis", max(result.budgets)
    takeaways = [
        *pass_takeaways(result.rows, differences, labels),
        *analysis_readings(analysis, rl="RL", units="tasks", source=f"both models' trajectories at T = {top}"),
        depth_reading(analysis), likelihood_reading(analysis),
        *([judge_reading(analysis, config.judge)] if config.judge else []),
        flows_reading(analysis, labels), *_dynamics(config.train_runs),
    ]
    e = config.eval
    lines = [
        f"# arlkit study: {config.base} (Base) vs {config.rl} (RL) on {e.env.name}", "",
        f"{len(result.task_ids)} {e.split} tasks x {e.samples} samples, budgets T = "
        f"{', '.join(map(str, result.budgets))} of T_max = {result.t_max} ({e.prompt.budget_mode}); step-level analyses "
        f"on the trajectories at T = {top}{' (quick pools)' if config.quick else ''}"
        + (f"; judge {config.judge}" if config.judge else "") + ". Intervals: 95% percentile bootstrap over tasks.", "",
        "## Takeaways", "", *takeaways, "",
        "## Pass@(K,T) in %", "", *_table(result.rows, differences, labels), "",
        "## Stages", "", f"- eval: {len(result.trajectories)} trajectories ({result.resumed} found on disk and kept)",
        *(f"- {kind}: {outcome}" for kind, outcome in stages.items()), "",
    ]
    if result.notes:
        lines += ["## Notes", "", *(note if note.startswith("- ") else f"- {note}" for note in result.notes), ""]
    total = sum(seconds.values())
    lines += [f"Wall time of this call: {total / 60:.1f} min ({', '.join(f'{k} {v:.0f}s' for k, v in seconds.items())}).", "",
              "Files: eval/ (passkt.csv, trajectories.jsonl, summary.md), analysis/ (<kind>.csv/.png/.md/.json), "
              "report.html, summary.md, timing.json."]
    atomic_write_text(out / "summary.md", "\n".join(lines) + "\n")
    write_html_report([result.out, analysis, *config.train_runs], out / "report.html",
                      title=f"arlkit study: {config.base} vs {config.rl} on {e.env.name}", findings=takeaways, names=labels)
    return takeaways
