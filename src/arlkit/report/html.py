"""``arlkit report``: one self-contained HTML file with everything available for some runs.

Sources are directories, searched up to three levels deep:

- **evaluation runs** (``passkt.csv`` + ``trajectories.jsonl``, as ``arlkit eval`` writes them):
  runs of one policy at different announced budgets merged into one Pass@(K,T) surface, policies on
  the same tasks side by side (Pass@T and Pass@K with the expected optimum, a heat map per policy,
  paired differences with intervals), Table-1-style tables, and action flows and loops computed
  from the trajectories (:mod:`arlkit.report.eval_sections`);
- **analysis outputs** (``<kind>.json`` with ``"arlkit_analysis"``, as ``arlkit analyze`` writes
  them): step quality, error states, depth, likelihood, judge agreement, flows;
- **training runs** (``dynamics.csv`` or ``metrics.jsonl``: one row per step with a ``step`` column
  and numeric metrics such as ``r_multi`` and ``r_single``): training dynamics.

Caller-given findings lead the page. Figures are PNG embedded as base64 and Sankey diagrams inline SVG; the file loads nothing from
anywhere. A small inline script only checks, once the page has loaded, that every image decoded and
every listed section exists (it records the result on ``<body>`` for tests).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arlkit.analysis.flows import FlowCounts, action_flows, loop_stats, summarize_loops
from arlkit.analysis.sankey import label_colors, sankey_layout, sankey_svg
from arlkit.report import figures
from arlkit.report.eval_sections import (
    EvalGroup,
    EvalRun,
    eval_sections,
    group_eval_runs,
)
from arlkit.report.html_blocks import esc, img, inline_markdown, num, read_csv, table
from arlkit.report.outputs import write_text
from arlkit.report.stability_files import stability_section

__all__ = ["FINDINGS_TITLE", "SECTION_TITLES", "HtmlReport", "find_sources", "section_title", "write_html_report"]

FINDINGS_TITLE = "Findings"
"""The title of the ``findings`` section: the caller's lines, first on the page when given."""

SECTION_TITLES = {
    "passk": "Pass@K and Pass@T",
    "differences": "Paired differences between policies",
    "heatmap": "(K, T) heat map",
    "tables": "Pass@(K,T) tables",
    "steps": "Step-level action quality (matched states)",
    "errors": "Error states and recovery",
    "depth": "Quality by depth",
    "likelihood": "Likelihood analysis",
    "judge": "Process signals: judge vs oracle",
    "dynamics": "Training dynamics",
    "stability": "Training stability (ARLArena)",
    "flows": "Action-transition flows",
    "loops": "Loops",
}
"""Section ids and titles of what the inputs give, in report order (after ``findings``)."""


def section_title(key: str) -> str:
    """The title of section ``key`` (``findings`` or one of :data:`SECTION_TITLES`)."""
    return FINDINGS_TITLE if key == "findings" else SECTION_TITLES[key]

_HINTS = {
    "passk": "give an `arlkit eval` run directory",
    "differences": "give `arlkit eval` runs of two or more policies on the same tasks and budgets",
    "heatmap": "give an `arlkit eval` run directory",
    "tables": "give an `arlkit eval` run directory",
    "steps": "run `arlkit analyze steps --base ... --rl ... --runs ... --out DIR` and give DIR",
    "errors": "run `arlkit analyze errors ...` and give its --out",
    "depth": "run `arlkit analyze depth ...` and give its --out",
    "likelihood": "run `arlkit analyze likelihood --base MODEL --rl MODEL --runs ...` (needs scoring models)",
    "judge": "run `arlkit analyze judge --judge POLICY --runs ...`",
    "dynamics": "give a training run directory (dynamics.csv or metrics.jsonl)",
    "stability": "run `arlkit analyze stability RUN ... --out DIR` on training runs and give DIR",
    "flows": "give an eval run or run `arlkit analyze flows`",
    "loops": "give an eval run or run `arlkit analyze flows`",
}


@dataclass
class Sources:
    """What :func:`find_sources` found.

    Attributes:
        evals: evaluation run directories.
        analyses: ``{kind: [analysis json files]}``.
        dynamics: training metric files.
    """

    evals: list[Path] = field(default_factory=list)
    analyses: dict[str, list[Path]] = field(default_factory=dict)
    dynamics: list[Path] = field(default_factory=list)


