"""``--wandb PROJECT``: train, sft and eval log to W&B (offline mode here) under metrics.jsonl's names."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from arlkit.config import EnvSpec, load_config
from arlkit.recipes import run_sft, train
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.train import SFTConfig, TrainConfig, read_metrics

from .conftest import EASY_ENV

wandb = pytest.importorskip("wandb", reason="the wandb extra is not installed (pip install 'arlkit[wandb]')")


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[int | None, dict[str, Any]]]:
    """Every ``Run.log`` call of real offline W&B runs, recorded on the way through."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    calls: list[tuple[int | None, dict[str, Any]]] = []
    original = wandb.sdk.wandb_run.Run.log

    def spy(self: Any, data: dict[str, Any], step: int | None = None, *args: Any, **kwargs: Any) -> Any:
        calls.append((step, dict(data)))
        return original(self, data, step, *args, **kwargs)

    monkeypatch.setattr(wandb.sdk.wandb_run.Run, "log", spy)
    return calls


def _offline_run(run: Path) -> Path:
    (found,) = list((run / "wandb").glob("offline-run-*/run-*.wandb"))
    assert found.stat().st_size > 0
    return found


def test_train_logs_every_step_under_the_same_names(bc_dir: Path, tmp_path: Path, logged: list) -> None:  # type: ignore[type-arg]
    config = load_config(TrainConfig, None, {
        "model": str(bc_dir), "env": {"args": EASY_ENV}, "train_tasks": 8, "steps": 2, "tasks_per_step": 2,
        "group_size": 4, "sampling": {"max_new_tokens": 10}, "validation": {"every": 0}, "progress": False,
        "tensorboard": False, "wandb": "arlkit-test"})  # fmt: skip
    train(config, tmp_path / "run")
    _offline_run(tmp_path / "run")
    assert (tmp_path / "run" / "wandb_id.txt").read_text().strip()
    lines = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [step for step, _ in logged] == [1, 2]
    for (step, data), line in zip(logged, lines, strict=True):
        numbers = {k: v for k, v in line.items() if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)
                   and math.isfinite(v)}  # fmt: skip
        assert data == pytest.approx(numbers) and "reward/success" in data and "stab/seq/zero_adv" in data


def test_sft_and_eval_log_too(nano_dir: Path, tmp_path: Path, logged: list) -> None:  # type: ignore[type-arg]
    run_sft(SFTConfig(model=str(nano_dir), env=EnvSpec("frozenlake", EASY_ENV), tasks=4, samples=1, steps=2, batch_rows=8,
                      wandb="arlkit-test"), tmp_path / "bc", progress=False)  # fmt: skip
    _offline_run(tmp_path / "bc")
    assert [step for step, _ in logged] == [1, 2] and all("sft/loss" in data for _, data in logged)
    logged.clear()
    run_eval(EvalConfig(env=EnvSpec("frozenlake", EASY_ENV), policies=("oracle",), tasks=3, samples=2, budgets=("100%",),
                        bootstrap=100, wandb="arlkit-test"), tmp_path / "eval")  # fmt: skip
    _offline_run(tmp_path / "eval")
    (table,) = [data["passkt"] for _, data in logged if "passkt" in data]
    assert table.columns[:3] == ["env", "policy", "budget_mode"] and len(table.data) == 2  # k = 1, 2 at one budget
