"""Seeded runs give recorded outputs byte for byte (``tests/data/seeded``): a refactor that is meant to
change no result is checked by these, and a change that moves a result on purpose re-records them.

Runs without a model (scripted policies, oracles) are exact everywhere. A run that samples from a model
depends on how float reductions round, which differs between torch's CPU kernel families
(``torch.backends.cpu.get_cpu_capability()``), so its recording is per family: a family with none is
skipped with the command that records it. The quick demo's table is checked in
``tests/train/test_train_demo.py`` (it needs the quick demo's run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SEEDED = Path(__file__).resolve().parent / "data" / "seeded"
CONFIGS = Path(__file__).resolve().parents[1] / "configs"

TRAIN_OVERRIDES = (
    "model=tiny:nano", "steps=2", "tasks_per_step=2", "group_size=4", "mini_batches=2", "validation.every=1",
    "validation.tasks=2", "validation.dynamics.states=4", "validation.dynamics.pool_tasks=2",
    "validation.dynamics.pool_samples=1", "train_tasks=8", "checkpoint_every=2", "progress=false",
    "tensorboard=false",
)
"""A BudgetMix GRPO run of two steps on the untrained nano model: rollouts, two mini-batches, validation
with R_single, a checkpoint."""


def _arlkit(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "arlkit", *args], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-3000:]


def _without_times(path: Path) -> str:
    """``metrics.jsonl`` less the wall times (``time/*``), key order kept."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return "".join(json.dumps({k: v for k, v in d.items() if not k.startswith("time/")}) + "\n" for d in lines)


@pytest.mark.slow
def test_scripted_demo_passkt_is_byte_identical(tmp_path: Path) -> None:
    _arlkit("demo", "--scripted", "--quick", "--out", str(tmp_path / "demo"))
    after = (tmp_path / "demo" / "eval" / "passkt.csv").read_bytes()
    assert after == (SEEDED / "scripted_demo_quick_passkt.csv").read_bytes()


@pytest.mark.slow
def test_sokoban_eval_passkt_is_byte_identical(tmp_path: Path) -> None:
    _arlkit("eval", "--env", "sokoban", "--policy", "oracle", "--policy", "noisy-oracle:0.3", "--policy", "random",
            "--tasks", "20", "--samples", "4", "--budgets", "50%,100%", "--out", str(tmp_path / "sokoban"))
    after = (tmp_path / "sokoban" / "passkt.csv").read_bytes()
    assert after == (SEEDED / "sokoban_eval_passkt.csv").read_bytes()


@pytest.mark.slow
def test_a_seeded_train_run_logs_the_recorded_metrics_and_rollouts(tmp_path: Path) -> None:
    import torch

    kernels = torch.backends.cpu.get_cpu_capability()
    metrics, rollouts = SEEDED / f"train_metrics.{kernels}.jsonl", SEEDED / f"train_rollouts.{kernels}.jsonl"
    if not metrics.is_file():
        pytest.skip(f"no train run recorded for {kernels} kernels; record it with `arlkit train --config "
                    f"configs/grpo_budgetmix_frozenlake.yaml --out D {' '.join(TRAIN_OVERRIDES)}`, then {metrics.name} "
                    f"from D/metrics.jsonl without its time/* keys and {rollouts.name} from D/rollouts.jsonl")
    run = tmp_path / "train"
    _arlkit("train", "--config", str(CONFIGS / "grpo_budgetmix_frozenlake.yaml"), "--out", str(run), *TRAIN_OVERRIDES)
    assert _without_times(run / "metrics.jsonl") == metrics.read_text(encoding="utf-8")
    assert (run / "rollouts.jsonl").read_bytes() == rollouts.read_bytes()