def _walk(path: Path, depth: int) -> list[Path]:
    out = [path]
    if depth > 0:
        for child in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
            out += _walk(child, depth - 1)
    return out


def find_sources(paths: Sequence[str | Path], *, depth: int = 3) -> Sources:
    """Evaluation runs, analysis outputs and training metrics under ``paths``."""
    found = Sources()
    seen: set[Path] = set()
    for root in paths:
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"{root} is not a directory")
        for directory in _walk(root, depth):
            if directory.resolve() in seen:
                continue
            seen.add(directory.resolve())
            if (directory / "passkt.csv").exists() and (directory / "trajectories.jsonl").exists():
                found.evals.append(directory)
            for candidate in sorted(directory.glob("*.json")):
                try:
                    data = json.loads(candidate.read_text(encoding="utf-8"))
                except (json.JSONDecodeError, UnicodeDecodeError, OSError):
                    continue
                if isinstance(data, dict) and isinstance(data.get("arlkit_analysis"), str):
                    found.analyses.setdefault(data["arlkit_analysis"], []).append(candidate)
            for name in ("dynamics.csv", "metrics.jsonl"):
                if (directory / name).exists():
                    found.dynamics.append(directory / name)
    return found


def _est(d: Mapping[str, Any] | None, pct: bool = False, digits: int = 3) -> str:
    if not d or d.get("value") is None:
        return "n/a"
    scale = 100.0 if pct else 1.0
    unit = "%" if pct else ""
    fmt = f"{{:.{1 if pct else digits}f}}"
    low = float(d["low"]) if d.get("low") is not None else math.nan
    high = float(d["high"]) if d.get("high") is not None else math.nan
    return f"{fmt.format(scale * d['value'])}{unit} [{fmt.format(scale * low)}, {fmt.format(scale * high)}]"


def _notes(data: Mapping[str, Any]) -> str:
    notes = data.get("notes") or []
    return "<ul class='notes'>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>" if notes else ""


def _meta_line(data: Mapping[str, Any], path: Path) -> str:
    parts = [f"{k}: {data[k]}" for k in ("env", "base", "rl", "judge") if data.get(k)]
    return f"<p class='meta'>{esc('; '.join(parts))} — <code>{esc(path.parent)}</code></p>"


# -- sections from evaluation runs ---------------------------------------------------------------


def _flow_sections(groups: Sequence[tuple[str, FlowCounts]], loops: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    out = {}
    if groups:
        totals: Counter[str] = Counter()
        for _, flows in groups:
            for (_, label, _), n in flows.nodes.items():
                totals[label] += n
        order = sorted(totals, key=lambda lab: (-totals[lab], lab))
        colors = label_colors(order)
        parts = ["<p>Columns are steps, node height the number of trajectories taking that action; green bands: "
                 "successful trajectories, red: failed ones. Hover a band for its count.</p>"]  # fmt: skip
        for name, flows in groups:
            for outcome in ("success", "failure"):
                if flows.trajectories.get(outcome, 0):
                    layout = sankey_layout(flows, outcomes=(outcome,), label_order=order, colors=colors)
                    parts.append(f"<h3>{esc(name)}: {outcome}</h3><div class='svgwrap'>{sankey_svg(layout, title=f'{name}: {outcome}')}</div>")
        out["flows"] = "".join(parts)
    if loops:
        header = ["group", "trajectories", "repeat", "A↔B oscillation", "revisit", "any loop", "turns in loops (mean)", "share of turns in loops"]

        def pct(x: Any) -> str:
            return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * float(x):.1f}%"

        rows = [[s["group"], s["n"], pct(s["repeat"]), pct(s["oscillation"]), pct(s["revisit"]), pct(s["any_loop"]),
                 "n/a" if s["loop_turns_mean"] is None else f"{float(s['loop_turns_mean']):.2f}", pct(s["loop_turn_share"])]
                for s in loops]  # fmt: skip
        fig = figures.fig_loops([s["group"] for s in loops],
                                {k: [num(str(s[k])) if s[k] is not None else math.nan for s in loops]
                                 for k in ("repeat", "oscillation", "revisit", "any_loop", "loop_turn_share")},
                                title="loop metrics")  # fmt: skip
        out["loops"] = ("<p>repeat: the same action 3+ times in a row; oscillation: A B A B over 4+ turns; revisit: acting "
                        "again in a state already acted in.</p>" + table(header, rows) + img(fig, "loop metrics"))  # fmt: skip
    return out


