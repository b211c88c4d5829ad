"""agg_loss, masked reductions and KL estimators: hand-derived numbers, a slow reference, invariants."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arlkit.algos import KL_KINDS, LOSS_AGG_MODES, agg_loss, entropy_from_logits, kl_penalty, masked_whiten
from arlkit.algos.kl import combine_actor_loss

F64 = torch.float64
PROPS = settings(max_examples=50, deadline=None)


def test_agg_modes_hand_computed() -> None:
    L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], dtype=F64)
    M = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=F64)  # row 2 is empty
    # valid entries: 1, 2 (row 0) and 4 (row 1); total 7 over 3 tokens
    assert agg_loss(L, M, "token-mean").item() == pytest.approx(7 / 3, abs=1e-12)
    assert agg_loss(L, M, "token-sum").item() == pytest.approx(7.0, abs=1e-12)
    # row means 1.5 and 4; the empty row is not a sequence: (1.5 + 4) / 2
    assert agg_loss(L, M, "seq-mean-token-mean").item() == pytest.approx(2.75, abs=1e-12)
    # row sums 3 and 4 averaged over the 2 non-empty rows, as verl 0.9.1 (docs/algorithms.md#loss-aggregation)
    assert agg_loss(L, M, "seq-mean-token-sum").item() == pytest.approx(3.5, abs=1e-12)
    # that mean / L_max: padded length 3, or the configured constant 10
    assert agg_loss(L, M, "seq-mean-token-sum-norm").item() == pytest.approx(3.5 / 3, abs=1e-12)
    assert agg_loss(L, M, "seq-mean-token-sum-norm", loss_scale_factor=10).item() == pytest.approx(0.35, abs=1e-12)


def test_agg_ignores_inf_and_nan_under_the_mask() -> None:
    L = torch.tensor([[1.0, float("inf")], [float("nan"), 2.0]])
    M = torch.tensor([[1, 0], [0, 1]])
    for mode in LOSS_AGG_MODES:
        assert torch.isfinite(agg_loss(L, M, mode))
    assert agg_loss(L, M, "token-mean").item() == pytest.approx(1.5)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_agg_all_masked_is_zero_with_finite_gradient(mode: str) -> None:
    L = torch.randn(3, 4, requires_grad=True)
    out = agg_loss(L, torch.zeros(3, 4), mode)
    out.backward()
    assert out.item() == 0.0
    assert torch.equal(L.grad, torch.zeros(3, 4))


def test_agg_rejects_unknown_mode_listing_choices() -> None:
    with pytest.raises(ValueError, match="token-mean"):
        agg_loss(torch.zeros(1, 1), torch.ones(1, 1), "seq-mean")


def _agg_reference(L: list[list[float]], M: list[list[int]], mode: str, scale: float | None) -> float:
    """Slow, loop-by-loop form of docs/algorithms.md#loss-aggregation."""
    rows = [[l for l, m in zip(lr, mr) if m] for lr, mr in zip(L, M)]
    flat = [x for r in rows for x in r]
    if mode == "token-mean":
        return sum(flat) / len(flat) if flat else 0.0
    if mode == "token-sum":
        return sum(flat)
    if mode == "seq-mean-token-mean":
        means = [sum(r) / len(r) for r in rows if r]
        return sum(means) / len(means) if means else 0.0
    sums = [sum(r) for r in rows if r]
    seq_mean = sum(sums) / len(sums) if sums else 0.0
    if mode == "seq-mean-token-sum":
        return seq_mean
    return seq_mean / (scale if scale is not None else len(L[0]))


@PROPS
@given(
    b=st.integers(1, 5), l=st.integers(1, 6), seed=st.integers(0, 10_000),
    mode=st.sampled_from(LOSS_AGG_MODES), scale=st.sampled_from([None, 7.0]),
)
def test_agg_matches_slow_reference(b: int, l: int, seed: int, mode: str, scale: float | None) -> None:
    g = torch.Generator().manual_seed(seed)
    L = torch.randn(b, l, generator=g, dtype=F64)
    M = (torch.rand(b, l, generator=g) < 0.6).long()
    got = agg_loss(L, M, mode, loss_scale_factor=scale).item()
    assert got == pytest.approx(_agg_reference(L.tolist(), M.tolist(), mode, scale), abs=1e-10)


