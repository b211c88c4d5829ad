"""The HTML report's evaluation sections: runs read together (docs/analysis.md, "The HTML report").

An evaluation run (``arlkit eval``) holds one Pass@(K,T) grid per policy. The report combines runs:

- **one surface per policy**: runs of one policy that differ only in their announced budgets (same
  environment and arguments, tasks, samples, seed, sampling and prompt configuration, as their
  ``run.json`` records them) are merged into one Pass@(K,T) surface; the demo writes one run per
  (policy, budget);
- **policies side by side**: surfaces with the same environment, tasks, prompts and budget mode form
  a group, drawn in one figure (Pass@T at K = 1 and the largest K with the expected optimum, Pass@K
  at each budget), a heat map per policy, and compared pairwise: the paired bootstrap difference
  over tasks (:func:`arlkit.metrics.paired_bootstrap_difference`) at each budget.

Runs without ``run.json``, hidden-budget runs, and runs that would give a policy two grids at one
budget or that hold other tasks stand alone (a group of their own).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arlkit.metrics import Estimate, paired_bootstrap_difference
from arlkit.metrics.passkt import per_task_pass
from arlkit.report import figures
from arlkit.report.html_blocks import Raw, esc, img, num, read_csv, table
from arlkit.rollout.records import Trajectory, read_trajectories

__all__ = ["EvalGroup", "EvalRun", "PairedDifference", "Surface", "eval_sections", "group_eval_runs", "paired_differences"]

VARYING_KEYS = ("budgets", "policies", "bootstrap")
"""``run.json`` keys in which the runs of one group may differ: the budgets (merged into one surface
per policy), the policies (compared) and the bootstrap resamples (the intervals' precision only)."""


@dataclass
class EvalRun:
    """One evaluation run directory as the report reads it.

    Attributes:
        path: the run directory.
        rows: ``passkt.csv`` (one dict per (policy, T, k)).
        identity: ``run.json``, or ``None`` when the run has none.
        trajectories: ``trajectories.jsonl``.
    """

    path: Path
    rows: list[dict[str, str]]
    identity: dict[str, Any] | None
    trajectories: list[Trajectory]

    @classmethod
    def load(cls, path: Path) -> EvalRun:
        record = path / "run.json"
        identity = json.loads(record.read_text(encoding="utf-8")) if record.exists() else None
        return cls(path, read_csv(path / "passkt.csv"), identity, read_trajectories(path / "trajectories.jsonl"))

    def group_key(self) -> str:
        """Runs with equal keys may share a group: announced-budget runs alike but for :data:`VARYING_KEYS`."""
        if self.identity is None or not self.rows or self.rows[0].get("budget_mode") != "announced":
            return f"run:{self.path.resolve()}"
        return json.dumps({k: v for k, v in self.identity.items() if k not in VARYING_KEYS}, sort_keys=True)

    def budgets(self, policy: str) -> set[int]:
        return {int(r["T"]) for r in self.rows if r["policy"] == policy}

    @property
    def policies(self) -> list[str]:
        return list(dict.fromkeys(r["policy"] for r in self.rows))

    @property
    def task_ids(self) -> list[str]:
        return list(dict.fromkeys(t.task_id for t in self.trajectories))


@dataclass
class Surface:
    """One policy's Pass@(K,T) grid, from one run or merged from several announced-budget runs.

    Attributes:
        policy: the policy spec.
        label: its display name.
        runs: the runs it comes from.
        rows: their ``passkt.csv`` rows of the policy, ``policy`` set to ``label``.
        trajectories: their trajectories of the policy.
    """

    policy: str
    label: str
    runs: list[Path]
    rows: list[dict[str, str]]
    trajectories: list[Trajectory]

    @property
    def budgets(self) -> list[int]:
        return sorted({int(r["T"]) for r in self.rows})


@dataclass
class EvalGroup:
    """Surfaces on the same environment, tasks, prompts and budget mode, in display order.

    Attributes:
        runs: the runs, in the order found.
        surfaces: one per policy.
        task_ids: the tasks, in the first run's order (paired comparisons align on them).
    """

    runs: list[EvalRun]
    surfaces: list[Surface]
    task_ids: list[str]

    @property
    def rows(self) -> list[dict[str, str]]:
        return [r for s in self.surfaces for r in s.rows]

    @property
    def budgets(self) -> list[int]:
        return sorted({int(r["T"]) for r in self.rows})

    @property
    def ks(self) -> list[int]:
        return sorted({int(r["k"]) for r in self.rows})

    @property
    def budget_mode(self) -> str:
        return self.rows[0].get("budget_mode", "")


def _label(spec: str, run: Path, names: Mapping[str, str], roots: Sequence[Path]) -> str:
    """``names[spec]``, else the name given to the deepest folder that holds ``run``: a path (relative
    to the current directory or to a report root) or a folder's name below a report root."""
    if spec in names:
        return names[spec]
    here = run.resolve()
    best, depth = spec, -1
    for key, label in names.items():
        for base in (Path.cwd(), *roots):
            where = (base / str(key)).resolve()
            if (where == here or where in here.parents) and len(where.parts) > depth:
                best, depth = label, len(where.parts)
        for root in roots:
            root = root.resolve()
            if root in here.parents and str(key) in here.relative_to(root).parts:
                at = len(root.parts) + here.relative_to(root).parts.index(str(key)) + 1
                if at > depth:
                    best, depth = label, at
    return best


def _fits(members: Sequence[EvalRun], run: EvalRun) -> bool:
    """``run`` joins ``members``: the same tasks, and no policy gets a second grid at a budget."""
    if set(run.task_ids) != set(members[0].task_ids):
        return False
    return all(not (run.budgets(p) & m.budgets(p)) for p in run.policies for m in members)


def group_eval_runs(
    runs: Sequence[EvalRun], *, names: Mapping[str, str] | None = None, roots: Sequence[Path] = ()
) -> list[EvalGroup]:
    """Merge and group ``runs`` (see the module's docstring), groups in the order of their first run.

    ``names`` maps a policy spec or a run folder to a display name (see :func:`write_html_report`);
    policies are ordered as their names appear in ``names``, the others after them in the order found.
    """
    names = names or {}
    ordered: list[list[EvalRun]] = []
    index: dict[str, list[EvalRun]] = {}
    for run in runs:
        if not run.rows:
            continue
        members = index.get(run.group_key())
        if members is not None and _fits(members, run):
            members.append(run)
        else:
            ordered.append([run])
            index.setdefault(run.group_key(), ordered[-1])
    order = list(dict.fromkeys(names.values()))
    groups = []
    for members in ordered:
        surfaces: dict[str, Surface] = {}
        for run in members:
            for spec in run.policies:
                surface = surfaces.setdefault(spec, Surface(spec, _label(spec, run.path, names, roots), [], [], []))
                surface.runs.append(run.path)
                surface.rows += [{**r, "policy": surface.label} for r in run.rows if r["policy"] == spec]
                surface.trajectories += [t for t in run.trajectories if t.policy == spec]
        listed = sorted(surfaces.values(), key=lambda s: order.index(s.label) if s.label in order else len(order))
        seen: set[str] = set()
        for surface in listed:  # two specs given one name: tell them apart
            if surface.label in seen:
                surface.label = f"{surface.label} ({surface.policy})"
                surface.rows = [{**r, "policy": surface.label} for r in surface.rows]
            seen.add(surface.label)
        groups.append(EvalGroup(members, listed, members[0].task_ids))
    return groups


@dataclass(frozen=True)
class PairedDifference:
    """Pass@k of ``minuend`` minus that of ``subtrahend`` at budget ``T``, paired over the group's tasks
    (percentile bootstrap resampling tasks jointly for both)."""

    minuend: str
    subtrahend: str
    T: int
    k: int
    estimate: Estimate

    @property
    def pair(self) -> str:
        return f"{self.minuend} − {self.subtrahend}"


def paired_differences(group: EvalGroup, *, resamples: int = 2000, seed: int = 0,
                       every_k: bool = False) -> list[PairedDifference]:
    """Every later policy minus every earlier one, at each budget both have and at K = the smallest
    and the largest k (every k of the group with ``every_k``); cells some task lacks samples for are left out."""
    ks = (list(group.ks) if every_k else sorted({group.ks[0], group.ks[-1]})) if group.rows else []
    cache: dict[tuple[int, int, int], np.ndarray | None] = {}

    def values(i: int, T: int, k: int) -> np.ndarray | None:
        if (i, T, k) not in cache:
            try:
                cache[(i, T, k)] = per_task_pass(group.surfaces[i].trajectories, T, k, group.budget_mode, group.task_ids)
            except ValueError:  # too few samples at this budget for some task
                cache[(i, T, k)] = None
        return cache[(i, T, k)]

    out = []
    for j, b in enumerate(group.surfaces):
        for i, a in enumerate(group.surfaces[:j]):
            for k in ks:
                for T in sorted(set(a.budgets) & set(b.budgets)):
                    va, vb = values(i, T, k), values(j, T, k)
                    if va is not None and vb is not None:
                        est = paired_bootstrap_difference(vb, va, resamples=resamples, seed=seed)
                        out.append(PairedDifference(b.label, a.label, T, k, est))
    return out


# -- HTML ----------------------------------------------------------------------------------------


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def _title(group: EvalGroup) -> str:
    first = group.rows[0]
    samples = min((int(r["n_samples"]) for r in group.rows if r.get("n_samples", "").isdigit()), default="?")
    return (f"{first.get('env', '?')} — {', '.join(s.label for s in group.surfaces)}; {group.budget_mode} budgets "
            f"T = {', '.join(map(str, group.budgets))}; {first.get('n_tasks', '?')} tasks × {samples} samples")  # fmt: skip


def _head(group: EvalGroup) -> str:
    runs = "".join(f"<li><code>{esc(r.path)}</code></li>" for r in group.runs)
    args = ((group.runs[0].identity or {}).get("env") or {}).get("args") or {}
    config = f"<p class='meta'>environment arguments: {esc(', '.join(f'{k}={v}' for k, v in args.items()))}</p>" if args else ""
    merged = f"{len(group.runs)} runs" if len(group.runs) > 1 else "1 run"
    return (f"<h3>{esc(_title(group))}</h3><details><summary class='meta'>from {merged}</summary>{config}"
            f"<ul>{runs}</ul></details>")  # fmt: skip


def _wrap(group: EvalGroup, number: int, inner: str) -> str:
    return (f"<div class='evalgroup' data-group='{number}' data-policies='{len(group.surfaces)}' "
            f"data-budgets='{len(group.budgets)}' data-runs='{len(group.runs)}'>{inner}</div>")  # fmt: skip


_OPTIMUM_NOTE = (
    f"Dashed: the {figures.OPTIMUM_LABEL}, the mean over tasks of 1 − (1 − p*)^k with p* the optimal success "
    "probability within T: the expected Pass@k of the optimal policy (a sampled Pass@k can exceed it)."
)


def _passkt_block(group: EvalGroup) -> str:
    rows, ks = group.rows, group.ks
    lines = figures.pass_t_lines(rows)
    if len(group.budgets) < 2 and len(ks) < 2:
        return "<p>One budget and one k: the numbers are in the table.</p>"
    names = ", ".join(s.label for s in group.surfaces)
    shown = f"Pass@T at K = {', '.join(str(k) for k in sorted({ks[0], ks[-1]}))} and " if lines else ""
    alt = f"{shown}Pass@K at T = {', '.join(map(str, group.budgets))}: {names}"
    fig = figures.fig_passkt(rows, title=_title(group))
    lone = [s for s in group.surfaces if s.label not in lines]
    note = ""
    if lines and lone:
        note = "<p class='meta'>" + esc("; ".join(f"{s.label}: one budget (T = {s.budgets[0]}), in Pass@K only" for s in lone)) + "</p>"
    if not lines:
        note = "<p class='meta'>One budget: Pass@K only (a Pass@T line needs two budgets).</p>"
    return (f"<p>{esc(_OPTIMUM_NOTE)}</p>" + img(fig, alt, figure="passkt", policies=len(group.surfaces),
            budgets=len(group.budgets), pass_t_lines=len(lines),
            pass_t_points=min((len(v) for v in lines.values()), default=0)) + note)  # fmt: skip


def _heatmap_block(group: EvalGroup) -> str:
    if len(group.budgets) < 2:
        return "<p>One budget: its Pass@K column is drawn under Pass@K and Pass@T.</p>"
    fig = figures.fig_heatmap(group.rows, title=f"Pass@(K,T), {group.rows[0].get('env', '')}")
    alt = f"Pass@(K,T) heat maps of {', '.join(s.label for s in group.surfaces)}"
    return img(fig, alt, figure="heatmap", panels=len(group.surfaces), budgets=len(group.budgets))


def _pass_tables(group: EvalGroup) -> str:
    rows, budgets, ks = group.rows, group.budgets, group.ks
    cell = {(r["policy"], int(r["T"]), int(r["k"])): r for r in rows}
    frac = {int(r["T"]): num(r.get("T_frac")) for r in rows}
    bound = {(int(r["T"]), int(r["k"])): num(r.get("expected_optimum")) for r in rows if r.get("expected_optimum") not in ("", None)}
    out = []
    for k in sorted({ks[0], ks[-1]}):
        header = ["policy"] + [f"T={T} ({100 * frac[T]:.0f}%)" for T in budgets]
        body: list[list[object]] = []
        for s in group.surfaces:
            body.append([s.label] + [
                f"{100 * num(c['pass']):.1f} [{100 * num(c['ci_low']):.1f}, {100 * num(c['ci_high']):.1f}]"
                if (c := cell.get((s.label, T, k))) else "" for T in budgets
            ])  # fmt: skip
        if all((T, k) in bound for T in budgets):
            body.append([figures.OPTIMUM_LABEL] + [f"{100 * bound[(T, k)]:.1f}" for T in budgets])
        out.append(f"<p>Pass@{k} (%, 95% bootstrap CI over tasks)</p>" + table(header, body))
    return "".join(out)


def _differences_block(group: EvalGroup) -> str:
    diffs = paired_differences(group)
    if not diffs:
        return "<p>No budget with enough samples in two policies.</p>"
    budgets = sorted({d.T for d in diffs})
    cell = {(d.pair, d.k, d.T): d.estimate for d in diffs}
    pairs = list(dict.fromkeys((d.pair, d.k) for d in sorted(diffs, key=lambda d: d.k)))
    body: list[list[object]] = []
    for pair, k in pairs:
        row: list[object] = [pair, f"Pass@{k}"]
        for T in budgets:
            est = cell.get((pair, k, T))
            if est is None:
                row.append("")
                continue
            text = esc(f"{_points(est.value)} [{_points(est.low)}, {_points(est.high)}]")
            row.append(Raw(f"<strong>{text}</strong>" if est.low > 0 or est.high < 0 else text))
        body.append(row)
    about = (f"<p>Percentage points; 95% paired bootstrap interval over the {len(group.task_ids)} tasks (both "
             "policies resampled on the same tasks); bold where the interval excludes 0.</p>")  # fmt: skip
    out = about + table(["difference", "k"] + [f"T={T}" for T in budgets], body, css="differences")
    if len(budgets) >= 2:
        series: dict[int, dict[str, list[tuple[int, float, float, float]]]] = {}
        for d in diffs:
            e = d.estimate
            series.setdefault(d.k, {}).setdefault(d.pair, []).append((d.T, 100 * e.value, 100 * e.low, 100 * e.high))
        drawn = [len(p) for by_pair in series.values() for p in by_pair.values() if len(p) >= 2]
        if drawn:
            fig = figures.fig_differences(dict(sorted(series.items())), title=f"paired differences, {_title(group)}")
            out += img(fig, "paired differences against the budget", figure="differences", pass_t_points=min(drawn))
    return out


def eval_sections(groups: Sequence[EvalGroup]) -> dict[str, str]:
    """The report's ``passk``, ``differences``, ``heatmap`` and ``tables`` sections (ids of
    :data:`arlkit.report.html.SECTION_TITLES`); ``differences`` only where a group holds two policies."""
    parts: dict[str, list[str]] = {"passk": [], "differences": [], "heatmap": [], "tables": []}
    for number, group in enumerate(groups, 1):
        head = _head(group)
        parts["passk"].append(_wrap(group, number, head + _passkt_block(group)))
        parts["heatmap"].append(_wrap(group, number, head + _heatmap_block(group)))
        parts["tables"].append(_wrap(group, number, head + _pass_tables(group)))
        if len(group.surfaces) >= 2:
            parts["differences"].append(_wrap(group, number, head + _differences_block(group)))
    return {key: "".join(blocks) for key, blocks in parts.items() if blocks}
