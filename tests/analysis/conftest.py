"""Shared fixtures: small evaluation runs made with scripted policies."""

from __future__ import annotations

from pathlib import Path

import pytest

from arlkit.config import EnvSpec
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.rollout import PromptConfig

BASE, RL = "noisy-oracle:0.6", "noisy-oracle:0.2"


def make_run(out: Path, env: str, env_args: dict, policies: tuple[str, ...], *, tasks: int = 6, samples: int = 3,
             budgets: tuple[str, ...] = ("100%",), budget_mode: str = "announced") -> Path:
    config = EvalConfig(env=EnvSpec(env, env_args), policies=policies, tasks=tasks, samples=samples, budgets=budgets,
                        prompt=PromptConfig(budget_mode), bootstrap=100)  # type: ignore[arg-type]
    run_eval(config, out)
    return out


@pytest.fixture(scope="session")
def fl_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Slippery FrozenLake (T_max 20): the 'base' noisy-oracle:0.6 and the 'RL' noisy-oracle:0.2 in one run."""
    return make_run(tmp_path_factory.mktemp("fl") / "run", "frozenlake", {"t_max": 20}, (BASE, RL))


@pytest.fixture(scope="session")
def fl_det_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Deterministic FrozenLake (T_max 12) with oracle, noisy-oracle:0.5 and random."""
    return make_run(tmp_path_factory.mktemp("fldet") / "run", "frozenlake", {"t_max": 12, "slippery": False},
                    ("oracle", "noisy-oracle:0.5", "random"), tasks=5, samples=2)


@pytest.fixture(scope="session")
def sokoban_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sokoban (T_max 15) with noisy-oracle:0.5 and noisy-oracle:0.1."""
    return make_run(tmp_path_factory.mktemp("sk") / "run", "sokoban", {}, ("noisy-oracle:0.5", "noisy-oracle:0.1"),
                    tasks=4, samples=2)


@pytest.fixture
def run_factory():  # type: ignore[no-untyped-def]
    """``make_run(out, env, env_args, policies, ...)``: a small evaluation run."""
    return make_run