def _flows_from_evals(groups: Sequence[EvalGroup], max_steps: int = 12) -> tuple[list[tuple[str, FlowCounts]], list[dict[str, Any]]]:
    """Flows and loops of each policy's trajectories (over all its budgets), as the eval sections group them."""
    flows, loops = [], []
    for number, group in enumerate(groups, 1):
        for surface in group.surfaces:
            mine = surface.trajectories
            name = f"{surface.label} [{number}]" if len(groups) > 1 else surface.label
            flows.append((name, action_flows(mine, max_steps=max_steps)))
            stats = [loop_stats(t) for t in mine]
            loops.append(summarize_loops(name, stats).__dict__)
            for outcome, flag in (("success", True), ("failure", False)):
                part = [s for s, t in zip(stats, mine, strict=True) if t.success == flag]
                if part:
                    loops.append(summarize_loops(f"{name} ({outcome})", part).__dict__)
    return flows, loops


def _flows_from_analysis(path: Path) -> list[tuple[str, FlowCounts]]:
    nodes, links = read_csv(path.parent / "flows_nodes.csv"), read_csv(path.parent / "flows_links.csv")
    groups: dict[str, FlowCounts] = {}
    for r in nodes:
        f = groups.setdefault(r["group"], FlowCounts(steps=0))
        f.nodes[(int(r["step"]), r["label"], r["outcome"])] += int(r["count"])
        f.steps = max(f.steps, int(r["step"]))
        if int(r["step"]) == 1:
            f.trajectories[r["outcome"]] += int(r["count"])
    for r in links:
        groups[r["group"]].links[(int(r["step"]), r["label"], r["next_label"], r["outcome"])] += int(r["count"])
    return list(groups.items())


# -- sections from analyses ----------------------------------------------------------------------


def _skipped(data: Mapping[str, Any], path: Path) -> str | None:
    if data.get("skipped"):
        return _meta_line(data, path) + f"<p class='skipped'>Skipped: {esc(data['skipped'])}</p>"
    return None


def _comparison_rows(c: Mapping[str, Any]) -> list[list[str]]:
    return [
        ["states where RL is better", _est(c.get("share_rl_better"), pct=True)],
        ["states where base is better", _est(c.get("share_base_better"), pct=True)],
        ["ties", f"{100 * float(c.get('share_tie') or 0):.1f}%"],
        ["mean quality, base", _est(c.get("base_mean"))],
        ["mean quality, RL", _est(c.get("rl_mean"))],
        ["RL − base (paired)", _est(c.get("difference"))],
        ["states / tasks", f"{c.get('n_states')} / {c.get('n_tasks')}"],
    ]


def _steps_section(path: Path, data: Mapping[str, Any]) -> str:
    rows = read_csv(path.parent / "steps.csv")
    fig = figures.fig_quality_scatter([num(r["base_quality"]) for r in rows], [num(r["rl_quality"]) for r in rows],
                                      [r["source"] for r in rows], title="x = base, y = RL quality per state")  # fmt: skip
    summary = table(["measure", "value [95% CI]"], _comparison_rows(data.get("comparison") or {}))
    about = f"<p>G = {esc(data.get('actions'))} actions per policy per state; quality: {esc(data.get('quality', ''))}.</p>"
    return _meta_line(data, path) + about + summary + img(fig, "matched-state scatter") + _notes(data)


