"""``arena.csv``, ``arena.md`` and ``arena.png`` of ``arlkit arena`` (docs/arena.md; AA Table 3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from arlkit.report import figures
from arlkit.report.outputs import save_figure, write_csv, write_text

__all__ = ["write_arena"]


def _num(x: float, digits: int = 3) -> str:
    return "n/a" if math.isnan(x) else f"{x:.{digits}f}"


def write_arena(rows: Sequence[Any], out: Path, plan: Any) -> None:
    """The arena's table (one row per variant, :class:`~arlkit.recipes.arena.ArenaRow`) and its figure."""
    out = Path(out)
    header = [f.name for f in fields(rows[0])] if rows else []
    write_csv(out / "arena.csv", header, ([asdict(r)[h] for h in header] for r in rows))
    plt = figures._plt()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * len(rows) + 2), 3.8))
    xs = range(len(rows))
    colors = ["#e15759" if r.collapsed else ("#59a14f" if r.stable == r.seeds else "#f28e2b") for r in rows]
    ax.bar(xs, [100 * r.success for r in rows], color=colors,
           yerr=[[100 * (r.success - r.low) for r in rows], [100 * (r.high - r.success) for r in rows]], capsize=3)  # fmt: skip
    ax.set_xticks(list(xs), [r.variant for r in rows], rotation=45, ha="right")
    ax.set(ylabel=f"success at {plan.budgets[-1]} of T_max (%)", title="arena: green stable, orange unstable, red collapsed")
    fig.tight_layout()
    save_figure(fig, out / "arena.png")
    lines = [
        f"# Policy-optimisation arena on {plan.env.name}",
        "",
        f"{len(plan.seeds)} seed(s) x {plan.rl['steps']} RL steps per variant from one checkpoint"
        f" ({'behaviour-cloned ' + str(plan.sft['steps']) + ' steps from ' if plan.sft.get('steps', 1) > 0 else ''}"
        f"{plan.model}); evaluation: {plan.eval_tasks} held-out tasks x {plan.eval_samples} samples per seed, "
        f"announced budgets {', '.join(plan.budgets)} of T_max.",
        "",
        f"| variant | preset | success at {plan.budgets[-1]} [95% CI] | vs GRPO | stable seeds | collapsed seeds | "
        "final success variance | max grad norm | final KL to ref |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        vs = "—" if r.variant == "grpo" else ("n/a" if math.isnan(r.vs_grpo) else f"{r.vs_grpo:+.1f}%")
        lines.append(
            f"| {r.variant} | {r.preset} | {100 * r.success:.1f} [{100 * r.low:.1f}, {100 * r.high:.1f}] | {vs} | "
            f"{r.stable}/{r.seeds} | {r.collapsed}/{r.seeds} | {_num(r.final_var, 4)} | {_num(r.max_grad_norm)} | "
            f"{_num(r.final_kl, 4)} |"
        )
    lines += [
        "",
        "Success: Pass@1 at the largest budget, trajectories of every seed pooled per task, percentile bootstrap over "
        "tasks. vs GRPO: relative change of that success. Stable / collapsed: ARLArena's verdict and the collapse "
        "detector per seed (stability/stability.md states both rules).",
        "",
        "Files: arena.csv, arena.png, stability/ (per-run verdicts and figures), runs/ (training runs), eval/ "
        "(evaluations), logs/",
    ]
    write_text(out / "arena.md", "\n".join(lines) + "\n")
