"""arlkit against verl 0.9.1 (installed by ``make test``, --no-deps): every aggregation mode, KL
estimator and built-in-equivalent policy loss equals verl's own on random tensors (values and
gradients, 1e-6), and ``import verl`` registers arlkit's losses and estimators through the plugin."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

verl = pytest.importorskip("verl", reason="verl is installed by `make test` (Makefile: VERL_PIN)")
from omegaconf import OmegaConf  # noqa: E402  (a verl dependency)
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.workers.config import ActorConfig  # noqa: E402

from arlkit.algos import LOSS_AGG_MODES, agg_loss, compute_advantage, kl_penalty, policy_loss, sequence_groups  # noqa: E402
from arlkit.algos.advantages import ADV_ESTIMATORS, AdvantageInputs  # noqa: E402
from arlkit.algos.kl import KL_KINDS  # noqa: E402
from arlkit.algos.policy_losses import POLICY_LOSSES  # noqa: E402
from arlkit.integrations.verl_plugin import SETTINGS_ENV  # noqa: E402

TOL = {"atol": 1e-6, "rtol": 1e-6}


def _batch(seed: int, rows: int = 6, length: int = 9) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, length, generator=g, dtype=torch.float64) * 2
    new = old + 0.3 * torch.randn(rows, length, generator=g, dtype=torch.float64)
    adv = torch.randn(rows, length, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, length + 1, (rows,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(torch.float64)
    mask[1] = 0.0  # an empty row (e.g. emptied by sequence masking)
    return old, new, adv, mask


def _grads(fn, *tensors: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:  # type: ignore[no-untyped-def]
    leaves = [t.clone().requires_grad_(True) for t in tensors]
    value = fn(*leaves)
    value.backward()
    return value.detach(), [leaf.grad for leaf in leaves]


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("scale", [None, 16.0])
def test_every_aggregation_mode_equals_verls(mode: str, scale: float | None) -> None:
    _, values, _, mask = _batch(1)
    ours, ours_grad = _grads(lambda v: agg_loss(v, mask, mode, loss_scale_factor=scale), values)
    theirs, theirs_grad = _grads(lambda v: core_algos.agg_loss(v, mask, mode, loss_scale_factor=scale), values)
    torch.testing.assert_close(ours, theirs.to(ours.dtype), **TOL)
    torch.testing.assert_close(ours_grad[0], theirs_grad[0], **TOL)


@pytest.mark.parametrize("kind", KL_KINDS)
def test_every_kl_estimator_equals_verls(kind: str) -> None:
    old, new, _, _ = _batch(2)
    ours, ours_grad = _grads(lambda a, b: kl_penalty(a, b, kind).sum(), new, old)
    theirs, theirs_grad = _grads(lambda a, b: core_algos.kl_penalty(a, b, kind).sum(), new, old)
    torch.testing.assert_close(ours, theirs, **TOL)
    for a, b in zip(ours_grad, theirs_grad, strict=True):
        torch.testing.assert_close(a, b, **TOL)


def _verl_config(**fields: object) -> ActorConfig:
    """verl's own actor config (its built-in losses insist on one)."""
    return ActorConfig(strategy="fsdp", ppo_micro_batch_size_per_gpu=1, rollout_n=1, **{"clip_ratio": 0.2, **fields})


# arlkit loss, its hyperparameters, the verl built-in, the verl config fields, the aggregation modes compared
CASES = [
    ("vanilla", {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0}, "vanilla",
     {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}, LOSS_AGG_MODES),
    ("gspo", {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4}, "gspo", {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4},
     ("seq-mean-token-mean",)),
    ("cispo", {"clip_ratio_low": 1.0, "clip_ratio_high": 0.2}, "cispo", {"clip_ratio_low": 1.0, "clip_ratio_high": 0.2},
     LOSS_AGG_MODES),
    ("sapo", {"tau_pos": 1.0, "tau_neg": 1.05}, "sapo", {"tau_pos": 1.0, "tau_neg": 1.05}, ("seq-mean-token-mean",)),
]


@pytest.mark.parametrize(("ours", "hyper", "theirs", "fields", "modes"), CASES, ids=[c[0] for c in CASES])
def test_built_in_policy_losses_equal_verls(ours: str, hyper: dict, theirs: str, fields: dict, modes: tuple) -> None:  # type: ignore[type-arg]
    old, new, adv, mask = _batch(3)
    verl_fn = core_algos.get_policy_loss_fn(theirs)
    config = _verl_config(**fields)
    for mode in modes:
        a, a_grad = _grads(lambda lp: policy_loss(ours, old, lp, adv, mask, mode, **hyper).loss, new)
        b, b_grad = _grads(lambda lp: verl_fn(old, lp, adv, mask, mode, config)[0], new)
        torch.testing.assert_close(a, b, **TOL)
        torch.testing.assert_close(a_grad[0], b_grad[0], **TOL)


def test_import_verl_registers_every_arlkit_name() -> None:
    for name in POLICY_LOSSES.names():
        assert f"arlkit_{name}" in core_algos.POLICY_LOSS_REGISTRY
    for name in ADV_ESTIMATORS.names():
        assert f"arlkit_{name}" in core_algos.ADV_ESTIMATOR_REGISTRY


