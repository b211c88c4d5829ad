"""EMPG: entropy-modulated advantages for step rows (Wang et al. 2025; AA App. A.3.2; docs/algorithms.md#advantage-estimators).

On top of a GRPO base advantage ``A_i`` per step row i:

    H_i  = mean token entropy of step i's response under the rollout policy
    Hn_i = (H_i − min_batch H) / (max_batch H − min_batch H)        (0 when all H are equal)
    g_i  = exp(−k·Hn_i) / mean_batch exp(−k·Hn)                     (self-calibrating scale, mean 1)
    f_i  = exp(−k_f·Hn_i)                                           (future-clarity bonus)
    A_i ← g_i·A_i + ζ·f_{next(i)}        (next(i): step t+1 of the same trajectory, only if it is in the batch)
    A   ← A − mean_batch A

Batch statistics run over the rows that have at least one valid token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from arlkit.algos._groups import trajectory_grid
from arlkit.algos.advantages import (
    AdvantageInputs,
    AdvantageOutput,
    GRPOConfig,
    broadcast_rows,
    grpo_scalar_advantage,
    register_adv_estimator,
)
from arlkit.algos.aggregation import masked_mean, row_mean

__all__ = ["EMPGConfig"]


@dataclass(frozen=True)
class EMPGConfig:
    """EMPG's hyperparameters (AA App. A.3.2) and those of its GRPO base advantage."""

    k: float = 1.0
    """k in the gradient scale ``exp(−k·Hn)``."""
    k_f: float = 1.0
    """k_f in the future-clarity bonus ``exp(−k_f·Hn)``."""
    zeta: float = 0.05
    """ζ, the weight of the future-clarity bonus."""
    norm_adv_by_std_in_grpo: bool = True
    """Base advantage: divide by the group's std (GRPO) or not (Dr.GRPO)."""
    epsilon: float = 1e-6
    """Base advantage: ε added to σ."""
    step_stats: Literal["cross_step", "per_trajectory"] = "cross_step"
    """Base advantage: statistics over all step rows of a group, or one score per trajectory."""


@register_adv_estimator("empg", EMPGConfig, needs_step_rows=True, needs_entropy=True)
def _empg(inputs: AdvantageInputs, config: EMPGConfig) -> AdvantageOutput:
    """EMPG (module docstring). Reads what GRPO reads plus ``old_entropy``, ``traj_index``, ``step_index``."""
    inputs.require("empg", "old_entropy", "traj_index", "step_index")
    assert inputs.old_entropy is not None and inputs.step_index is not None
    mask = inputs.response_mask
    if inputs.old_entropy.shape != mask.shape:
        raise ValueError(f"old_entropy must have shape {tuple(mask.shape)}, got {tuple(inputs.old_entropy.shape)}")
    base_cfg = GRPOConfig(
        norm_adv_by_std_in_grpo=config.norm_adv_by_std_in_grpo, epsilon=config.epsilon, step_stats=config.step_stats
    )
    base, metrics = grpo_scalar_advantage(inputs, base_cfg, estimator="empg")

    valid = mask.bool().any(dim=-1)
    entropy = row_mean(inputs.old_entropy.to(base.dtype), mask)
    big = torch.finfo(base.dtype).max
    h_min = torch.where(valid, entropy, torch.full_like(entropy, big)).min() if valid.any() else entropy.new_zeros(())
    h_max = torch.where(valid, entropy, torch.full_like(entropy, -big)).max() if valid.any() else entropy.new_zeros(())
    span = h_max - h_min
    h_norm = torch.where(valid & (span > 0), (entropy - h_min) / span.clamp(min=torch.finfo(base.dtype).tiny), 0.0)
    scale = torch.exp(-config.k * h_norm)
    scale = scale / masked_mean(scale, valid).clamp(min=torch.finfo(base.dtype).tiny)
    clarity = torch.exp(-config.k_f * h_norm)

    group, _ = inputs.group_codes("empg")
    traj, num_traj = inputs.trajectory_codes(group)
    pos, horizon = trajectory_grid(traj.to(base.device), inputs.step_index.to(base.device), num_traj)
    clarity_grid = torch.zeros(num_traj * horizon, dtype=base.dtype, device=base.device)
    present = torch.zeros(num_traj * horizon, dtype=torch.bool, device=base.device)
    clarity_grid[pos] = clarity
    present[pos] = valid
    step = inputs.step_index.to(device=base.device, dtype=torch.long)
    has_next = step + 1 < horizon
    next_pos = torch.where(has_next, pos + 1, pos)
    has_next = has_next & present[next_pos]
    bonus = torch.where(has_next, clarity_grid[next_pos], torch.zeros_like(clarity))

    modulated = scale * base + config.zeta * bonus
    modulated = torch.where(valid, modulated - masked_mean(modulated, valid), torch.zeros_like(modulated))
    metrics["adv/step_entropy_mean"] = masked_mean(entropy, valid)
    out = broadcast_rows(modulated, mask)
    return AdvantageOutput(out, out, metrics)
