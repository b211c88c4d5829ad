"""PPO's token-level GAE and the value-clipped critic loss (Schulman et al. 2016/2017; RT App. A.2;
docs/algorithms.md#advantage-estimators).

GAE over the valid tokens of each row, in order, skipping masked positions (environment-observation
and padding tokens), exactly as verl does: with ``t'`` the next valid token after ``t``,

    δ_t = r_t + γ·V_{t'} − V_t            (V after the last valid token = 0: termination and budget
    A_t = δ_t + γλ·A_{t'}                  exhaustion both bootstrap with zero)
    returns_t = A_t + V_t

and the advantages are then whitened over the batch's valid tokens. Rewards placed on masked tokens
are ignored. The recursion runs as a log-depth scan over the packed valid tokens, not a Python loop
over ``L``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from arlkit.algos._groups import discounted_reverse_cumsum
from arlkit.algos.advantages import AdvantageInputs, AdvantageOutput, register_adv_estimator
from arlkit.algos.aggregation import agg_loss, masked_mean, masked_whiten

__all__ = ["GAEConfig", "ValueLossOutput", "compute_gae_advantage_return", "compute_value_loss"]


@dataclass(frozen=True)
class GAEConfig:
    """GAE's hyperparameters (verl's defaults γ = λ = 1)."""

    gamma: float = 1.0
    """γ, the discount per token."""
    lam: float = 1.0
    """λ, the GAE trace decay."""
    whiten_advantages: bool = True
    """Whiten the advantages over the batch's valid tokens (verl does)."""

    def __post_init__(self) -> None:
        if not (0.0 <= self.gamma <= 1.0 and 0.0 <= self.lam <= 1.0):
            raise ValueError(f"gamma, lam: must be in [0, 1], got {self.gamma}, {self.lam}")


def compute_gae_advantage_return(
    token_level_rewards: Tensor, values: Tensor, response_mask: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """Raw (un-whitened) GAE advantages and returns, both ``(B, L)`` and 0 outside the mask.

    Args:
        token_level_rewards: ``(B, L)`` reward per token.
        values: ``(B, L)`` critic values per token.
        response_mask: ``(B, L)`` 0/1 mask of the tokens the policy produced.
        gamma: discount γ.
        lam: GAE λ.
    """
    mask = response_mask.bool()
    length = mask.shape[-1]
    positions = torch.arange(length, device=mask.device)
    # Valid tokens first (in order), masked ones after: a per-row permutation.
    perm = torch.argsort((~mask).long() * length + positions, dim=-1)
    packed_valid = positions < mask.sum(dim=-1, keepdim=True)
    zero = torch.zeros((), dtype=values.dtype, device=values.device)
    v = torch.where(packed_valid, values.gather(-1, perm), zero)
    r = torch.where(packed_valid, token_level_rewards.to(values.dtype).gather(-1, perm), zero)
    next_v = torch.cat([v[..., 1:], torch.zeros_like(v[..., :1])], dim=-1)
    delta = torch.where(packed_valid, r + gamma * next_v - v, zero)
    packed_adv = discounted_reverse_cumsum(delta, gamma * lam)
    advantages = torch.zeros_like(packed_adv).scatter_(-1, perm, packed_adv)
    returns = torch.where(mask, advantages + values, zero)
    return advantages, returns


@register_adv_estimator("gae", GAEConfig, needs_critic=True)
def _gae(inputs: AdvantageInputs, config: GAEConfig) -> AdvantageOutput:
    """Token-level GAE (module docstring). Reads ``token_level_rewards``, ``values``."""
    inputs.require("gae", "token_level_rewards", "values")
    assert inputs.token_level_rewards is not None and inputs.values is not None
    shape = tuple(inputs.response_mask.shape)
    for name, tensor in (("token_level_rewards", inputs.token_level_rewards), ("values", inputs.values)):
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name} must have shape {shape}, got {tuple(tensor.shape)}")
    advantages, returns = compute_gae_advantage_return(
        inputs.token_level_rewards, inputs.values, inputs.response_mask, config.gamma, config.lam
    )
    metrics = {"adv/raw_mean": masked_mean(advantages, inputs.response_mask)}
    if config.whiten_advantages:
        advantages = masked_whiten(advantages, inputs.response_mask)
    return AdvantageOutput(advantages, returns, metrics)


class ValueLossOutput(NamedTuple):
    """The critic loss and its diagnostics."""

    loss: Tensor
    """Scalar ``½·agg(max((V − R)², (V_clip − R)²))``."""
    metrics: dict[str, Tensor]
    """Detached scalars: ``critic/vf_clipfrac`` (share of tokens where the clipped term is larger),
    ``critic/vpred_mean``."""


def compute_value_loss(
    vpreds: Tensor,
    returns: Tensor,
    values: Tensor,
    response_mask: Tensor,
    cliprange_value: float = 0.5,
    loss_agg_mode: str = "token-mean",
    *,
    loss_scale_factor: float | None = None,
) -> ValueLossOutput:
    """Value-clipped critic loss (PPO2): ``V_clip = V_old + clip(V − V_old, −c, c)``,
    loss ``½·agg(max((V − R)², (V_clip − R)²))``.

    Args:
        vpreds: ``(B, L)`` current critic predictions (carry the gradient).
        returns: ``(B, L)`` value targets (GAE returns).
        values: ``(B, L)`` critic predictions at rollout time, V_old.
        response_mask: ``(B, L)`` 0/1 mask.
        cliprange_value: c (verl's default 0.5).
        loss_agg_mode: aggregation mode, see :func:`~arlkit.algos.agg_loss`.
        loss_scale_factor: ``L_max`` for ``seq-mean-token-sum-norm``.
    """
    clipped = values + (vpreds - values).clamp(-cliprange_value, cliprange_value)
    unclipped_loss = (vpreds - returns).square()
    clipped_loss = (clipped - returns).square()
    loss = 0.5 * agg_loss(
        torch.maximum(unclipped_loss, clipped_loss), response_mask, loss_agg_mode, loss_scale_factor=loss_scale_factor
    )
    metrics = {
        "critic/vf_clipfrac": masked_mean((clipped_loss > unclipped_loss).to(vpreds.dtype), response_mask).detach(),
        "critic/vpred_mean": masked_mean(vpreds.detach(), response_mask),
    }
    return ValueLossOutput(loss, metrics)
