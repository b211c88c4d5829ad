"""``arlkit export``: an evaluation run's trajectories as a dataset (parquet, or Hugging Face ``datasets``).

Two tables, from the run's ``trajectories.jsonl``:

- **trajectories**: one row per trajectory: ``id`` (``policy|task|T|sample``), env, policy, task_id,
  sample, budget, budget_mode, success, success_turn, return, ended_by, error, n_turns, ``messages``
  (every message the policy saw, as ``{"role", "content"}`` items: the request of its last turn as the
  run's prompt settings built it, system prompt and announced budget included, over the whole
  conversation, then its last reply and the final observation) and ``actions``;
- **turns**: one row per turn: trajectory_id, task_id, policy, budget, sample, turn, reply, action,
  valid, reward, observation, remaining (the announced budget), strict_format, finish_reason (why the
  reply ended: ``stop``, ``length`` when the token cap cut it, empty for scripted policies), and the
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
from arlkit.envs import make
from arlkit.extras import install_hint
from arlkit.rollout.prompts import PromptConfig, turn_messages
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


class _Prompts:
    """The prompt texts of a run's tasks, from the environment its ``run.json`` names (reset on each
    task, as the engine does before the first request)."""

    def __init__(self, record: dict[str, Any]) -> None:
        config = record.get("config", record)
        try:
            self.prompt = PromptConfig(**{**config["prompt"], "history": None})
            self.env = make(config["env"]["name"], **config["env"]["args"])
            self.tasks = {task.task_id: task for task in self.env.tasks(config["split"], int(config["tasks"]))}
        except Exception as exc:  # noqa: BLE001 - a missing extra or an env that changed: one line
            raise ConfigError(f"cannot rebuild the run's environment to write the prompts the policy saw: "
                              f"{type(exc).__name__}: {exc}") from None

    def messages(self, t: Trajectory) -> list[dict[str, Any]]:
        """Every message ``t``'s policy saw (module docstring)."""
        native = self.prompt.tool_calls == "native"
        task = self.tasks.get(t.task_id)
        if task is None:
            raise ConfigError(f"task {t.task_id!r} is not among the run's tasks; was trajectories.jsonl edited?")
        self.env.reset(task, t.env_seed)
        text = self.env.function_prompt_text() if native else self.env.prompt_text()  # type: ignore[attr-defined]
        observations = [t.initial_observation, *(turn.observation for turn in t.turns)]
        asked = max(len(t.turns) - 1, 0)  # the last request: after all turns but the last
        calls = [list((turn.details or {}).get("tool_calls") or []) for turn in t.turns[:asked]]
        messages = turn_messages(self.env.name, text.instruction, text.action_format, budget=t.budget,
                                 observations=observations[: asked + 1], replies=[x.reply for x in t.turns[:asked]],
                                 prompt=self.prompt, calls=calls if native else None)
        if t.turns:
            messages += [{"role": "assistant", "content": t.turns[-1].reply}, {"role": "user", "content": observations[-1]}]
        return [dict(m) for m in messages]


def trajectory_tables(trajectories: Sequence[Trajectory], record: dict[str, Any]) -> tuple[list[dict[str, Any]],
                                                                                            list[dict[str, Any]]]:
    """The rows of the two tables (module docstring); ``record`` is the run's ``run.json``."""
    prompts = _Prompts(record)
    rows, turns = [], []
    for t in trajectories:
        tid = f"{t.policy}|{t.task_id}|{t.budget}|{t.sample}"
        messages = prompts.messages(t)
        for k, turn in enumerate(t.turns):
            turns.append({
                "trajectory_id": tid, "task_id": t.task_id, "policy": t.policy, "budget": t.budget, "sample": t.sample,
                "turn": k, "reply": turn.reply, "action": turn.action, "valid": turn.valid, "reward": float(turn.reward),
                "observation": turn.observation, "remaining": turn.remaining, "strict_format": turn.strict_format,
                "finish_reason": turn.finish_reason,
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
    rows, turns = trajectory_tables(trajectories, json.loads((run / "run.json").read_text(encoding="utf-8")))
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError(f"--format parquet needs pyarrow: {install_hint('export')}") from None
        for name, table in (("trajectories", rows), ("turns", turns)):
            pq.write_table(pa.Table.from_pylist(table), out / f"{name}.parquet")
        (out / "README.md").write_text(_CARD.format(source=json.dumps(str(source)), n=len(rows), m=len(turns)), encoding="utf-8")
    elif fmt == "hf":
        try:
            from datasets import Dataset
        except ImportError:
            raise ConfigError(f"--format hf needs the datasets package: {install_hint('export')}") from None
        for name, table in (("trajectories", rows), ("turns", turns)):
            Dataset.from_list(table).save_to_disk(str(out / name))
    else:
        raise ConfigError(f"unknown export format {fmt!r}; valid choices: parquet, hf")
    return len(rows), len(turns)
