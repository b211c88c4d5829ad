"""The files each analysis writes into its ``--out`` directory: CSV + PNG + markdown + JSON.

=============  ==============================================================================
analysis       files
=============  ==============================================================================
steps          steps.csv (one row per state), steps.png (scatter), steps.md, steps.json
depth          depth.csv (one row per bin), depth.png, depth.md, depth.json
errors         errors.csv (one row per error state), errors.png, errors.md, errors.json
likelihood     likelihood_turns.csv, likelihood_trajectories.csv, likelihood_pairs.csv,
               likelihood.png, likelihood.md, likelihood.json
judge          judge.csv (one row per judged action), judge.png, judge.md, judge.json
flows          flows_nodes.csv, flows_links.csv, loops.csv, flows.png, flows.html, flows.md,
               flows.json
=============  ==============================================================================
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from arlkit.analysis.depth import DepthBin
from arlkit.analysis.errors import ErrorsResult, PairedRates
from arlkit.analysis.flows import FlowCounts, LoopStats, LoopSummary
from arlkit.analysis.likelihood import LikelihoodResult
from arlkit.report.outputs import estimate_dict, fmt_estimate, fmt_pct, save_figure, write_csv, write_json, write_text
from arlkit.analysis.process import JudgeAgreement
from arlkit.analysis.sankey import label_colors, sankey_layout, sankey_svg
from arlkit.analysis.steps import CSV_HEADER, QualityComparison, StepsResult, row_values
from arlkit.metrics.bootstrap import Estimate
from arlkit.report import figures

__all__ = ["write_depth", "write_errors", "write_flows", "write_judge", "write_likelihood", "write_steps"]


def _header(title: str, meta: Mapping[str, Any]) -> list[str]:
    lines = [f"# {title}", ""]
    for key in ("env", "base", "rl", "judge", "runs", "quality"):
        if meta.get(key):
            value = ", ".join(map(str, meta[key])) if isinstance(meta[key], (list, tuple)) else meta[key]
            lines.append(f"- {key}: {value}")
    lines.append("")
    return lines


def _comparison_table(c: QualityComparison) -> list[str]:
    return [
        "| measure | value [95% CI] |",
        "|---|---|",
        f"| states where RL is better | {fmt_pct(c.share_rl_better)} |",
        f"| states where base is better | {fmt_pct(c.share_base_better)} |",
        f"| ties | {100 * c.share_tie:.1f}% |",
        f"| mean quality, base | {fmt_estimate(c.base_mean)} |",
        f"| mean quality, RL | {fmt_estimate(c.rl_mean)} |",
        f"| RL − base (paired) | {fmt_estimate(c.difference)} |",
        "",
        f"{c.n_states} states over {c.n_tasks} tasks; intervals: percentile bootstrap over tasks.",
    ]


def _comparison_dict(c: QualityComparison | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "n_states": c.n_states,
        "n_tasks": c.n_tasks,
        "share_rl_better": estimate_dict(c.share_rl_better),
        "share_base_better": estimate_dict(c.share_base_better),
        "share_tie": c.share_tie,
        "base_mean": estimate_dict(c.base_mean),
        "rl_mean": estimate_dict(c.rl_mean),
        "difference": estimate_dict(c.difference),
    }


def _finish(out: Path, kind: str, lines: list[str], notes: Sequence[str], files: Sequence[str]) -> None:
    if notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in notes]
    lines += ["", "Files: " + ", ".join(files)]
    write_text(out / f"{kind}.md", "\n".join(lines).rstrip() + "\n")


def write_steps(result: StepsResult, out: Path, meta: Mapping[str, Any]) -> None:
    """steps.csv / .png / .md / .json of a matched-state analysis."""
    out = Path(out)
    write_csv(out / "steps.csv", CSV_HEADER, (row_values(r) for r in result.rows))
    c = result.comparison
    title = f"Matched states on {meta.get('env', '?')}: RL better at {100 * c.share_rl_better.value:.1f}% of states"
    fig = figures.fig_quality_scatter([r.base_quality for r in result.rows], [r.rl_quality for r in result.rows],
                                      [r.source for r in result.rows], title=title)  # fmt: skip
    save_figure(fig, out / "steps.png")
    lines = _header("Step-level action quality at matched states", meta)
    lines.append(f"G = {result.actions} next actions per policy per state; states drawn equally from both policies' trajectories.")
    lines.append("")
    lines += _comparison_table(c)
    write_json(out / "steps.json", "steps", {**meta, "actions": result.actions, "comparison": _comparison_dict(c), "notes": result.notes})
    _finish(out, "steps", lines, result.notes, ["steps.csv", "steps.png", "steps.md", "steps.json"])


def write_depth(bins: Sequence[DepthBin], out: Path, meta: Mapping[str, Any], notes: Sequence[str] = ()) -> None:
    """depth.csv / .png / .md / .json: RL − base quality per normalised-depth bin."""
    out = Path(out)
    header = ["low", "high", "center", "n_states", "rl_minus_base", "ci_low", "ci_high", "base_mean", "rl_mean"]

    def vals(b: DepthBin) -> list[Any]:
        d = b.difference
        return [b.low, b.high, b.center, b.n_states, d.value if d else None, d.low if d else None, d.high if d else None,
                b.base_mean, b.rl_mean]  # fmt: skip

    write_csv(out / "depth.csv", header, (vals(b) for b in bins))
    nan = float("nan")
    fig = figures.fig_depth(
        [b.center for b in bins], [b.difference.value if b.difference else nan for b in bins],
        [b.difference.low if b.difference else nan for b in bins], [b.difference.high if b.difference else nan for b in bins],
        [b.n_states for b in bins], title=f"RL − base quality by depth ({meta.get('pool', 'matched')} states)",
    )  # fmt: skip
    save_figure(fig, out / "depth.png")
    lines = _header("RL − base action quality by normalised depth t/T", meta)
    lines += ["| t/T | states | RL − base [95% CI] | base | RL |", "|---|---|---|---|---|"]
    for b in bins:
        lines.append(
            f"| {b.low:.2f}–{b.high:.2f} | {b.n_states} | {fmt_estimate(b.difference)} | "
            f"{'n/a' if math.isnan(b.base_mean) else f'{b.base_mean:.3f}'} | {'n/a' if math.isnan(b.rl_mean) else f'{b.rl_mean:.3f}'} |"
        )
    data = [{"low": b.low, "high": b.high, "n_states": b.n_states, "difference": estimate_dict(b.difference)} for b in bins]
    write_json(out / "depth.json", "depth", {**meta, "bins": data, "notes": list(notes)})
    _finish(out, "depth", lines, notes, ["depth.csv", "depth.png", "depth.md", "depth.json"])


def _rates_dict(p: PairedRates | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {"n_states": p.n_states, "samples": p.samples, "base": estimate_dict(p.base), "rl": estimate_dict(p.rl),
            "difference": estimate_dict(p.difference)}  # fmt: skip


def _triple(e: Estimate) -> tuple[float, float, float]:
    return (e.value, e.low, e.high)


def write_errors(result: ErrorsResult, out: Path, meta: Mapping[str, Any]) -> None:
    """errors.csv / .png / .md / .json of an error-state analysis."""
    out = Path(out)
    quality = {r.index: r for r in result.rows}
    header = ["index", "source", "task_id", "sample", "origin_t", "t", "budget", "remaining", "depth", "injected_action",
              "detail", "base_quality", "rl_quality", "base_continuation_success", "rl_continuation_success"]  # fmt: skip
    rows = []
    for i, s in enumerate(result.states):
        q = quality.get(i)
        rows.append([
            i, s.source, s.point.task_sample[0], s.point.task_sample[1], s.origin.t, s.point.t, s.point.budget,
            s.point.remaining, s.point.depth, s.action, s.detail, q.base_quality if q else None, q.rl_quality if q else None,
            result.base_success[i] if i < len(result.base_success) else None,
            result.rl_success[i] if i < len(result.rl_success) else None,
        ])  # fmt: skip
    write_csv(out / "errors.csv", header, rows)
    cont = result.continuation
    corr = result.correction.controlled
    fig = figures.fig_errors(
        [r.base_quality for r in result.rows], [r.rl_quality for r in result.rows], [r.source for r in result.rows],
        {"base": _triple(cont.base), "rl": _triple(cont.rl)} if cont else None,
        {"base": _triple(corr.base), "rl": _triple(corr.rl)} if corr else None,
        title=f"Error states on {meta.get('env', '?')} ({len(result.states)} states)",
    )  # fmt: skip
    save_figure(fig, out / "errors.png")
    lines = _header("Error states and error recovery", meta)
    if result.comparison is not None:
        lines += ["## Action quality at error states", ""] + _comparison_table(result.comparison) + [""]
    if cont is not None:
        lines += [
            "## Continuation success from identical error states", "",
            f"Each policy continued {cont.samples} time(s) from each of {cont.n_states} restored error states to the end of the budget.", "",
            "| policy | success rate [95% CI] |", "|---|---|",
            f"| base | {fmt_pct(cont.base)} |", f"| RL | {fmt_pct(cont.rl)} |", f"| RL − base (paired) | {fmt_pct(cont.difference)} |", "",
        ]  # fmt: skip
    lines += ["## Error correction after a failed call", ""]
    if corr is not None:
        lines += [
            f"From {corr.n_states} prefixes ending in a failed call, {corr.samples} next action(s) per policy:", "",
            "| policy | corrected [95% CI] |", "|---|---|",
            f"| base | {fmt_pct(corr.base)} |", f"| RL | {fmt_pct(corr.rl)} |", f"| RL − base (paired) | {fmt_pct(corr.difference)} |", "",
        ]  # fmt: skip
    for side, (n, rate) in result.correction.observed.items():
        shown = "n/a" if math.isnan(rate) else f"{100 * rate:.1f}%"
        lines.append(f"- in the {side} records: {n} steps follow a failed call; {shown} of them did not fail")
    observed = {side: {"n": n, "rate": rate} for side, (n, rate) in result.correction.observed.items()}
    write_json(out / "errors.json", "errors", {
        **meta, "n_states": len(result.states), "comparison": _comparison_dict(result.comparison),
        "continuation": _rates_dict(cont), "correction": _rates_dict(corr), "observed_correction": observed,
        "notes": result.notes,
    })  # fmt: skip
    _finish(out, "errors", lines, result.notes, ["errors.csv", "errors.png", "errors.md", "errors.json"])


def write_likelihood(result: LikelihoodResult, out: Path, meta: Mapping[str, Any]) -> None:
    """likelihood_*.csv / .png / .md / .json of a likelihood analysis."""
    out = Path(out)
    trajs = result.trajectories
    write_csv(out / "likelihood_turns.csv",
              ["side", "task_id", "sample", "turn", "tokens", "logp_base", "logp_rl", "llr", "action_nll", "action_tokens", "action_exact"],
              ([t.side, trajs[t.trajectory].task_id, trajs[t.trajectory].sample, t.turn, t.tokens, t.logp_base, t.logp_rl,
                t.logp_rl - t.logp_base, t.action_nll, t.action_tokens, int(t.action_exact)] for t in result.turns))  # fmt: skip
    write_csv(out / "likelihood_trajectories.csv", ["side", "task_id", "sample", "success", "tokens", "final_llr", "cumulative_llr"],
              ([s.side, s.task_id, s.sample, int(s.success), s.tokens, s.final, ";".join(f"{v:.4f}" for v in s.cumulative)]
               for s in trajs))  # fmt: skip
    write_csv(out / "likelihood_pairs.csv", ["task_id", "base_sample", "rl_sample", "base_tokens", "rl_tokens", "base_llr", "rl_llr", "difference"],
              ([trajs[b].task_id, trajs[b].sample, trajs[r].sample, trajs[b].tokens, trajs[r].tokens, trajs[b].final,
                trajs[r].final, trajs[r].final - trajs[b].final] for b, r in result.pairs))  # fmt: skip
    curves = {side: [s.cumulative for s in trajs if s.side == side and s.success] for side in ("base", "rl")}
    nll = {side: [t.action_nll for t in result.turns if t.side == side] for side in ("base", "rl")}
    diffs = [trajs[r].final - trajs[b].final for b, r in result.pairs]
    fig = figures.fig_likelihood(nll, curves, diffs, _triple(result.paired) if result.paired else None,
                                 title=f"Likelihood analysis on {meta.get('env', '?')}")  # fmt: skip
    save_figure(fig, out / "likelihood.png")
    lines = _header("Likelihood analysis", meta)
    lines += [
        "| measure | base-generated | RL-generated |", "|---|---|---|",
        f"| ActionNLL under base (nats/token) | {fmt_estimate(result.action_nll.get('base'))} | {fmt_estimate(result.action_nll.get('rl'))} |",
        f"| total LLR log π_RL − log π_base (nats) | {fmt_estimate(result.final_llr.get('base'), 2)} | {fmt_estimate(result.final_llr.get('rl'), 2)} |",
        "",
        f"Length-matched pairs (≤ 10% token difference): {len(result.pairs)} over {len({trajs[b].task_id for b, _ in result.pairs})} tasks; "
        f"mean LLR(RL) − LLR(base) = {fmt_estimate(result.paired, 2)} nats.",
    ]  # fmt: skip
    write_json(out / "likelihood.json", "likelihood", {
        **meta, "action_nll": {k: estimate_dict(v) for k, v in result.action_nll.items()},
        "final_llr": {k: estimate_dict(v) for k, v in result.final_llr.items()},
        "pairs": len(result.pairs), "paired_difference": estimate_dict(result.paired), "notes": result.notes,
    })  # fmt: skip
    files = ["likelihood_turns.csv", "likelihood_trajectories.csv", "likelihood_pairs.csv", "likelihood.png", "likelihood.md", "likelihood.json"]
    _finish(out, "likelihood", lines, result.notes, files)


def write_judge(result: JudgeAgreement, out: Path, meta: Mapping[str, Any]) -> None:
    """judge.csv / .png / .md / .json of a judge-vs-oracle agreement analysis."""
    out = Path(out)
    write_csv(out / "judge.csv", ["state", "task_id", "t", "remaining", "action", "oracle", "judge", "judge_error"], result.rows)
    ok = [r for r in result.rows if r[6] is not None]
    fig = figures.fig_judge([r[5] for r in ok], [float(r[6]) for r in ok],  # type: ignore[arg-type]
                            title=f"judge vs oracle (Spearman {result.spearman_all:.2f})")  # fmt: skip
    save_figure(fig, out / "judge.png")
    n_states = len({r[0] for r in result.rows})
    lines = _header("LLM judge vs oracle process reward", meta)
    lines += [
        "| measure | value |", "|---|---|",
        f"| scored actions | {len(result.rows)} at {n_states} states |",
        f"| judge failures (not an integer 0-10) | {result.failures} ({100 * result.failures / max(len(result.rows), 1):.1f}%) |",
        f"| Spearman, all pairs [95% CI] | {fmt_estimate(result.spearman_ci) if result.spearman_ci else _num3(result.spearman_all)} |",
        f"| mean within-state Spearman | {_num3(result.spearman_within)} ({result.states_with_variation} states where both vary) |",
    ]  # fmt: skip
    write_json(out / "judge.json", "judge", {
        **meta, "actions": len(result.rows), "states": n_states, "failures": result.failures,
        "spearman_all": result.spearman_all, "spearman_ci": estimate_dict(result.spearman_ci),
        "spearman_within": result.spearman_within, "notes": result.notes,
    })  # fmt: skip
    _finish(out, "judge", lines, result.notes, ["judge.csv", "judge.png", "judge.md", "judge.json"])


def write_flows(
    groups: Sequence[tuple[str, FlowCounts, Sequence[tuple[str, LoopStats]]]],
    summaries: Sequence[LoopSummary],
    out: Path,
    meta: Mapping[str, Any],
    notes: Sequence[str] = (),
) -> None:
    """flows_*.csv, loops.csv, flows.png, flows.html, flows.md, flows.json.

    ``groups``: per policy group, its flow counts and ``(trajectory id, loop stats)`` pairs.
    """
    out = Path(out)
    write_csv(out / "flows_nodes.csv", ["group", "step", "label", "outcome", "count"],
              ([g, s, lab, o, n] for g, f, _ in groups for (s, lab, o), n in sorted(f.nodes.items())))  # fmt: skip
    write_csv(out / "flows_links.csv", ["group", "step", "label", "next_label", "outcome", "count"],
              ([g, s, a, b, o, n] for g, f, _ in groups for (s, a, b, o), n in sorted(f.links.items())))  # fmt: skip
    write_csv(out / "loops.csv", ["group", "trajectory", "turns", "repeat", "oscillation", "revisit", "loop_turns"],
              ([g, tid, s.turns, int(s.repeat), int(s.oscillation), int(s.revisit), s.loop_turns]
               for g, _, stats in groups for tid, s in stats))  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    svgs = []
    panels = []
    totals: Counter[str] = Counter()
    for _, flows, _ in groups:
        for (_, label, _), n in flows.nodes.items():
            totals[label] += n
    order = sorted(totals, key=lambda lab: (-totals[lab], lab))
    colors = label_colors(order)
    for name, flows, _ in groups:
        for outcome in ("success", "failure"):
            if flows.trajectories.get(outcome, 0) == 0:
                continue
            layout = sankey_layout(flows, outcomes=(outcome,), label_order=order, colors=colors)
            svgs.append((f"{name}: {outcome}", sankey_svg(layout, title=f"{name}: {outcome}")))
            panels.append((f"{name}: {outcome}", layout))
    # flows.png: the Sankey panels stacked, then the loop bars
    images = [figures.fig_sankey(layout, title=title) for title, layout in panels]
    images.append(figures.fig_loops([s.group for s in summaries], _loop_columns(summaries), title="loops"))
    _stack_png(images, out / "flows.png", plt)
    body = "".join(f"<h2>{title}</h2>{svg}" for title, svg in svgs)
    write_text(out / "flows.html", f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>action flows</title></head>"
                                   f"<body style='font-family:sans-serif'><h1>Action-transition flows</h1>{body}</body></html>\n")  # fmt: skip
    lines = _header("Action-transition flows and loops", meta)
    lines += ["| group | trajectories | repeat | A↔B oscillation | revisit | any loop | turns in loops (mean) | share of turns in loops |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for s in summaries:
        lines.append(
            f"| {s.group} | {s.n} | {_pct(s.repeat)} | {_pct(s.oscillation)} | {_pct(s.revisit)} | {_pct(s.any_loop)} | "
            f"{'n/a' if math.isnan(s.loop_turns_mean) else f'{s.loop_turns_mean:.2f}'} | {_pct(s.loop_turn_share)} |"
        )
    write_json(out / "flows.json", "flows", {**meta, "loops": [s.__dict__ for s in summaries], "notes": list(notes)})
    files = ["flows_nodes.csv", "flows_links.csv", "loops.csv", "flows.png", "flows.html", "flows.md", "flows.json"]
    _finish(out, "flows", lines, notes, files)


def _num3(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}%"


def _loop_columns(summaries: Sequence[LoopSummary]) -> dict[str, list[float]]:
    keys = ["repeat", "oscillation", "revisit", "any_loop", "loop_turn_share"]
    return {k: [getattr(s, k) for s in summaries] for k in keys}


def _stack_png(images: Sequence[Any], path: Path, plt: Any) -> None:
    """Stack several figures vertically into one PNG."""
    import io

    import numpy as np

    arrays = []
    for fig in images:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=90)
        plt.close(fig)
        buffer.seek(0)
        arrays.append(plt.imread(buffer))
    width = max(a.shape[1] for a in arrays)
    padded = [np.pad(a, ((0, 0), (0, width - a.shape[1]), (0, 0)), constant_values=1.0) for a in arrays]
    stacked = np.concatenate(padded, axis=0)
    tmp = path.with_name(path.stem + ".tmp.png")
    plt.imsave(tmp, stacked)
    tmp.replace(path)
