"""Writing an evaluation's ``passkt.csv``, ``summary.md`` and ``passkt.png``."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from arlkit.metrics.passkt import CSV_HEADER, PassRow
from arlkit.report.figures import fig_passkt
from arlkit.report.outputs import save_figure
from arlkit.rundir import atomic_path, atomic_write_text

__all__ = ["plot_passkt", "summary_markdown", "write_eval_report", "write_passkt_csv"]


def write_passkt_csv(rows: Sequence[PassRow], path: Path) -> None:
    """One line per (policy, T, k) with the columns of :data:`CSV_HEADER`."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_HEADER)
        for row in rows:
            writer.writerow(row.csv_row())


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def summary_markdown(rows: Sequence[PassRow], *, title: str, notes: Sequence[str] = ()) -> str:
    """Tables with one row per policy and one column per budget, for k = 1 and the largest k."""
    budgets = sorted({r.T for r in rows})
    ks = sorted({r.k for r in rows})
    policies = list(dict.fromkeys(r.policy for r in rows))
    cell = {(r.policy, r.T, r.k): r for r in rows}
    lines = [f"# {title}", ""]
    for k in sorted({ks[0], ks[-1]}) if rows else ():
        lines.append(f"## Pass@{k} (%, 95% bootstrap CI over tasks)")
        lines.append("")
        header = ["policy"] + [f"T={T} ({_pct(cell[(policies[0], T, k)].T_frac)}%)" for T in budgets]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for policy in policies:
            values = [cell[(policy, T, k)] for T in budgets]
            lines.append(
                f"| {policy} | " + " | ".join(f"{_pct(v.pass_)} [{_pct(v.ci_low)}, {_pct(v.ci_high)}]" for v in values) + " |"
            )
        bounds = [cell[(policies[0], T, k)].expected_optimum for T in budgets]
        if all(b is not None for b in bounds):
            lines.append("| expected optimum | " + " | ".join(_pct(b) for b in bounds if b is not None) + " |")
        headrooms = [cell[(policies[0], T, k)].headroom for T in budgets]
        if k == ks[0] and all(h is not None for h in headrooms):
            lines.append("| budget headroom | " + " | ".join(_pct(h) for h in headrooms if h is not None) + " |")
        lines.append("")
    lines += list(notes)
    return "\n".join(lines).rstrip() + "\n"


def plot_passkt(rows: Sequence[PassRow], path: Path, *, title: str) -> None:
    """``passkt.png``: :func:`arlkit.report.figures.fig_passkt` of the rows."""
    save_figure(fig_passkt([dict(zip(CSV_HEADER, r.csv_row(), strict=True)) for r in rows], title=title), path)


def write_eval_report(out: Path, rows: Sequence[PassRow], *, title: str, notes: Sequence[str] = ()) -> None:
    """``passkt.csv``, ``summary.md`` (``title``, the tables, ``notes`` and the standard notes) and
    ``passkt.png`` of one evaluation run in ``out``."""
    write_passkt_csv(rows, out / "passkt.csv")
    notes = list(notes)
    if any(r.expected_optimum is not None for r in rows):  # environments without an oracle have none
        notes.append("- expected optimum: the Pass@k the optimal policy reaches in expectation, mean over tasks of "
                     "1 - (1 - p*)^k with p* the optimal success probability within T; on deterministic tasks a "
                     "bound no policy passes, on stochastic ones a sampled Pass@k can exceed it.")
    if any(r.headroom is not None for r in rows):
        notes.append("- budget headroom (Pass@1 scale): the budget-aware optimum minus the policy optimal for T_max, "
                     "within T; the ceiling of any gain from budget-aware training (BudgetMix).")
    notes.append("- files: trajectories.jsonl, passkt.csv, passkt.png, run.json")
    atomic_write_text(out / "summary.md", summary_markdown(rows, title=title, notes=notes))
    if rows:
        plot_passkt(rows, out / "passkt.png", title=title)
    else:  # no table yet (see the notes): no stale plot either
        (out / "passkt.png").unlink(missing_ok=True)
