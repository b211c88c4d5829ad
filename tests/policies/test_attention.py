"""arlkit's attention kernel against the textbook formula, and the KV store's view-based entries."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from arlkit.policies.attention import arlkit_attention, register_attention
from arlkit.policies.kv_cache import CacheEntry, CacheStore


class _Module(torch.nn.Module):
    is_causal = True


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) over allowed columns) v, each query head reading key head h // group,
    written with explicit loops; returns (B, Lq, H, D)."""
    b, heads, q_len, d = q.shape
    group = heads // k.shape[1]
    out = torch.zeros(b, q_len, heads, d, dtype=torch.float64)
    for i in range(b):
        for h in range(heads):
            for t in range(q_len):
                cols = [j for j in range(k.shape[2]) if allowed[i, 0, t, j]]
                scores = torch.tensor([float(q[i, h, t] @ k[i, h // group, j]) / math.sqrt(d) for j in cols], dtype=torch.float64)
                weights = torch.softmax(scores, dim=0)
                out[i, t, h] = sum(w * v[i, h // group, j].double() for w, j in zip(weights, cols, strict=True))
    return out


def _inputs(b: int, q_len: int, k_len: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, 4, q_len, 8, generator=g)
    k = torch.randn(b, 2, k_len, 8, generator=g)
    v = torch.randn(b, 2, k_len, 8, generator=g)
    allowed = torch.rand(b, 1, q_len, k_len, generator=g) > 0.3
    allowed[..., -1] = True  # every query sees at least one column
    return q, k, v, allowed


@pytest.mark.parametrize("q_len", [1, 5])
def test_kernel_matches_the_formula_with_grouped_heads_and_a_mask(q_len: int) -> None:
    q, k, v, allowed = _inputs(3, q_len, 7)
    with torch.no_grad():
        out, weights = arlkit_attention(_Module(), q, k, v, allowed)
    assert weights is None and out.shape == (3, q_len, 4, 8)
    assert torch.allclose(out.double(), _reference(q, k, v, allowed), atol=1e-5)


def test_decode_step_reads_a_strided_cache_view_and_an_additive_mask() -> None:
    q, k, v, allowed = _inputs(2, 1, 9, seed=1)
    buffer_k = torch.zeros(2, 2, 16, 8)
    buffer_v = torch.zeros(2, 2, 16, 8)
    buffer_k[:, :, :9], buffer_v[:, :, :9] = k, v
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
    with torch.no_grad():
        out, _ = arlkit_attention(_Module(), q, buffer_k[:, :, :9], buffer_v[:, :, :9], additive)
    assert torch.allclose(out.double(), _reference(q, k, v, allowed), atol=1e-5)


def test_no_mask_means_causal_for_several_queries_and_everything_for_one() -> None:
    q, k, v, _ = _inputs(2, 4, 4, seed=2)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()[None, None].expand(2, 1, 4, 4)
    with torch.no_grad():
        out, _ = arlkit_attention(_Module(), q, k, v, None)
        last, _ = arlkit_attention(_Module(), q[:, :, -1:], k, v, None)
    assert torch.allclose(out.double(), _reference(q, k, v, causal), atol=1e-5)
    assert torch.allclose(last[:, 0], out[:, -1], atol=1e-6)


def test_gradients_equal_the_plain_formula() -> None:
    q, k, v, allowed = _inputs(2, 3, 6, seed=3)
    q1, k1, v1 = (t.clone().requires_grad_() for t in (q, k, v))
    out, _ = arlkit_attention(_Module(), q1, k1, v1, allowed)
    out.square().sum().backward()
    q2, k2, v2 = (t.clone().requires_grad_() for t in (q, k, v))
    scores = (q2 @ k2.repeat_interleave(2, dim=1).transpose(-1, -2)) / math.sqrt(8)
    ref = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1) @ v2.repeat_interleave(2, dim=1)
    ref.transpose(1, 2).square().sum().backward()
    for a, b in ((q1, q2), (k1, k2), (v1, v2)):
        assert a.grad is not None and b.grad is not None and torch.allclose(a.grad, b.grad, atol=1e-5)


def test_registered_under_its_name() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    name = register_attention()
    assert AttentionInterface._global_mapping[name] is arlkit_attention
    assert AttentionMaskInterface._global_mapping[name] is sdpa_mask


def _entry(buffer: torch.Tensor, row: int, n: int) -> CacheEntry:
    return CacheEntry(np.arange(n), [(buffer[row, :, :n], buffer[row, :, :n])])


def test_store_counts_a_shared_buffer_once_and_evicts_least_recent_first() -> None:
    first = torch.zeros(4, 2, 10, 8)  # one batch buffer, four rows: 2560 bytes
    second = torch.zeros(4, 2, 10, 8)
    store = CacheStore(max_bytes=10_000)
    for row in range(4):
        store.put(row, _entry(first, row, 6))
    assert store.held_bytes() == first.numel() * 4
    for row in range(4):
        store.put(10 + row, _entry(second, row, 6))
    assert store.held_bytes() == 2 * first.numel() * 4
    store.max_bytes = first.numel() * 4
    store.evict()  # the four rows of `first` go (least recent); `second` fits
    assert sorted(store.rows) == [10, 11, 12, 13] and store.held_bytes() == second.numel() * 4
