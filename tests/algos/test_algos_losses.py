"""Policy losses: hand-derived values and gradients, slow references, invariants and numerics."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from arlkit.algos import (
    LOSS_AGG_MODES,
    POLICY_LOSSES,
    SEQ_MASK_DELTA,
    PolicyLossOutput,
    agg_loss,
    compute_value_loss,
    policy_loss,
    register_policy_loss,
    sequence_mask_rows,
)

F64 = torch.float64
PROPS = settings(max_examples=50, deadline=None)
LOSSES = ("vanilla", "gspo", "cispo", "sapo")
LN = math.log


def _batch(seed: int, b: int, l: int, scale: float = 0.3, row_adv: bool = False) -> tuple[Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, l, generator=g, dtype=F64) * 3 - 0.05
    new = old + scale * torch.randn(b, l, generator=g, dtype=F64)
    adv = torch.randn(b, 1 if row_adv else l, generator=g, dtype=F64).expand(b, l).clone()
    mask = (torch.rand(b, l, generator=g) < 0.7).to(F64)
    return old, new, adv, mask


def _grad(name: str, old: Tensor, new: Tensor, adv: Tensor, mask: Tensor, mode: str = "token-mean", **hp: object):
    new = new.detach().clone().requires_grad_(True)
    loss, metrics = policy_loss(name, old, new, adv, mask, mode, **hp)
    loss.backward()
    return loss.detach(), new.grad, metrics


# --------------------------------------------------------------------------------------------------------------------
# vanilla (dual-clip PPO/GRPO)


def test_vanilla_hand_computed_values_gradients_and_metrics() -> None:
    # eps_low = eps_high = 0.2, c = 3. Row 0: tokens 1-3, row 1: tokens 4-5 + padding.
    #  t1: A= 1, r=1.5 : max(-1.5, -1.2) = -1.2   (upper clip active, zero gradient)
    #  t2: A= 1, r=0.5 : max(-0.5, -0.8) = -0.5   (unclipped, d/dlogpi = -A r = -0.5)
    #  t3: A=-1, r=0.5 : max( 0.5,  0.8) =  0.8   (lower clip active, zero gradient); min(0.8, 3) = 0.8
    #  t4: A=-1, r=4   : max( 4.0,  1.2) =  4.0 ; dual clip min(4, 3) = 3 (zero gradient)
    #  t5: A=-2, r=1   : max( 2.0,  2.0) =  2.0 ; min(2, 6) = 2 (d/dlogpi = -A r = 2)
    old = torch.zeros(2, 3, dtype=F64)
    new = torch.tensor([[LN(1.5), LN(0.5), LN(0.5)], [LN(4.0), 0.0, 0.0]], dtype=F64)
    adv = torch.tensor([[1.0, 1.0, -1.0], [-1.0, -2.0, 0.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=F64)
    loss, grad, metrics = _grad("vanilla", old, new, adv, mask)
    # token-mean: (-1.2 - 0.5 + 0.8 + 3 + 2) / 5 = 0.82
    assert loss.item() == pytest.approx(0.82, abs=1e-12)
    torch.testing.assert_close(grad, torch.tensor([[0.0, -0.5 / 5, 0.0], [0.0, 2.0 / 5, 0.0]], dtype=F64))
    # seq-mean-token-mean: row 0 (-1.2 - 0.5 + 0.8)/3 = -0.3 ; row 1 (3 + 2)/2 = 2.5 ; mean 1.1
    loss_seq, _, _ = _grad("vanilla", old, new, adv, mask, "seq-mean-token-mean")
    assert loss_seq.item() == pytest.approx(1.1, abs=1e-12)
    assert metrics["actor/pg_clipfrac_high"].item() == pytest.approx(1 / 5)  # t1
    assert metrics["actor/pg_clipfrac_low"].item() == pytest.approx(1 / 5)  # t3
    assert metrics["actor/pg_clipfrac"].item() == pytest.approx(2 / 5)
    assert metrics["actor/pg_clipfrac_dual"].item() == pytest.approx(1 / 5)  # t4
    # ppo_kl = mean(old - new) = -(ln 1.5 + ln .5 + ln .5 + ln 4 + 0) / 5 = -ln(1.5) / 5
    assert metrics["actor/ppo_kl"].item() == pytest.approx(-LN(1.5) / 5, abs=1e-12)
    assert metrics["actor/seq_masked_rows"].item() == 0.0
    assert all(not v.requires_grad for v in metrics.values())


def test_clip_ratio_overrides_change_the_clip() -> None:
    # A = 1, r = 1.25: eps_high 0.2 clips to -1.2 ; eps_high 0.28 leaves -1.25
    old, new = torch.zeros(1, 1, dtype=F64), torch.full((1, 1), LN(1.25), dtype=F64)
    adv, mask = torch.ones(1, 1, dtype=F64), torch.ones(1, 1)
    assert policy_loss("vanilla", old, new, adv, mask).loss.item() == pytest.approx(-1.2)
    assert policy_loss("vanilla", old, new, adv, mask, clip_ratio_high=0.28).loss.item() == pytest.approx(-1.25)


@PROPS
@given(seed=st.integers(0, 10_000), b=st.integers(1, 4), l=st.integers(1, 5), c=st.floats(1.5, 5.0))
def test_dual_clip_bounds_negative_advantage_tokens(seed: int, b: int, l: int, c: float) -> None:
    old, new, adv, mask = _batch(seed, b, l, scale=5.0)
    adv = -adv.abs() - 0.01  # every advantage negative
    for i in range(b):
        for t in range(l):
            if not mask[i, t]:
                continue
            only = torch.zeros_like(mask)
            only[i, t] = 1  # the loss of this single token
            loss = policy_loss("vanilla", old, new, adv, only, clip_ratio_c=c).loss.item()
            assert loss <= -adv[i, t].item() * c + 1e-9


def _token_reference(name: str, old: Tensor, new: Tensor, adv: Tensor, mask: Tensor) -> float:
    """Token-by-token loop of docs/algorithms.md#policy-losses with each loss's default hyperparameters, then its aggregation."""
    rows = []
    for i in range(old.shape[0]):
        valid = [t for t in range(old.shape[1]) if mask[i, t]]
        losses = []
        for t in valid:
            a = adv[i, t].item()
            r = math.exp(max(-20.0, min(20.0, new[i, t].item() - old[i, t].item())))
            if name == "vanilla":  # eps 0.2 / 0.2, c = 3
                lc = max(-a * r, -a * min(max(r, 0.8), 1.2))
                losses.append(min(lc, -a * 3.0) if a < 0 else lc)
            elif name == "cispo":  # eps_low 1 (bound 0), eps_high 0.2
                losses.append(-min(max(r, 0.0), 1.2) * a * new[i, t].item())
            else:  # sapo: tau by the sign of the token's advantage (SAPO; verl 0.9.1)
                tau = 1.0 if a > 0 else 1.05
                losses.append(-4.0 / tau / (1.0 + math.exp(-tau * (r - 1.0))) * a)
        rows.append(losses)
    if name == "sapo":  # seq-mean-token-mean
        means = [sum(r) / len(r) for r in rows if r]
        return sum(means) / len(means) if means else 0.0
    flat = [x for r in rows for x in r]  # token-mean
    return sum(flat) / len(flat) if flat else 0.0