def _errors_section(path: Path, data: Mapping[str, Any]) -> str:
    rows = read_csv(path.parent / "errors.csv")
    scored = [r for r in rows if r["base_quality"] != "" and r["rl_quality"] != ""]

    def tri(d: Mapping[str, Any] | None) -> tuple[float, float, float] | None:
        return None if not d or d.get("value") is None else (d["value"], d["low"], d["high"])

    cont, corr = data.get("continuation"), data.get("correction")
    fig = figures.fig_errors(
        [num(r["base_quality"]) for r in scored], [num(r["rl_quality"]) for r in scored], [r["source"] for r in scored],
        {"base": tri(cont["base"]), "rl": tri(cont["rl"])} if cont else None,  # type: ignore[dict-item]
        {"base": tri(corr["base"]), "rl": tri(corr["rl"])} if corr else None,  # type: ignore[dict-item]
        title=f"{data.get('n_states', 0)} error states",
    )  # fmt: skip
    parts = [_meta_line(data, path)]
    if data.get("comparison"):
        parts.append(table(["action quality at error states", "value [95% CI]"], _comparison_rows(data["comparison"])))
    table_rows = []
    if cont:
        table_rows += [["continuation success, base", _est(cont["base"], pct=True)], ["continuation success, RL", _est(cont["rl"], pct=True)],
                       ["continuation, RL − base (paired)", _est(cont["difference"], pct=True)]]  # fmt: skip
    if corr:
        table_rows += [["error correction, base", _est(corr["base"], pct=True)], ["error correction, RL", _est(corr["rl"], pct=True)],
                       ["error correction, RL − base", _est(corr["difference"], pct=True)]]  # fmt: skip
    if table_rows:
        parts.append(table(["recovery", "value [95% CI]"], table_rows))
    parts.append(img(fig, "error states"))
    return "".join(parts) + _notes(data)


def _depth_section(path: Path, data: Mapping[str, Any]) -> str:
    rows = read_csv(path.parent / "depth.csv")
    fig = figures.fig_depth([num(r["center"]) for r in rows], [num(r["rl_minus_base"]) for r in rows],
                            [num(r["ci_low"]) for r in rows], [num(r["ci_high"]) for r in rows],
                            [int(r["n_states"]) for r in rows], title="RL − base quality by t/T")  # fmt: skip
    summary = table(["t/T", "states", "RL − base", "95% CI"], [
        [f"{num(r['low']):.2f}–{num(r['high']):.2f}", r["n_states"],
         f"{num(r['rl_minus_base']):.4f}" if r["rl_minus_base"] else "n/a",
         f"[{num(r['ci_low']):.4f}, {num(r['ci_high']):.4f}]" if r["ci_low"] else "n/a"] for r in rows])  # fmt: skip
    return _meta_line(data, path) + summary + img(fig, "depth curve") + _notes(data)


def _likelihood_section(path: Path, data: Mapping[str, Any]) -> str:
    d = path.parent
    turns, trajs, pairs = read_csv(d / "likelihood_turns.csv"), read_csv(d / "likelihood_trajectories.csv"), read_csv(d / "likelihood_pairs.csv")
    nll = {side: [num(t["action_nll"]) for t in turns if t["side"] == side] for side in ("base", "rl")}
    curves = {side: [[float(v) for v in t["cumulative_llr"].split(";") if v] for t in trajs if t["side"] == side and t["success"] == "1"]
              for side in ("base", "rl")}  # fmt: skip
    paired = data.get("paired_difference")
    fig = figures.fig_likelihood(nll, curves, [num(p["difference"]) for p in pairs],
                                 (paired["value"], paired["low"], paired["high"]) if paired else None, title="likelihood")  # fmt: skip
    a, f = data.get("action_nll") or {}, data.get("final_llr") or {}
    summary = table(["measure", "base-generated", "RL-generated"], [
        ["ActionNLL under base (nats/token)", _est(a.get("base")), _est(a.get("rl"))],
        ["total LLR log π_RL − log π_base (nats)", _est(f.get("base"), digits=2), _est(f.get("rl"), digits=2)],
        ["length-matched pairs / mean difference", str(data.get("pairs", 0)), _est(paired, digits=2)],
    ])  # fmt: skip
    return _meta_line(data, path) + summary + img(fig, "likelihood") + _notes(data)


