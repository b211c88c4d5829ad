"""Vectorised group bookkeeping shared by the advantage estimators (internal).

Group ids, trajectory ids and anchor keys arrive as any hashables (strings, ints, tuples) or as an
integer tensor; they are turned into dense integer codes once, after which every statistic is a
scatter/index_add over the batch — no Python loop over groups.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "GroupStats",
    "codes_of",
    "discounted_reverse_cumsum",
    "first_row",
    "group_stats",
    "pair_codes",
    "trajectory_grid",
]


def codes_of(keys: Sequence[Hashable] | Tensor | np.ndarray, n: int, *, what: str) -> tuple[Tensor, int]:
    """Dense codes ``0..K−1`` for ``n`` hashable keys (equal keys share a code), and ``K``."""
    if isinstance(keys, Tensor):
        if keys.shape != (n,):
            raise ValueError(f"{what} must have shape ({n},), got {tuple(keys.shape)}")
        uniq, inverse = torch.unique(keys.cpu(), return_inverse=True)
        return inverse.long(), int(uniq.numel())
    items: list[Any] = keys.tolist() if isinstance(keys, np.ndarray) else list(keys)
    if len(items) != n:
        raise ValueError(f"{what} must have {n} entries, got {len(items)}")
    table: dict[Hashable, int] = {}
    try:
        codes = [table.setdefault(k, len(table)) for k in items]
    except TypeError as exc:
        raise TypeError(f"{what}: every key must be hashable ({exc})") from None
    return torch.tensor(codes, dtype=torch.long), len(table)


def pair_codes(a: Tensor, b: Tensor) -> tuple[Tensor, int]:
    """Dense codes of the pairs ``(a_i, b_i)`` of two code vectors."""
    combined = a * (int(b.max().item()) + 1 if b.numel() else 1) + b
    uniq, inverse = torch.unique(combined, return_inverse=True)
    return inverse.long(), int(uniq.numel())


class GroupStats(NamedTuple):
    """Per-group statistics, each of shape ``(K,)``."""

    size: Tensor
    """Number of members."""
    mean: Tensor
    """Mean of the members (0 for empty groups)."""
    std: Tensor
    """Unbiased standard deviation (0 for groups of one)."""
    uniform: Tensor
    """True where all members are exactly equal (max == min)."""


def group_stats(values: Tensor, codes: Tensor, num_groups: int) -> GroupStats:
    """Statistics of ``values`` ``(N,)`` within the groups given by ``codes`` ``(N,)``."""
    codes = codes.to(values.device)
    count = torch.zeros(num_groups, dtype=values.dtype, device=values.device).index_add_(
        0, codes, torch.ones_like(values)
    )
    total = torch.zeros_like(count).index_add_(0, codes, values)
    mean = total / count.clamp(min=1.0)
    sq = torch.zeros_like(count).index_add_(0, codes, (values - mean[codes]).square())
    std = torch.sqrt(sq / (count - 1.0).clamp(min=1.0))
    hi = torch.zeros_like(count).scatter_reduce_(0, codes, values, "amax", include_self=False)
    lo = torch.zeros_like(count).scatter_reduce_(0, codes, values, "amin", include_self=False)
    return GroupStats(size=count, mean=mean, std=std, uniform=hi == lo)


def first_row(codes: Tensor, num_groups: int) -> Tensor:
    """Index of the first row of each group: ``(N,) -> (K,)``."""
    rows = torch.arange(codes.numel(), device=codes.device)
    out = torch.full((num_groups,), codes.numel(), dtype=torch.long, device=codes.device)
    return out.scatter_reduce_(0, codes, rows, "amin", include_self=True)


def trajectory_grid(traj_codes: Tensor, step_index: Tensor, num_traj: int) -> tuple[Tensor, int]:
    """Flat positions ``traj·T + step`` of each step row in a ``(num_traj, T)`` grid, and ``T``.

    Raises ``ValueError`` on a negative step index or two rows with the same trajectory and step.
    """
    steps = step_index.to(device=traj_codes.device, dtype=torch.long)
    if steps.shape != traj_codes.shape:
        raise ValueError(f"step_index must have shape {tuple(traj_codes.shape)}, got {tuple(steps.shape)}")
    if steps.numel() and int(steps.min()) < 0:
        raise ValueError("step_index must be >= 0")
    horizon = int(steps.max()) + 1 if steps.numel() else 1
    pos = traj_codes * horizon + steps
    if steps.numel() and int(torch.bincount(pos, minlength=num_traj * horizon).max()) > 1:
        raise ValueError("two rows share the same (trajectory id, step_index)")
    return pos, horizon


def discounted_reverse_cumsum(x: Tensor, discount: float) -> Tensor:
    """``y_t = Σ_{j≥t} discount^{j−t} x_j`` along the last dim of ``x`` ``(N, T)``.

    A log-depth (Hillis–Steele) scan: ⌈log2 T⌉ vectorised passes; the factors ``discount^(2^k)`` only
    shrink, so nothing overflows for ``discount ≤ 1``.
    """
    out = x.clone()
    length = x.shape[-1]
    shift, factor = 1, float(discount)
    while shift < length:
        out[..., :-shift] += factor * out[..., shift:]
        shift *= 2
        factor *= factor
    return out