@pytest.mark.parametrize("name", ["vanilla", "gspo", "cispo", "sapo"])
def test_registered_losses_are_arlkits_with_verls_data_parallel_scaling(name: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    old, new, adv, mask = _batch(4)
    fn = core_algos.get_policy_loss_fn(f"arlkit_{name}")
    hyper = {"clip_ratio_low": 0.1, "clip_ratio_high": 0.3} if name != "sapo" else {"tau_pos": 0.9, "tau_neg": 1.1}
    mode = "token-mean"
    loss, metrics = fn(old, new, adv, mask, mode, _verl_config(**hyper))
    expected = policy_loss(name, old, new, adv, mask, mode, **hyper)
    torch.testing.assert_close(loss, expected.loss, **TOL)
    groups = sequence_groups(old, new, adv, mask)  # AA Fig. 3's groups ride along (no entropy, no KL in verl's call)
    assert set(metrics) == set(expected.metrics) | set(groups) and all(isinstance(v, float) for v in metrics.values())
    assert all(metrics[k] == pytest.approx(float(v)) for k, v in groups.items())
    # two data-parallel ranks, this one holding a third of the global batch's tokens (or sequences)
    tokens, sequences = float(mask.sum()), float((mask.sum(-1) > 0).sum())
    for agg, info, factor in [("token-mean", {"dp_size": 2, "batch_num_tokens": 3 * tokens}, 2 / 3),
                              ("seq-mean-token-mean", {"dp_size": 2, "global_batch_size": 3 * sequences}, 2 / 3),
                              ("token-sum", {"dp_size": 2}, 2.0)]:
        if name in ("gspo", "sapo") and agg != "seq-mean-token-mean":
            continue  # these fix their own aggregation
        scaled, _ = fn(old, new, adv, mask, agg, _verl_config(global_batch_info=info, **hyper))
        torch.testing.assert_close(scaled, factor * policy_loss(name, old, new, adv, mask, agg, **hyper).loss, **TOL)
    # settings verl's config cannot hold travel in the environment variable, and are never dropped
    extra = {"clip_ratio_high": 5e-4} if name == "gspo" else {"sequence_mask": True, "seq_mask_delta": 0.01}
    monkeypatch.setenv(SETTINGS_ENV, json.dumps({name: extra}))
    moved, _ = fn(old, new, adv, mask, mode, _verl_config(**hyper))
    torch.testing.assert_close(moved, policy_loss(name, old, new, adv, mask, mode, **{**hyper, **extra}).loss, **TOL)
    assert not torch.allclose(moved, loss)  # the setting took effect
    monkeypatch.setenv(SETTINGS_ENV, json.dumps({name: {"no_such_setting": 1}}))
    with pytest.raises(Exception, match="no_such_setting"):
        fn(old, new, adv, mask, mode, _verl_config(**hyper))


def _outcome_batch() -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    g = torch.Generator().manual_seed(5)
    mask = (torch.arange(7)[None, :] < torch.randint(1, 8, (8,), generator=g)[:, None]).float()
    rewards = torch.zeros(8, 7)
    last = mask.sum(-1).long() - 1
    rewards[torch.arange(8), last] = torch.randint(0, 2, (8,), generator=g).float() + 0.5 * torch.rand(8, generator=g)
    return rewards, mask, np.array(["a", "a", "a", "a", "b", "b", "b", "b"], dtype=object)


@pytest.mark.parametrize(("name", "builtin"), [("grpo", "grpo"), ("rloo", "rloo"),
                                               ("reinforce_plus_plus_baseline", "reinforce_plus_plus_baseline")])
def test_registered_estimators_equal_arlkits_and_verls(name: str, builtin: str) -> None:
    rewards, mask, index = _outcome_batch()
    algo = OmegaConf.create({"norm_adv_by_std_in_grpo": True, "gamma": 1.0, "lam": 1.0})
    ours, _ = core_algos.get_adv_estimator_fn(f"arlkit_{name}")(rewards, mask, config=algo, index=index)
    direct = compute_advantage(name, AdvantageInputs(response_mask=mask, token_level_rewards=rewards, index=index))
    torch.testing.assert_close(ours, direct.advantages, **TOL)
    kwargs = {"config": algo} if builtin != "grpo" else {"norm_adv_by_std_in_grpo": True}
    theirs, _ = core_algos.get_adv_estimator_fn(builtin)(token_level_rewards=rewards, response_mask=mask, index=index,
                                                          **kwargs)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_estimators_that_need_more_than_verl_passes_say_where_they_run() -> None:
    rewards, mask, index = _outcome_batch()
    for name in ("gigpo", "empg"):
        with pytest.raises(RuntimeError, match="trainer.v1.trainer_mode=arlkit"):
            core_algos.get_adv_estimator_fn(f"arlkit_{name}")(rewards, mask, index=index)
    with pytest.raises(RuntimeError, match="algorithm.adv_estimator=gae"):
        core_algos.get_adv_estimator_fn("arlkit_gae")(rewards, mask, index=index)