def _judge_section(path: Path, data: Mapping[str, Any]) -> str:
    rows = read_csv(path.parent / "judge.csv")
    ok = [r for r in rows if r["judge"] != ""]
    fig = figures.fig_judge([num(r["oracle"]) for r in ok], [num(r["judge"]) for r in ok], title="judge vs oracle")
    spearman = data.get("spearman_all")
    summary = table(["measure", "value"], [
        ["judged actions / states", f"{data.get('actions')} / {data.get('states')}"],
        ["judge failures", str(data.get("failures"))],
        ["Spearman (all pairs) [95% CI]", _est(data.get("spearman_ci")) if data.get("spearman_ci") else ("n/a" if spearman is None else f"{spearman:.3f}")],
        ["mean within-state Spearman", "n/a" if data.get("spearman_within") is None else f"{data['spearman_within']:.3f}"],
    ])  # fmt: skip
    return _meta_line(data, path) + summary + img(fig, "judge vs oracle") + _notes(data)


_ANALYSIS_RENDERERS: dict[str, Callable[[Path, Mapping[str, Any]], str]] = {
    "steps": _steps_section,
    "errors": _errors_section,
    "depth": _depth_section,
    "likelihood": _likelihood_section,
    "judge": _judge_section,
    "stability": stability_section,
}


def _dynamics_section(paths: Sequence[Path]) -> str:
    parts = []
    for path in paths:
        if path.suffix == ".csv":
            rows: list[Mapping[str, Any]] = list(read_csv(path))
        else:
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        rows = [r for r in rows if isinstance(r, Mapping) and "step" in r]
        if not rows:
            continue
        keys = [k for k in rows[0] if k != "step" and not math.isnan(num(str(rows[0].get(k))))]
        preferred = [k for k in keys if "multi" in k.lower() or "single" in k.lower()]
        chosen = (preferred or keys)[:6]
        fig = figures.fig_dynamics({path.parent.name: rows}, [(k, k) for k in chosen], title=str(path.parent.name))
        parts.append(f"<h3>{esc(path.parent.name)}</h3>" + img(fig, f"training dynamics {path.parent.name}"))
    return "".join(parts)