@PROPS
@given(seed=st.integers(0, 10_000), b=st.integers(1, 4), l=st.integers(1, 6), scale=st.sampled_from([0.1, 1.0, 30.0]),
       name=st.sampled_from(["vanilla", "cispo", "sapo"]))
def test_token_losses_match_loop_reference(seed: int, b: int, l: int, scale: float, name: str) -> None:
    old, new, adv, mask = _batch(seed, b, l, scale=scale)
    got = policy_loss(name, old, new, adv, mask).loss.item()
    assert got == pytest.approx(_token_reference(name, old, new, adv, mask), rel=1e-9, abs=1e-9)


# --------------------------------------------------------------------------------------------------------------------
# GSPO


def test_gspo_hand_computed_value_and_gradient() -> None:
    # eps 0.2 both sides. Row 0: 2 tokens, lr = .1, .3 -> s = e^.2 = 1.2214 ; A = 1 : max(-1.2214, -1.2) = -1.2 (clipped)
    # Row 1: 3 tokens, lr = -.1, 0, -.2 -> s = e^-.1 = 0.904837 ; A = -1 : max(0.904837, 0.904837) (inside the clip)
    # seq-mean-token-mean: (-1.2 + 0.904837) / 2
    old = torch.zeros(2, 3, dtype=F64)
    new = torch.tensor([[0.1, 0.3, 9.0], [-0.1, 0.0, -0.2]], dtype=F64)
    adv = torch.tensor([[1.0, 1.0, 0.0], [-1.0, -1.0, -1.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=F64)
    loss, grad, _ = _grad("gspo", old, new, adv, mask, clip_ratio_low=0.2, clip_ratio_high=0.2)
    assert loss.item() == pytest.approx((-1.2 + math.exp(-0.1)) / 2, abs=1e-12)
    # Row 0 is clipped: no gradient. Row 1, each token: d/dlogpi_t of (1/3) sum_t -A s = s / 3, then / 2 rows.
    g = math.exp(-0.1) / 3 / 2
    torch.testing.assert_close(grad, torch.tensor([[0.0, 0.0, 0.0], [g, g, g]], dtype=F64))


def test_gspo_ignores_loss_agg_mode_and_uses_seq_mean_token_mean() -> None:
    old, new, adv, mask = _batch(3, 3, 4, row_adv=True)
    a = policy_loss("gspo", old, new, adv, mask, "token-mean").loss
    b = policy_loss("gspo", old, new, adv, mask, "seq-mean-token-mean").loss
    torch.testing.assert_close(a, b)


@PROPS
@given(seed=st.integers(0, 10_000), b=st.integers(1, 4), l=st.integers(1, 6), eps=st.sampled_from([3e-4, 0.05, 0.2]))
def test_gspo_value_is_sequence_ratio_form_and_gradient_is_per_token(seed: int, b: int, l: int, eps: float) -> None:
    old, new, adv, mask = _batch(seed, b, l, scale=0.2, row_adv=True)
    loss, grad, _ = _grad("gspo", old, new, adv, mask, clip_ratio_low=eps, clip_ratio_high=eps)
    # Reference: the sequence-level objective written directly, s_i = exp(mean_t M lr_t), differentiated by autograd.
    ref_new = new.clone().requires_grad_(True)
    rows = []
    for i in range(b):
        n = int(mask[i].sum())
        if n == 0:
            continue
        s = torch.exp(((ref_new[i] - old[i]) * mask[i]).sum() / n)
        a = adv[i, 0]
        rows.append(torch.maximum(-a * s, -a * s.clamp(1 - eps, 1 + eps)))
    ref = torch.stack(rows).mean() if rows else ref_new.sum() * 0
    ref.backward()
    torch.testing.assert_close(loss, ref.detach())
    torch.testing.assert_close(grad, ref_new.grad)


# --------------------------------------------------------------------------------------------------------------------
# CISPO


def test_cispo_hand_computed_value_and_gradient() -> None:
    # eps_low = 1 (no lower clip), eps_high = 0.2.
    #  t1: A= 1, logpi=-0.5, r=1.5 -> w = 1.2 : -1.2 * 1 * (-0.5) = 0.6 ; d/dlogpi = -w A = -1.2
    #  t2: A=-1, logpi=-2,  r=0.5 -> w = 0.5 : -0.5 * (-1) * (-2) = -1 ; d/dlogpi = 0.5
    # token-mean: (0.6 - 1) / 2 = -0.2 ; gradients / 2
    new = torch.tensor([[-0.5, -2.0]], dtype=F64)
    old = new - torch.tensor([[LN(1.5), LN(0.5)]], dtype=F64)
    adv = torch.tensor([[1.0, -1.0]], dtype=F64)
    loss, grad, metrics = _grad("cispo", old, new, adv, torch.ones(1, 2))
    assert loss.item() == pytest.approx(-0.2, abs=1e-12)
    torch.testing.assert_close(grad, torch.tensor([[-0.6, 0.25]], dtype=F64))
    assert metrics["actor/pg_clipfrac_high"].item() == pytest.approx(0.5)  # t1: A > 0, r > 1.2
    assert metrics["actor/pg_clipfrac_low"].item() == 0.0  # lower bound 0 is never crossed


# --------------------------------------------------------------------------------------------------------------------
# SAPO


def _gate(r: float, tau: float) -> float:
    return 4 / tau / (1 + math.exp(-tau * (r - 1)))


def _gate_slope(r: float, tau: float) -> float:
    s = 1 / (1 + math.exp(-tau * (r - 1)))
    return 4 * s * (1 - s)  # d/dr (4/tau) sigma(tau (r - 1))


def test_sapo_hand_computed_value_and_gradient() -> None:
    # Row 0 (mean A = 1 > 0, tau_pos = 1): r = 1.5, 1 ; Row 1 (mean A = -1, tau_neg = 1.05): r = 0.5.
    # token loss -gate(r) A ; seq-mean-token-mean ; d/dlogpi = -A gate'(r) r / n_i / B
    old = torch.zeros(2, 2, dtype=F64)
    new = torch.tensor([[LN(1.5), 0.0], [LN(0.5), 0.0]], dtype=F64)
    adv = torch.tensor([[1.0, 1.0], [-1.0, 0.0]], dtype=F64)
    mask = torch.tensor([[1, 1], [1, 0]], dtype=F64)
    loss, grad, _ = _grad("sapo", old, new, adv, mask)
    row0 = (-_gate(1.5, 1.0) - _gate(1.0, 1.0)) / 2  # -(4 sigma(0.5) + 2) / 2
    row1 = _gate(0.5, 1.05)  # (4 / 1.05) sigma(-0.525)
    assert loss.item() == pytest.approx((row0 + row1) / 2, abs=1e-12)
    expected = torch.tensor(
        [[-_gate_slope(1.5, 1.0) * 1.5 / 2 / 2, -1.0 / 2 / 2], [_gate_slope(0.5, 1.05) * 0.5 / 2, 0.0]], dtype=F64
    )
    torch.testing.assert_close(grad, expected)


@PROPS
@given(tau=st.floats(0.05, 20.0), a=st.sampled_from([1.0, -1.0]))
def test_sapo_gate_derivative_is_one_at_ratio_one(tau: float, a: float) -> None:
    old = torch.full((1, 1), -0.7, dtype=F64)
    _, grad, _ = _grad("sapo", old, old.clone(), torch.full((1, 1), a, dtype=F64), torch.ones(1, 1),
                       tau_pos=tau, tau_neg=tau)
    # d(-gate A)/dlogpi = -A gate'(1) * r = -A
    assert grad.item() == pytest.approx(-a, abs=1e-12)


# --------------------------------------------------------------------------------------------------------------------
# Shared invariants


def _plain_pg(old: Tensor, new: Tensor, adv: Tensor, mask: Tensor, mode: str) -> Tensor:
    return agg_loss(-adv * torch.exp(new - old), mask, mode)


@PROPS
@given(seed=st.integers(0, 10_000), b=st.integers(1, 4), l=st.integers(1, 5), name=st.sampled_from(LOSSES),
       mode=st.sampled_from(LOSS_AGG_MODES))
def test_ratio_one_gives_the_plain_policy_gradient(seed: int, b: int, l: int, name: str, mode: str) -> None:
    old, _, adv, mask = _batch(seed, b, l, row_adv=name in ("gspo", "sapo"))
    fixed = POLICY_LOSSES.get(name).flags.agg_mode
    mode = fixed or mode
    loss, grad, metrics = _grad(name, old, old.clone(), adv, mask, mode)
    ref_new = old.clone().requires_grad_(True)
    plain = _plain_pg(old, ref_new, adv, mask, mode)
    plain.backward()
    torch.testing.assert_close(grad, ref_new.grad)  # same gradient for every variant
    if name in ("vanilla", "gspo"):
        torch.testing.assert_close(loss, plain.detach())  # -agg(A)
    assert metrics["actor/pg_clipfrac"].item() == 0.0
    assert metrics["actor/ppo_kl"].item() == 0.0


@PROPS
@given(seed=st.integers(0, 10_000), name=st.sampled_from(LOSSES), mode=st.sampled_from(LOSS_AGG_MODES),
       seq_mask=st.booleans())
def test_values_under_the_mask_change_nothing(seed: int, name: str, mode: str, seq_mask: bool) -> None:
    old, new, adv, mask = _batch(seed, 3, 5, scale=1.0)
    hp = {"sequence_mask": True} if seq_mask and name != "gspo" else {}
    loss, grad, metrics = _grad(name, old, new, adv, mask, mode, **hp)
    hole = mask == 0
    junk_old = torch.where(hole, torch.full_like(old, -1e4), old)
    junk_new = torch.where(hole, torch.full_like(new, float("-inf")), new)
    junk_adv = torch.where(hole, torch.full_like(adv, float("nan")), adv)
    loss2, grad2, metrics2 = _grad(name, junk_old, junk_new, junk_adv, mask, mode, **hp)
    torch.testing.assert_close(loss, loss2)
    torch.testing.assert_close(grad, grad2)
    for key in metrics:
        torch.testing.assert_close(metrics[key], metrics2[key])


@PROPS
@given(seed=st.integers(0, 10_000), name=st.sampled_from(["vanilla", "cispo"]))
def test_masking_a_token_removes_exactly_its_own_term(seed: int, name: str) -> None:
    # Token-local losses: with token-sum, masking one valid token subtracts that token's loss and nothing else.
    old, new, adv, mask = _batch(seed, 3, 4, scale=1.0)
    mask[0, 0] = 1
    full, grad_full, _ = _grad(name, old, new, adv, mask, "token-sum")
    single = torch.zeros_like(mask)
    single[0, 0] = 1
    own, _, _ = _grad(name, old, new, adv, single, "token-sum")
    less = mask.clone()
    less[0, 0] = 0
    rest, grad_rest, _ = _grad(name, old, new, adv, less, "token-sum")
    torch.testing.assert_close(rest, full - own)
    keep = less.bool()
    torch.testing.assert_close(grad_rest[keep], grad_full[keep])
    assert grad_rest[0, 0].item() == 0.0


# --------------------------------------------------------------------------------------------------------------------
# Sequence masking


def test_sequence_mask_hand_picked_rows() -> None:
    # D_i = mean(old - new) over valid tokens ; delta = ln 1.25 = 0.223
    #  row 0: A = -1, D = 0.5 -> dropped ; row 1: A = -1, D = 0.1 -> kept ; row 2: A = +1, D = 0.5 -> kept
    #  row 3: A = -1, D = 0.5 but no valid token -> never dropped
    old = torch.zeros(4, 2, dtype=F64)
    new = torch.tensor([[-0.5, -0.5], [-0.1, -0.1], [-0.5, -0.5], [-0.5, -0.5]], dtype=F64)
    adv = torch.tensor([[-1.0, -1.0], [-1.0, -1.0], [1.0, 1.0], [-1.0, -1.0]], dtype=F64)
    mask = torch.tensor([[1, 1], [1, 1], [1, 1], [0, 0]], dtype=F64)
    assert sequence_mask_rows(old, new, adv, mask, SEQ_MASK_DELTA).tolist() == [True, False, False, False]
    for name in ("vanilla", "cispo", "sapo"):
        loss, grad, metrics = _grad(name, old, new, adv, mask, sequence_mask=True)
        kept = mask.clone()
        kept[0] = 0
        ref, ref_grad, _ = _grad(name, old, new, adv, kept)
        torch.testing.assert_close(loss, ref)  # dropped from the loss and from the denominator
        torch.testing.assert_close(grad, ref_grad)
        assert metrics["actor/seq_masked_rows"].item() == 1.0


@PROPS
@given(seed=st.integers(0, 10_000), name=st.sampled_from(["vanilla", "cispo", "sapo"]),
       mode=st.sampled_from(LOSS_AGG_MODES), delta=st.sampled_from([3e-3, SEQ_MASK_DELTA, 1.0]))
def test_sequence_mask_removes_exactly_the_spec_rows(seed: int, name: str, mode: str, delta: float) -> None:
    old, new, adv, mask = _batch(seed, 6, 4, scale=0.8)
    expected = []
    for i in range(6):  # the rule of docs/algorithms.md#policy-losses, row by row
        n = int(mask[i].sum())
        a_i = sum(adv[i, t].item() for t in range(4) if mask[i, t]) / n if n else 0.0
        d_i = sum(old[i, t].item() - new[i, t].item() for t in range(4) if mask[i, t]) / n if n else 0.0
        expected.append(a_i < 0 and d_i > delta)
    assert sequence_mask_rows(old, new, adv, mask, delta).tolist() == expected
    loss, grad, metrics = _grad(name, old, new, adv, mask, mode, sequence_mask=True, seq_mask_delta=delta)
    kept = mask * torch.tensor([0.0 if e else 1.0 for e in expected], dtype=F64).unsqueeze(-1)
    ref, ref_grad, _ = _grad(name, old, new, adv, kept, mode)
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(grad, ref_grad)
    assert metrics["actor/seq_masked_rows"].item() == sum(expected)


def test_sequence_mask_is_not_a_gspo_setting() -> None:
    old, new, adv, mask = _batch(0, 2, 2)
    with pytest.raises(ValueError, match="sequence_mask"):
        policy_loss("gspo", old, new, adv, mask, sequence_mask=True)


# --------------------------------------------------------------------------------------------------------------------
# Numerics


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_no_nan_for_empty_rows_all_masked_and_extreme_ratios(name: str, mode: str) -> None:
    old = torch.zeros(4, 3)
    new = torch.tensor([[50.0, -50.0, 0.0], [-50.0, -50.0, -50.0], [50.0, 50.0, 50.0], [0.0, 0.0, 0.0]])
    adv = torch.tensor([[1.0, -1.0, 2.0], [-3.0, -3.0, -3.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 0, 0]])  # last row empty
    for m in (mask, torch.zeros_like(mask)):
        for hp in ({}, {"sequence_mask": True}) if name != "gspo" else ({},):
            loss, grad, metrics = _grad(name, old, new - 1.0, adv, m, mode, **hp)
            assert torch.isfinite(loss), (name, mode, hp)
            assert torch.isfinite(grad).all(), (name, mode, hp)
            assert all(torch.isfinite(v) for v in metrics.values())
            if not m.any():
                assert loss.item() == 0.0


def test_shape_mismatch_is_reported() -> None:
    with pytest.raises(ValueError, match="advantages"):
        policy_loss("vanilla", torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 2), torch.ones(2, 3))


def test_invalid_hyperparameters_are_rejected_with_the_field_name() -> None:
    args = _batch(0, 2, 2)
    with pytest.raises(ValueError, match="clip_ratio_c"):
        policy_loss("vanilla", *args, clip_ratio_c=0.5)
    with pytest.raises(ValueError, match="valid keys"):
        policy_loss("vanilla", *args, clip_ratio=0.2)
    with pytest.raises(ValueError, match="cispo, gspo, sapo, vanilla"):
        policy_loss("ppo2", *args)


# --------------------------------------------------------------------------------------------------------------------
# Registering a new loss


@dataclass(frozen=True)
class _ScaledConfig:
    beta: float = 2.0
    """Scale of the plain surrogate."""


def test_user_registered_loss_runs_through_the_registry() -> None:
    @register_policy_loss("test_scaled_pg", _ScaledConfig)
    def _scaled(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config, *, aggregate):
        token = -config.beta * advantages * torch.exp(log_prob - old_log_prob)
        return PolicyLossOutput(aggregate(token, response_mask, loss_agg_mode), {})

    try:
        old, _, adv, mask = _batch(1, 2, 3)
        got = policy_loss("test_scaled_pg", old, old, adv, mask, beta="3").loss  # strings are coerced
        torch.testing.assert_close(got, 3 * agg_loss(-adv, mask, "token-mean"))
        with pytest.raises(ValueError, match="already registered"):
            register_policy_loss("test_scaled_pg", _ScaledConfig)(_scaled)
    finally:
        POLICY_LOSSES.unregister("test_scaled_pg")


# --------------------------------------------------------------------------------------------------------------------
# Critic loss


def test_value_loss_hand_computed_value_and_gradient() -> None:
    # c = 0.5.
    #  t1: V_old 0.5, V 1.2, R 1 : clip 1.0 -> (0)^2 ; unclipped (0.2)^2 = 0.04 -> 0.04 (grad (V - R) = 0.2)
    #  t2: V_old 0, V -1, R 1 : clip -0.5 -> 2.25 ; unclipped 4 -> 4 (grad -2)
    #  t3: V_old 0, V 0.6, R 2 : clip 0.5 -> 2.25 ; unclipped 1.96 -> 2.25 (clipped: grad 0)
    # loss 0.5 * (0.04 + 4 + 2.25) / 3 ; d/dV = 0.5 * 2 (V - R) / 3
    vpreds = torch.tensor([[1.2, -1.0, 0.6, 7.0]], dtype=F64, requires_grad=True)
    values = torch.tensor([[0.5, 0.0, 0.0, 0.0]], dtype=F64)
    returns = torch.tensor([[1.0, 1.0, 2.0, 0.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 1, 0]], dtype=F64)
    loss, metrics = compute_value_loss(vpreds, returns, values, mask, cliprange_value=0.5)
    loss.backward()
    assert loss.item() == pytest.approx(0.5 * 6.29 / 3, abs=1e-12)
    torch.testing.assert_close(vpreds.grad, torch.tensor([[0.2 / 3, -2.0 / 3, 0.0, 0.0]], dtype=F64))
    assert metrics["critic/vf_clipfrac"].item() == pytest.approx(1 / 3)
