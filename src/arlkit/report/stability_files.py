"""Files and the report section of ``arlkit analyze stability`` (docs/arena.md; AA Fig. 2, Fig. 3).

- ``stability_dynamics.png``: AA Fig. 2's five panels (success rate, off-policy KL, KL to the
  reference, gradient norm, valid-format ratio of action tokens), one line per run;
- ``stability_is_<run>.png``: AA Fig. 3 for one run: (a) the tokens whose ratio left the clip range,
  lower (A < 0, r < 1 − ε_low) and upper (A > 0, r > 1 + ε_high) stacked, and (b) the eight sequence
  groups' shares of the KL to the reference (their shares of the rows without a reference);
- ``stability.csv`` / ``.md`` / ``.json``: the verdict per run.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from arlkit.analysis.stability import StabilityConfig, StabilityVerdict, series
from arlkit.report import figures
from arlkit.report.html_blocks import esc, read_csv, table
from arlkit.report.outputs import save_figure, write_csv, write_json, write_text

__all__ = ["DYNAMICS_PANELS", "fig_is_breakdown", "stability_section", "write_stability"]

DYNAMICS_PANELS = (
    ("reward/success", "success rate"),
    ("actor/ppo_kl", "off-policy KL (old ‖ new)"),
    ("actor/kl_loss", "KL to the reference"),
    ("optim/grad_norm", "gradient norm"),
    ("rollout/valid_format_tokens", "valid-format ratio (action tokens)"),
)
_CSV = ["run", "steps", "success_key", "final_steps", "final_mean", "final_var", "noise_floor", "threshold", "stable",
        "collapse_step", "kl_key"]  # fmt: skip


def fig_is_breakdown(name: str, rows: Sequence[Mapping[str, Any]]) -> Any:
    """AA Fig. 3 (a) and (c) for one run (module docstring)."""
    plt = figures._plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    _, low_steps, low = series(rows, ("actor/pg_clipfrac_low",))
    _, high_steps, high = series(rows, ("actor/pg_clipfrac_high",))
    if low and low_steps == high_steps:
        left.stackplot(low_steps, low, high, labels=["lower: A < 0, r < 1 − ε", "upper: A > 0, r > 1 + ε"],
                       colors=["#e15759", "#4e79a7"])  # fmt: skip
        left.legend(fontsize=7, loc="upper left")
    left.set(title="tokens outside the clip range", xlabel="training step", ylabel="share of tokens")
    family = "stab/kl/" if any(k.startswith("stab/kl/") for r in rows for k in r) else "stab/seq/"
    groups = sorted({k[len(family):] for r in rows for k in r if k.startswith(family)})
    stacks, steps = [], None
    for group in groups:
        _, s, values = series(rows, (family + group,))
        if values and (steps is None or s == steps):
            steps = s
            stacks.append((group, values))
    if steps:
        cmap = plt.get_cmap("tab10")
        right.stackplot(steps, *[v for _, v in stacks], labels=[g for g, _ in stacks],
                        colors=[cmap(i % 10) for i in range(len(stacks))])  # fmt: skip
        right.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    what = "KL to the reference" if family == "stab/kl/" else "sequences (no reference: no KL)"
    right.set(title=f"share of {what} by group", xlabel="training step", ylim=(0, 1))
    fig.suptitle(name)
    fig.tight_layout()
    return fig


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def write_stability(
    verdicts: Sequence[StabilityVerdict],
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    out: Path,
    config: StabilityConfig,
    meta: Mapping[str, Any],
) -> None:
    """stability.csv / .md / .json and the figures (module docstring)."""
    out = Path(out)
    write_csv(out / "stability.csv", _CSV, ([v.run, v.steps, v.success_key, v.final_steps, v.final_mean, v.final_var,
                                             v.noise_floor, config.threshold, int(v.stable), v.collapse, v.kl_key]
                                            for v in verdicts))  # fmt: skip
    panels = [(k, t) for k, t in DYNAMICS_PANELS if any(series(rows, (k,))[1] for rows in runs.values())]
    save_figure(figures.fig_dynamics(runs, panels, title="training dynamics (ARLArena Fig. 2)"), out / "stability_dynamics.png")
    files = ["stability.csv", "stability.md", "stability.json", "stability_dynamics.png"]
    for name, rows in runs.items():
        path = f"stability_is_{_safe(name)}.png"
        save_figure(fig_is_breakdown(name, rows), out / path)
        files.append(path)
    c = config
    lines = ["# Training stability", "", f"- runs: {', '.join(map(str, meta.get('runs', [])))}", "",
             "| run | steps | success (final 20%) | variance | noise floor | stable | collapse at step |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for v in verdicts:
        floor = "n/a" if math.isnan(v.noise_floor) else f"{v.noise_floor:.4f}"
        lines.append(f"| {v.run} | {v.steps} | {100 * v.final_mean:.1f}% | {v.final_var:.4f} | {floor} | "
                     f"{'yes' if v.stable else 'no'} | {v.collapse if v.collapse is not None else 'none'} |")  # fmt: skip
    lines += [
        "",
        f"Stable: the variance of the success rate over the final {100 * c.final_share:g}% of steps is below "
        f"{c.threshold:g} (ARLArena's criterion; the threshold is arlkit's default). Noise floor: the binomial "
        "variance mean p(1 − p)/n of those steps, what a steady policy still shows.",
        f"Collapse: the first step at which, within {c.within} steps, the gradient norm and the KL each exceeded "
        f"{c.explode:g}× their median over the previous {c.window} steps and the valid-format ratio fell "
        f"{c.format_drop:g} below its median.",
        "",
        "Files: " + ", ".join(files),
    ]
    write_text(out / "stability.md", "\n".join(lines) + "\n")
    write_json(out / "stability.json", "stability", {**meta, "config": asdict(config), "runs_verdicts": [asdict(v) for v in verdicts]})


def _png(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"<img src='data:image/png;base64,{data}' alt='{esc(alt)}'>"


def stability_section(path: Path, data: Mapping[str, Any]) -> str:
    """The report's section for one ``stability.json`` (its table and figures)."""
    rows = read_csv(path.parent / "stability.csv") if (path.parent / "stability.csv").exists() else []
    body = [table(["run", "steps", "final success", "variance", "stable", "collapse at step"],
                  [[r["run"], r["steps"], f"{100 * float(r['final_mean']):.1f}%", f"{float(r['final_var']):.4f}",
                    "yes" if r["stable"] == "1" else "no", r["collapse_step"] or "none"] for r in rows])]  # fmt: skip
    for png in sorted(path.parent.glob("stability_*.png")):
        body.append(_png(png, png.stem))
    return "".join(body)
