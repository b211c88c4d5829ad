"""Shared fixtures: the nano model and a briefly behaviour-cloned copy, built once per session."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

# Small deterministic maps with few holes: a random-acting policy succeeds sometimes, a good one always,
# so rewards vary within groups and RL has something to learn in a few steps.
EASY_ENV: dict[str, Any] = {"size": 3, "slippery": False, "t_max": 6, "p_frozen": 0.95}


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> None:
    # Tiny models gain little from a second thread, and OpenMP threads degrade badly on a shared machine.
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def nano_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from arlkit.rollout.corpus import init_tiny_model

    return init_tiny_model("nano", tmp_path_factory.mktemp("nano") / "model", seed=0)


@pytest.fixture(scope="session")
def bc_dir(tmp_path_factory: pytest.TempPathFactory, nano_dir: Path) -> Path:
    """The nano model cloned from a mostly random expert (noisy oracle, eps 0.7) on easy maps: the reply
    format is learnt, the actions stay exploratory (valid replies, ~10-20% success, rewards that vary
    within a group, room for RL)."""
    from arlkit.config import EnvSpec
    from arlkit.recipes import run_sft
    from arlkit.rollout import PromptConfig
    from arlkit.train import OptimConfig, SFTConfig

    config = SFTConfig(model=str(nano_dir), env=EnvSpec("frozenlake", EASY_ENV), expert="noisy-oracle:0.7", relabel=False,
                       tasks=24, samples=2, prompt=PromptConfig(history=1), steps=40, batch_rows=32,
                       optim=OptimConfig(lr=3e-3, warmup_steps=4))
    return run_sft(config, tmp_path_factory.mktemp("bc"), progress=False).model_dir


@dataclasses.dataclass(frozen=True)
class QuickDemo:
    out: Path
    done: subprocess.CompletedProcess
    wall: float


@pytest.fixture(scope="session")
def quick_demo(tmp_path_factory: pytest.TempPathFactory) -> QuickDemo:
    """One ``arlkit demo --quick`` run (about 4 minutes on 2 cores) shared by the tests that read it (the demo's
    own tests, and the study of the two tiny models it trains). It runs to the end however long a loaded
    machine makes it take: the suite's own limit bounds it."""
    out = tmp_path_factory.mktemp("quick") / "demo"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "arlkit", "demo", "--quick", "--out", str(out)], env=env,
                          capture_output=True, text=True)
    return QuickDemo(out, done, time.monotonic() - t0)
