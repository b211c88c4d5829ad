"""`arlkit train` runs on the sandboxed environments (terminal, math-tir), on webshop and alfworld: one RL step of the
nano model updates the weights and logs a step. (The untrained nano model's replies rarely parse, so this
checks the trainer's path through these environments; their steps are tested in tests/envs.)"""

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

SANDBOXED = pytest.mark.skipif(
    all(available_levels()[lv] is not None for lv in ("unshare", "bwrap")),
    reason="these environments need a namespaced sandbox level (bwrap, or unshare as root)",
)
EXTRAS = {"math-tir": ("reasoning_gym",), "webshop": ("bm25s", "snowballstemmer"), "alfworld": ("alfworld",)}


@pytest.mark.parametrize(("env", "args"), [
    pytest.param("terminal", {"t_max": 3}, marks=SANDBOXED),
    pytest.param("math-tir", {"t_max": 3, "task_set": "shipped"}, marks=SANDBOXED),
    ("webshop", {"t_max": 3}),
    ("alfworld", {"t_max": 2}),
])  # fmt: skip
def test_one_rl_step(env: str, args: dict[str, Any], nano_dir: Path, tmp_path: Path) -> None:
    for module in EXTRAS.get(env, ()):
        pytest.importorskip(module)
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
