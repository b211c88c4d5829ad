"""``arlkit export``: an evaluation run's trajectories as a dataset (parquet, or Hugging Face ``datasets``).

Two tables, from the run's ``trajectories.jsonl``:

- **trajectories**: one row per trajectory: ``id`` (``policy|task|T|sample``), env, policy, task_id,
  sample, budget, budget_mode, success, success_turn, return, ended_by, error, n_turns, ``messages``
  (the conversation the policy saw, without the system prompt: the first observation, then each
  reply and the observation after it, as ``{"role", "content"}`` items) and ``actions``;
- **turns**: one row per turn: trajectory_id, task_id, policy, budget, sample, turn, reply, action,
  valid, reward, observation, remaining (the announced budget), strict_format, and the
  trajectory's success.

``parquet`` writes ``trajectories.parquet``, ``turns.parquet`` and a dataset card (``README.md``)
whose configs name them, so ``datasets.load_dataset(DIR, "turns")`` loads a table; ``hf`` writes
each table with ``Dataset.save_to_disk`` (``datasets.load_from_disk(DIR / "turns")``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from arlkit.config import ConfigError
from arlkit.rollout.records import Trajectory, read_trajectories
from arlkit.rundir import holds_run_dir, run_dir_entries

__all__ = ["export_run", "trajectory_tables"]

_CARD = """---
configs:
- config_name: trajectories
  data_files: trajectories.parquet
  default: true
- config_name: turns
  data_files: turns.parquet
---
# arlkit trajectories

Exported by `arlkit export` from {source}: {n} trajectories, {m} turns. Columns: docs of
`arlkit.recipes.export`.
"""


def trajectory_tables(trajectories: Sequence[Trajectory]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of the two tables (module docstring)."""
    rows, turns = [], []
    for t in trajectories:
        tid = f"{t.policy}|{t.task_id}|{t.budget}|{t.sample}"
        messages = [{"role": "user", "content": t.initial_observation}]
        for k, turn in enumerate(t.turns):
            messages += [{"role": "assistant", "content": turn.reply}, {"role": "user", "content": turn.observation}]
            turns.append({
                "trajectory_id": tid, "task_id": t.task_id, "policy": t.policy, "budget": t.budget, "sample": t.sample,
                "turn": k, "reply": turn.reply, "action": turn.action, "valid": turn.valid, "reward": float(turn.reward),
                "observation": turn.observation, "remaining": turn.remaining, "strict_format": turn.strict_format,
                "success": t.success,
            })  # fmt: skip
        rows.append({
            "id": tid, "env": t.env, "policy": t.policy, "task_id": t.task_id, "sample": t.sample, "budget": t.budget,
            "budget_mode": t.budget_mode, "success": t.success, "success_turn": t.success_turn,
            "return": t.total_return, "ended_by": t.ended_by, "error": t.error, "n_turns": len(t.turns),
            "messages": messages, "actions": [turn.action for turn in t.turns],
        })  # fmt: skip
    return rows, turns


@holds_run_dir("out")
def export_run(run: str | Path, out: str | Path, *, fmt: Literal["parquet", "hf"] = "parquet") -> tuple[int, int]:
    """Export ``run``'s trajectories into ``out`` (a new or empty folder); returns (trajectories, turns)."""
    run, out = Path(run), Path(out)
    source = run / "trajectories.jsonl"
    if not source.is_file():
        raise ConfigError(f"{run}: no trajectories.jsonl (export takes an `arlkit eval` run directory)")
    if out.exists() and (not out.is_dir() or run_dir_entries(out)):
        raise ConfigError(f"--out {str(out)!r} exists and is not an empty folder; choose another")
    trajectories = read_trajectories(source)
    rows, turns = trajectory_tables(trajectories)
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError("--format parquet needs pyarrow; pip install 'arlkit[export]'") from None
        for name, table in (("trajectories", rows), ("turns", turns)):
            pq.write_table(pa.Table.from_pylist(table), out / f"{name}.parquet")
        (out / "README.md").write_text(_CARD.format(source=json.dumps(str(source)), n=len(rows), m=len(turns)), encoding="utf-8")
    elif fmt == "hf":
        try:
            from datasets import Dataset
        except ImportError:
            raise ConfigError("--format hf needs the datasets package; pip install 'arlkit[export]'") from None
        for name, table in (("trajectories", rows), ("turns", turns)):
            Dataset.from_list(table).save_to_disk(str(out / name))
    else:
        raise ConfigError(f"unknown export format {fmt!r}; valid choices: parquet, hf")
    return len(rows), len(turns)