@PROPS
@given(b=st.integers(1, 5), l=st.integers(1, 6), n=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_agg_modes_agree_on_uniform_length_rows(b: int, l: int, n: int, seed: int) -> None:
    n = min(n, l)
    g = torch.Generator().manual_seed(seed)
    L = torch.randn(b, l, generator=g, dtype=F64)
    M = torch.zeros(b, l, dtype=F64)
    for i in range(b):  # every row has exactly n valid tokens, at random places
        M[i, torch.randperm(l, generator=g)[:n]] = 1
    token_mean = agg_loss(L, M, "token-mean")
    torch.testing.assert_close(agg_loss(L, M, "seq-mean-token-mean"), token_mean)
    torch.testing.assert_close(agg_loss(L, M, "seq-mean-token-sum"), n * token_mean)
    torch.testing.assert_close(agg_loss(L, M, "token-sum"), b * n * token_mean)
    torch.testing.assert_close(agg_loss(L, M, "seq-mean-token-sum-norm"), n / l * token_mean)


def test_masked_whiten_hand_computed() -> None:
    x = torch.tensor([[1.0, 3.0, 100.0]], dtype=F64)
    m = torch.tensor([[1, 1, 0]])
    # valid 1, 3: mean 2, unbiased var ((1)^2 + (1)^2) / 1 = 2 -> (x - 2) / sqrt(2 + 1e-8)
    expected = torch.tensor([[-1 / math.sqrt(2 + 1e-8), 1 / math.sqrt(2 + 1e-8), 0.0]], dtype=F64)
    torch.testing.assert_close(masked_whiten(x, m), expected)
    assert torch.equal(masked_whiten(x, torch.zeros_like(m)), torch.zeros_like(x))


def test_kl_estimators_hand_computed() -> None:
    logp = torch.tensor([-1.0, -2.0], dtype=F64)
    ref = torch.tensor([-2.0, -1.0], dtype=F64)
    # x = ref - logp = [-1, +1]
    torch.testing.assert_close(kl_penalty(logp, ref, "k1"), torch.tensor([1.0, -1.0], dtype=F64))
    torch.testing.assert_close(kl_penalty(logp, ref, "kl"), torch.tensor([1.0, -1.0], dtype=F64))
    torch.testing.assert_close(kl_penalty(logp, ref, "abs"), torch.tensor([1.0, 1.0], dtype=F64))
    torch.testing.assert_close(kl_penalty(logp, ref, "k2"), torch.tensor([0.5, 0.5], dtype=F64))
    torch.testing.assert_close(kl_penalty(logp, ref, "mse"), torch.tensor([0.5, 0.5], dtype=F64))
    # k3 = e^x - x - 1: e^-1 + 1 - 1 = e^-1 ; e - 1 - 1 = e - 2
    k3 = torch.tensor([math.exp(-1), math.e - 2], dtype=F64)
    torch.testing.assert_close(kl_penalty(logp, ref, "k3"), k3)
    torch.testing.assert_close(kl_penalty(logp, ref, "low_var_kl"), k3)


def test_low_var_kl_clamps_extreme_log_ratios() -> None:
    logp = torch.tensor([0.0, 0.0])
    ref = torch.tensor([50.0, -50.0])
    # x = 50 -> clamp to 20: e^20 - 21 >> 10 -> 10 ; x = -50 -> -20: e^-20 + 19 > 10 -> 10
    assert kl_penalty(logp, ref, "low_var_kl").tolist() == [10.0, 10.0]


@pytest.mark.parametrize("kind", ["k1+", "kl+", "k3+", "low_var_kl+", "abs+"])
def test_straight_through_variants_forward_value_and_k2_gradient(kind: str) -> None:
    logp = torch.tensor([-1.0, -2.0, -0.5], dtype=F64, requires_grad=True)
    ref = torch.tensor([-2.0, -1.0, -0.5], dtype=F64)
    out = kl_penalty(logp, ref, kind)
    torch.testing.assert_close(out.detach(), kl_penalty(logp.detach(), ref, kind[:-1]))
    out.sum().backward()
    # d/dlogp of 1/2 (ref - logp)^2 = logp - ref
    torch.testing.assert_close(logp.grad, (logp - ref).detach())


def test_kl_unknown_kind_lists_choices() -> None:
    with pytest.raises(ValueError, match="low_var_kl"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "k4")
    assert "k3+" in KL_KINDS


def test_entropy_from_logits_hand_computed() -> None:
    # uniform over 4 -> ln 4 ; one-hot-ish (large logit gap) -> ~0
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]]], dtype=F64)
    h = entropy_from_logits(logits)
    assert h[0, 0].item() == pytest.approx(math.log(4), abs=1e-12)
    assert h[0, 1].item() == pytest.approx(0.0, abs=1e-12)


def test_combine_actor_loss_hand_computed() -> None:
    mask = torch.tensor([[1, 1, 0]])
    entropy = torch.tensor([[1.0, 3.0, 50.0]])  # token-mean over valid: 2
    kl = torch.tensor([[0.5, 1.5, 50.0]])  # token-mean: 1
    out = combine_actor_loss(
        torch.tensor(0.3), mask, "token-mean", entropy=entropy, entropy_coeff=0.1, kl=kl, kl_coef=0.01
    )
    # 0.3 - 0.1 * 2 + 0.01 * 1 = 0.11
    assert out.loss.item() == pytest.approx(0.11, abs=1e-7)
    assert out.metrics["actor/entropy"].item() == pytest.approx(2.0)
    assert out.metrics["actor/kl_loss"].item() == pytest.approx(1.0)