# -- the page ------------------------------------------------------------------------------------

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1180px;margin:24px auto;padding:0 16px;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:2em}h3{font-size:1.05em;color:#333}
table{border-collapse:collapse;margin:8px 0 16px;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f3f3}img{max-width:100%;height:auto;display:block;margin:8px 0}nav ol{columns:2}
.meta{color:#555;font-size:0.9em}.skipped{color:#a33}.notes{color:#555;font-size:0.85em}.svgwrap{overflow-x:auto}
code{background:#f5f5f5;padding:0 3px}
#findings{background:#f6f8fb;border-left:4px solid #4e79a7;padding:2px 16px 8px}#findings h2{margin-top:0.6em}
.findings li{margin:4px 0}.evalgroup{margin-bottom:1.5em}.differences strong{color:#114}
"""

_SELF_CHECK = """
<script>
(function(){
  var errors = [];
  window.addEventListener('error', function(e){ errors.push(String(e.message || 'resource error'));
    document.documentElement.setAttribute('data-errors', errors.join(' | ')); }, true);
  window.addEventListener('load', function(){
    var bad = 0, i;
    for (i = 0; i < document.images.length; i++) {
      var im = document.images[i];
      if (!(im.complete && im.naturalWidth > 0)) { bad++; }
    }
    var listed = document.querySelectorAll('nav a[href^="#"]'), missing = [];
    for (i = 0; i < listed.length; i++) {
      var id = listed[i].getAttribute('href').slice(1);
      if (!document.getElementById(id)) { missing.push(id); }
    }
    var body = document.body;
    body.setAttribute('data-images', String(document.images.length));
    body.setAttribute('data-broken-images', String(bad));
    body.setAttribute('data-missing-sections', missing.join(','));
    body.setAttribute('data-rendered', 'ok');
  });
})();
</script>
"""


@dataclass(frozen=True)
class HtmlReport:
    """What :func:`write_html_report` wrote.

    Attributes:
        path: the HTML file.
        sections: ids of the sections it contains, in order: ``findings`` first when given, then
            those of :data:`SECTION_TITLES` the inputs gave.
        missing: ids of the sections left out for lack of inputs.
    """

    path: Path
    sections: tuple[str, ...]
    missing: tuple[str, ...]


def write_html_report(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    title: str = "arlkit report",
    findings: Sequence[str] = (),
    names: Mapping[str, str] | None = None,
) -> HtmlReport:
    """Find runs and analyses under ``paths`` and write the report to ``out``.

    Args:
        paths: directories searched for inputs (:func:`find_sources`); their order is the order of
            the runs, and of the policies where ``names`` does not set it.
        out: the HTML file.
        title: the page's title.
        findings: lines shown first, in a "Findings" section (markdown list markers, ``**bold**``
            and `` `code` `` are understood), e.g. the conclusions of a summary.
        names: display names of policies, keyed by policy spec (``"noisy-oracle:0.2"``) or by a run
            folder (a path, relative ones from the current directory or from one of ``paths``, or
            the name of a folder below one of ``paths``: ``{"base": "Base"}`` names the policy of
            every run under ``.../base/``); policies are drawn in the order of these names.
    """
    sources = find_sources(paths)
    if not (sources.evals or sources.analyses or sources.dynamics):
        raise FileNotFoundError(
            "no evaluation run (passkt.csv + trajectories.jsonl), analysis output (<kind>.json) or training metrics found in "
            + ", ".join(map(str, paths))
        )
    groups = group_eval_runs([EvalRun.load(run) for run in sources.evals], names=names, roots=[Path(p) for p in paths])
    content: dict[str, str] = eval_sections(groups)
    for kind, render in _ANALYSIS_RENDERERS.items():
        blocks = []
        for path in sources.analyses.get(kind, []):
            data = json.loads(path.read_text(encoding="utf-8"))
            blocks.append(_skipped(data, path) or render(path, data))
        if blocks:
            content[kind] = "".join(blocks)
    if sources.dynamics:
        text = _dynamics_section(sources.dynamics)
        if text:
            content["dynamics"] = text
    flow_groups, loops = _flows_from_evals(groups)
    covered = {p.resolve() for p in sources.evals}
    for path in sources.analyses.get("flows", []):
        data = json.loads(path.read_text(encoding="utf-8"))
        if {Path(r).resolve() for r in data.get("runs") or []} <= covered and data.get("runs"):
            continue  # the same runs' flows are already drawn from their trajectories
        if not data.get("skipped") and (path.parent / "flows_nodes.csv").exists():
            flow_groups += _flows_from_analysis(path)
            loops += list(data.get("loops") or [])
    content.update(_flow_sections(flow_groups, loops))
    missing = [key for key in SECTION_TITLES if key not in content]
    if findings:
        items = "".join(f"<li>{inline_markdown(line)}</li>" for line in findings if line.strip())
        content["findings"] = f"<ul class='findings'>{items}</ul>"
    order = [key for key in ("findings", *SECTION_TITLES) if key in content]
    nav = "".join(f'<li><a href="#{key}">{esc(section_title(key))}</a></li>' for key in order)
    rendered = {key: f'<section id="{key}"><h2>{esc(section_title(key))}</h2>{content[key]}</section>' for key in order}
    lead = rendered.pop("findings", "")  # before everything else
    body = "".join(rendered.values())
    listed = "".join(f"<li>{esc(path)}</li>" for path in [*sources.evals, *(p.parent for ps in sources.analyses.values() for p in ps), *sources.dynamics])
    absent = ""
    if missing:
        absent = "<section id='not-included'><h2>Not included</h2><ul>" + "".join(
            f"<li>{esc(SECTION_TITLES[k])}: {esc(_HINTS[k])}</li>" for k in missing) + "</ul></section>"  # fmt: skip
    page = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{esc(title)}</title>"
        f"<style>{_CSS}</style>{_SELF_CHECK}</head><body><h1>{esc(title)}</h1>{lead}"
        f"<details><summary>Sources</summary><ul>{listed}</ul></details>"
        f"<nav><h2>Contents</h2><ol>{nav}</ol></nav>{body}{absent}"
        "<footer><p class='meta'>Written by arlkit report. Intervals are 95% percentile-bootstrap intervals over tasks.</p></footer>"
        "</body></html>\n"
    )
    out = Path(out)
    write_text(out, page)
    return HtmlReport(out, tuple(order), tuple(missing))
