"""``arlkit analyze stability``: ARLArena's stability verdict, collapse detector and figures for
training runs (docs/arena.md; :mod:`arlkit.analysis.stability`, :mod:`arlkit.report.stability_files`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arlkit.analysis.stability import StabilityConfig, StabilityVerdict, stability_verdict
from arlkit.config import read_yaml
from arlkit.report.stability_files import write_stability
from arlkit.rundir import read_complete_jsonl

__all__ = ["StabilityConfig", "analyze_stability", "load_training_run"]


def load_training_run(path: str | Path) -> tuple[str, list[dict[str, Any]], int | None]:
    """A training run's name, its ``metrics.jsonl`` records and its trajectories per step (from
    ``config.yaml``: tasks_per_step x group_size; None when unknown)."""
    run = Path(path)
    rows = read_complete_jsonl(run / "metrics.jsonl")
    if not rows:
        raise ValueError(f"{run}: no metrics.jsonl with logged steps (is it an `arlkit train` run directory?)")
    per_step = None
    if (run / "config.yaml").exists():
        config = read_yaml(run / "config.yaml") or {}
        if isinstance(config, dict) and isinstance(config.get("tasks_per_step"), int) and isinstance(config.get("group_size"), int):
            per_step = config["tasks_per_step"] * config["group_size"]
    return run.resolve().name, rows, per_step


def analyze_stability(
    run_dirs: Sequence[str | Path], *, out: str | Path | None = None, config: StabilityConfig = StabilityConfig()
) -> list[StabilityVerdict]:
    """The verdict of every run (and, with ``out``, the files of :mod:`arlkit.report.stability_files`)."""
    runs: dict[str, list[dict[str, Any]]] = {}
    verdicts = []
    for path in run_dirs:
        name, rows, per_step = load_training_run(path)
        while name in runs:
            name += "'"
        runs[name] = rows
        verdicts.append(stability_verdict(name, rows, trajectories_per_step=per_step, config=config))
    if out is not None:
        write_stability(verdicts, runs, Path(out), config, {"runs": [str(p) for p in run_dirs]})
    return verdicts
