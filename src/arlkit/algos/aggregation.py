"""Loss aggregation and masked reductions over ``(B, L)`` token tensors (docs/algorithms.md#loss-aggregation; AA App. A.1).

Aggregation is kept apart from every loss formula: a policy loss builds a ``(B, L)`` matrix of token
losses and hands it to :func:`agg_loss` with the mask and the chosen mode. Masked positions are
selected out with ``torch.where`` (never multiplied), so an ``inf`` or ``NaN`` sitting under the mask
cannot leak into the result, and an all-masked batch aggregates to exactly 0.
"""

from __future__ import annotations

from typing import Final

import torch
from torch import Tensor

from arlkit.config import ConfigError

__all__ = [
    "LOSS_AGG_MODES",
    "agg_loss",
    "masked_mean",
    "masked_sum",
    "masked_whiten",
    "row_mean",
]

LOSS_AGG_MODES: Final[tuple[str, ...]] = (
    "token-mean",
    "token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
)
"""The aggregation modes :func:`agg_loss` accepts (verl's names)."""


def _zeroed(values: Tensor, mask: Tensor) -> Tensor:
    """``values`` where ``mask`` is set, 0 elsewhere (safe for inf/NaN under the mask)."""
    return torch.where(mask.bool(), values, torch.zeros((), dtype=values.dtype, device=values.device))


def masked_sum(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Σ values·mask over ``dim`` (all dims when None). ``values``, ``mask``: same shape."""
    zeroed = _zeroed(values, mask)
    return zeroed.sum() if dim is None else zeroed.sum(dim=dim)


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Σ values·mask / Σ mask over ``dim`` (all dims when None); 0 where the mask is empty."""
    count = mask.to(values.dtype).sum() if dim is None else mask.to(values.dtype).sum(dim=dim)
    return masked_sum(values, mask, dim) / count.clamp(min=1.0)


def row_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Per-row masked mean: ``(B, L), (B, L) -> (B,)``; 0 for rows without valid tokens."""
    return masked_mean(values, mask, dim=-1)


def masked_whiten(values: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """``(x − μ) / sqrt(σ² + eps)`` with μ, σ² (unbiased) over the valid entries; 0 at masked ones.

    Shapes: ``values``, ``mask`` the same (typically ``(B, L)``). With fewer than two valid entries
    the variance is taken as 0 (no division by zero).
    """
    count = mask.to(values.dtype).sum()
    mean = masked_sum(values, mask) / count.clamp(min=1.0)
    centred = _zeroed(values - mean, mask)
    var = centred.pow(2).sum() / (count - 1.0).clamp(min=1.0)
    return centred * torch.rsqrt(var + eps)


def agg_loss(
    loss_mat: Tensor,
    loss_mask: Tensor,
    loss_agg_mode: str,
    *,
    loss_scale_factor: float | None = None,
) -> Tensor:
    """Aggregate a ``(B, L)`` matrix of token losses into a scalar (docs/algorithms.md#loss-aggregation).

    With ``M = loss_mask`` (0/1 or bool, ``(B, L)``) and ``n_i = Σ_t M_it``:

    - ``token-mean``: ``Σ_it L·M / Σ_it M``
    - ``token-sum``: ``Σ_it L·M``
    - ``seq-mean-token-mean``: mean over rows with ``n_i > 0`` of ``Σ_t L·M / n_i``
    - ``seq-mean-token-sum``: mean over rows with ``n_i > 0`` of ``Σ_t L·M``
    - ``seq-mean-token-sum-norm``: ``seq-mean-token-sum / L_max`` with ``L_max = loss_scale_factor``
      when given, else the padded length ``L`` (Dr.GRPO's constant normaliser)

    As verl 0.9.1's ``agg_loss`` on one data-parallel rank: the ``seq-mean`` modes average over the
    rows holding at least one valid token (a row emptied by sequence masking is not a sequence).

    Every mode returns 0 (not NaN) for an all-masked batch.
    """
    if loss_mat.shape != loss_mask.shape or loss_mat.dim() != 2:
        raise ValueError(
            f"agg_loss: loss_mat and loss_mask must both be (B, L), got {tuple(loss_mat.shape)} "
            f"and {tuple(loss_mask.shape)}"
        )
    if loss_agg_mode == "token-mean":
        return masked_mean(loss_mat, loss_mask)
    if loss_agg_mode == "token-sum":
        return masked_sum(loss_mat, loss_mask)
    if loss_agg_mode not in LOSS_AGG_MODES:
        raise ConfigError(f"loss_agg_mode: {loss_agg_mode!r} is not one of {', '.join(LOSS_AGG_MODES)}")
    row_sums = masked_sum(loss_mat, loss_mask, dim=-1)
    counts = loss_mask.to(loss_mat.dtype).sum(dim=-1)
    nonempty = counts > 0
    sequences = nonempty.to(loss_mat.dtype).sum().clamp(min=1.0)
    if loss_agg_mode == "seq-mean-token-mean":
        return masked_sum(row_sums / counts.clamp(min=1.0), nonempty) / sequences
    seq_mean = masked_sum(row_sums, nonempty) / sequences
    if loss_agg_mode == "seq-mean-token-sum":
        return seq_mean
    norm = float(loss_scale_factor) if loss_scale_factor is not None else float(max(loss_mat.shape[-1], 1))
    if norm <= 0:
        raise ValueError(f"agg_loss: loss_scale_factor must be > 0, got {norm}")
    return seq_mean / norm
    raise ConfigError(f"loss_agg_mode: {loss_agg_mode!r} is not one of {', '.join(LOSS_AGG_MODES)}")
