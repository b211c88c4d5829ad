"""`arlkit train` runs on the sandboxed environments (terminal, math-tir): one RL step of the nano
model updates the weights and logs a step. (The untrained nano model's replies rarely parse, so this
checks the trainer's path through these environments; their sandboxed steps are tested in tests/envs.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from arlkit.config import load_config
from arlkit.recipes import train
from arlkit.sandbox import available_levels
from arlkit.train import TrainConfig, read_metrics

pytestmark = pytest.mark.skipif(
    all(available_levels()[lv] is not None for lv in ("unshare", "bwrap")),
    reason="these environments need a namespaced sandbox level (bwrap, or unshare as root)",
)


@pytest.mark.parametrize(("env", "args"), [("terminal", {"t_max": 3}), ("math-tir", {"t_max": 3, "task_set": "shipped"})])
def test_one_rl_step_on_a_sandboxed_env(env: str, args: dict[str, Any], nano_dir: Path, tmp_path: Path) -> None:
    if env == "math-tir":
        pytest.importorskip("reasoning_gym")
    config = load_config(TrainConfig, None, {
        "model": str(nano_dir), "env": {"name": env, "args": args}, "train_tasks": 2, "steps": 1,
        "tasks_per_step": 2, "group_size": 2, "sampling": {"max_new_tokens": 12}, "validation": {"every": 0},
        "progress": False, "tensorboard": False, "optim": {"lr": 1e-3},
    })
    before = load_file(str(nano_dir / "model.safetensors"))
    result = train(config, tmp_path / "run")
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1]
    after = load_file(str(Path(result.final_model) / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)
