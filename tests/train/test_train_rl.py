"""The RL trainer on the nano model: every preset updates the weights, lr = 0 changes nothing, GRPO
learns on easy maps, BudgetMix draws and announces one budget per group and passes its audit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from arlkit.algos import PRESETS
from arlkit.envs import make
from arlkit.policies import SamplingConfig
from arlkit.policies.hf import HFPolicy
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts
from arlkit.config import load_config
from arlkit.train import TrainConfig, audit_run, budget_candidates, read_metrics
from arlkit.recipes import train
from arlkit.train.checkpoint import load_checkpoint

from .conftest import EASY_ENV

STEP_ROW_PRESETS = {"gigpo", "empg", "sampo"}


def _config(model: Path, **overrides: Any) -> TrainConfig:
    base: dict[str, Any] = {
        "model": str(model), "env": {"args": EASY_ENV}, "train_tasks": 8, "steps": 1, "tasks_per_step": 2,
        "group_size": 4, "sampling": {"max_new_tokens": 10}, "validation": {"every": 0}, "progress": False,
        "tensorboard": False, "optim": {"lr": 1e-3},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return load_config(TrainConfig, None, base)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


@pytest.mark.parametrize("preset", sorted(PRESETS) + ["grpo-step-rows"])
def test_one_step_of_every_preset_changes_the_weights(preset: str, bc_dir: Path, tmp_path: Path) -> None:
    name = preset.removesuffix("-step-rows")
    step_rows = name in STEP_ROW_PRESETS or preset.endswith("-step-rows")
    # no weight decay: AdamW's decay alone would move every weight even with zero gradients
    config = _config(bc_dir, prompt={"history": 1 if step_rows else None}, tasks_per_step=4, group_size=8,
                     algo={"preset": name, **({"step_rows": True} if preset.endswith("-step-rows") else {})},
                     optim={"weight_decay": 0.0})
    result = train(config, tmp_path / "run")
    before, after = _weights(bc_dir), _weights(result.final_model)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, f"{preset}: no weight changed"
    metrics = read_metrics(tmp_path / "run" / "metrics.jsonl")[-1]
    assert metrics["adv/abs_mean"] > 0, "no learning signal in this batch: the check would be vacuous"
    assert metrics["update/updates"] == 1 and np.isfinite(metrics["actor/pg_loss"])
    # ARLArena's stability diagnostics ride along on every preset (docs/arena.md)
    groups = [k for k in metrics if k.startswith("stab/seq/")]
    assert len(groups) == 9 and sum(metrics[k] for k in groups) == pytest.approx(1.0)
    assert 0 <= metrics["rollout/valid_format_tokens"] <= 1 and metrics["actor/entropy_mean"] > 0
    if name == "ppo":
        critic = load_checkpoint(tmp_path / "run" / "checkpoints" / "step_000001.pt")["critic"]
        assert critic["value_head.weight"].abs().sum() > 0  # initialised at zero, moved by the critic loss
        assert np.isfinite(metrics["critic/vf_loss"])


def test_chunked_backward_trains_as_one_backward(bc_dir: Path, tmp_path: Path) -> None:
    """``chunked_backward: true`` with a chunk of a few rows (``max_tokens``): the same rollouts, losses
    and gradient norm as one backward over the mini-batch (an entropy bonus and the KL term included),
    up to float rounding, and the weights move."""
    # two mini-batches: the second update's policy has moved from the reference, so its KL term is not 0
    overrides: dict[str, Any] = {"tasks_per_step": 4, "group_size": 4, "model.max_tokens": 256, "mini_batches": 2,
                                 "optim": {"weight_decay": 0.0}, "algo": {"entropy_coeff": 0.01, "kl_coef": 0.05}}
    runs = {flag: train(_config(bc_dir, chunked_backward=flag, **overrides), tmp_path / str(flag)) for flag in (False, True)}
    one, chunked = (read_metrics(tmp_path / str(flag) / "metrics.jsonl")[-1] for flag in (False, True))
    assert one["rollout/rows"] == chunked["rollout/rows"] and one["adv/abs_mean"] > 0 and one["actor/kl_loss"] > 0
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/entropy_mean", "optim/grad_norm"):
        assert chunked[key] == pytest.approx(one[key], rel=1e-4, abs=1e-7), key
    before, after = _weights(bc_dir), _weights(runs[True].final_model)
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_learning_rate_zero_changes_nothing(bc_dir: Path, tmp_path: Path) -> None:
    result = train(_config(bc_dir, optim={"lr": 0.0}, mini_batches=2, epochs=2), tmp_path / "run")
    before, after = _weights(bc_dir), _weights(result.final_model)
    assert all(torch.equal(before[k], after[k]) for k in before)
    metrics = read_metrics(tmp_path / "run" / "metrics.jsonl")[-1]
    # nothing moved, so every update saw exactly on-policy ratios; staleness counts updates 0..3
    assert metrics["actor/ppo_kl"] == 0.0 and metrics["update/staleness_max"] == 3.0
    assert metrics["update/updates"] == 4.0


def _success(model_dir: Path, tasks: list, seed: int = 123) -> float:
    from arlkit.train.model import load_model

    model, tokenizer = load_model(model_dir, attn_implementation="eager")
    policy = HFPolicy(model, tokenizer, SamplingConfig(temperature=1.0, max_new_tokens=10), attn_implementation="eager")
    jobs = make_jobs(tasks, 16, EASY_ENV["t_max"], seed)
    trajectories = run_rollouts(lambda: make("frozenlake", **EASY_ENV), jobs, policy, PromptConfig("announced", None))
    return float(np.mean([t.success for t in trajectories]))


def test_tiny_grpo_improves_reward_on_easy_maps(bc_dir: Path, tmp_path: Path) -> None:
    tasks = make("frozenlake", **EASY_ENV).tasks("train", 4)
    # measured: success 0.11 -> 0.53 on these maps (8 GRPO steps from the exploratory base)
    config = _config(bc_dir, train_tasks=4, steps=8, tasks_per_step=4, group_size=8, algo={"kl_coef": 0.0})
    before = _success(bc_dir, tasks)
    result = train(config, tmp_path / "run")
    after = _success(result.final_model, tasks)
    assert after >= before + 0.15, (before, after)


def _groups(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]


def test_budgetmix_draws_one_candidate_per_group_announces_it_and_passes_audit(bc_dir: Path, tmp_path: Path) -> None:
    env = dict(EASY_ENV, t_max=10)
    config = _config(bc_dir, env={"args": env}, budget="budgetmix", steps=3, tasks_per_step=6, group_size=2,
                     prompt={"history": 1}, algo={"preset": "gigpo"})
    train(config, tmp_path / "mix")
    groups = _groups(tmp_path / "mix")
    assert len(groups) == 18
    for g in groups:
        assert g["budget"] in budget_candidates(10)
        assert {t["budget"] for t in g["trajectories"]} == {g["budget"]}
        for t in g["trajectories"]:
            assert t["announced"] == [[g["budget"], k, g["budget"] - k] for k in range(t["turns"])]
    assert len({g["budget"] for g in groups}) > 3
    report = audit_run(tmp_path / "mix")
    assert report.passed, report.render()
    assert any(t["exhausted"] for g in groups for t in g["trajectories"])  # the zero-reward check had cases

    # a doctored log fails: a group ran under a budget that is not a candidate
    lines = (tmp_path / "mix" / "rollouts.jsonl").read_text().splitlines()
    bad = json.loads(lines[0])
    bad["budget"] = 11
    for t in bad["trajectories"]:
        t["budget"] = 11
    (tmp_path / "mix" / "rollouts.jsonl").write_text("\n".join([json.dumps(bad), *lines[1:]]) + "\n")
    assert not audit_run(tmp_path / "mix").passed

    full = _config(bc_dir, env={"args": env}, steps=1, tasks_per_step=3, group_size=2)
    train(full, tmp_path / "full")
    assert {g["budget"] for g in _groups(tmp_path / "full")} == {10}
    assert audit_run(tmp_path / "full").passed


def test_validation_logs_r_multi_and_r_single_with_a_saved_pool(bc_dir: Path, tmp_path: Path) -> None:
    config = _config(bc_dir, steps=2, prompt={"history": 1}, algo={"step_rows": True},
                     validation={"every": 1, "tasks": 4, "dynamics": {"states": 12, "actions": 2, "pool_tasks": 3,
                                                                     "pool_samples": 2}})
    train(config, tmp_path / "run")
    metrics = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [0, 1, 2]
    for m in metrics:
        assert 0.0 <= m["val/success"] <= 1.0 and 0.0 <= m["val/r_single"] <= 1.0
    pool = json.loads((tmp_path / "run" / "dynamics_pool.json").read_text())
    assert len(pool) == 12 and all(s["remaining"] == EASY_ENV["t_max"] - s["depth"] for s in pool)


def test_lora_trains_adapters_only(bc_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    result = train(_config(bc_dir, lora={"enabled": True, "r": 4}), tmp_path / "run")
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "step_000001.pt")["model"]
    assert state and all("lora_" in k for k in state)
    before, after = _weights(bc_dir), _weights(result.final_model)  # merged adapters
    assert set(before) == set(after) and any(not torch.equal(before[k], after[k]) for k in before)
