"""GiGPO: episode-level plus anchor-state step-level group advantages (Feng et al. 2025; AA App. A.3.1;
RT App. A.4; docs/algorithms.md#advantage-estimators).
AA: "ARLArena: A Unified Framework for Stable Agentic Reinforcement Learning"
RT: "What Does Multi-Turn Reinforcement Learning Really Improve in LLM Agents?"

``A = A^E + ω·A^S`` per step row:

- ``A^E``: the GRPO-style episode advantage of the row's trajectory within its group
  (``mean_std_norm``: ``(s − μ)/(σ + ε)``; ``mean_norm``: ``s − μ``; a group of one trajectory uses μ = 0, σ = 1).
- ``A^S``: within a group, step rows are grouped by their **anchor state** key; each step's discounted
  return ``R_t = Σ_{k≥t} γ^{k−t} r_k`` (over its own trajectory) is normalised within its anchor group
  (``mean_norm``: ``R − μ``; ``mean_std_norm``: ``(R − μ)/(σ + ε)``, σ unbiased). Anchor groups of size
  one, or whose returns are all equal, get ``A^S = 0``; ``A^E`` is kept.

Under BudgetMix the anchor is ``(state, remaining budget)`` (:func:`budget_anchor`): two visits to the same
state with different remaining budgets are different anchors.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from arlkit.algos._groups import codes_of, discounted_reverse_cumsum, group_stats, pair_codes, trajectory_grid
from arlkit.algos.advantages import (
    AdvantageInputs,
    AdvantageOutput,
    GRPOConfig,
    broadcast_rows,
    grpo_scalar_advantage,
    register_adv_estimator,
)

__all__ = ["GiGPOConfig", "budget_anchor", "discounted_step_returns", "gigpo_step_advantage"]


@dataclass(frozen=True)
class GiGPOConfig:
    """GiGPO's hyperparameters (defaults from AA App. A.3.1 and RT App. A.4)."""

    gamma: float = 0.95
    """γ of the discounted step return ``R_t``."""
    step_advantage_w: float = 1.0
    """ω, the weight of the step advantage in ``A^E + ω·A^S``."""
    mode: Literal["mean_norm", "mean_std_norm"] = "mean_std_norm"
    """Normalisation of both the episode and the step advantage: subtract the mean, or also divide by σ + ε."""
    epsilon: float = 1e-6
    """ε added to σ."""
    episode_stats: Literal["per_trajectory", "cross_step"] = "per_trajectory"
    """Statistics of ``A^E``: one score per trajectory (GiGPO's definition) or over all step rows."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma: must be in [0, 1], got {self.gamma}")


def budget_anchor(state: Hashable, total_budget: int, completed_turns: int) -> tuple[Hashable, int]:
    """BudgetMix's GiGPO anchor ``(s_t, T − t)`` (RT App. A.4); ``t`` counts completed interactions."""
    if not 0 <= completed_turns <= total_budget:
        raise ValueError(f"completed_turns must be in [0, {total_budget}], got {completed_turns}")
    return (state, total_budget - completed_turns)


def discounted_step_returns(inputs: AdvantageInputs, traj: Tensor, num_traj: int, gamma: float) -> Tensor:
    """``R_t = Σ_{k≥t} γ^{k−t} r_k`` per step row ``(B,)`` from ``step_rewards`` and ``step_index``.

    ``traj`` ``(B,)`` are dense trajectory codes. Steps of a trajectory absent from the batch count as
    reward 0; two rows with the same trajectory and step raise ``ValueError``.
    """
    assert inputs.step_rewards is not None and inputs.step_index is not None
    rewards = inputs.step_rewards
    if tuple(rewards.shape) != (inputs.batch_size,):
        raise ValueError(f"step_rewards must have shape ({inputs.batch_size},), got {tuple(rewards.shape)}")
    rewards = rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())
    pos, horizon = trajectory_grid(traj.to(rewards.device), inputs.step_index.to(rewards.device), num_traj)
    grid = torch.zeros(num_traj * horizon, dtype=rewards.dtype, device=rewards.device)
    grid[pos] = rewards
    returns = discounted_reverse_cumsum(grid.view(num_traj, horizon), gamma)
    return returns.reshape(-1)[pos]


def gigpo_step_advantage(inputs: AdvantageInputs, group: Tensor, config: GiGPOConfig) -> tuple[Tensor, Tensor]:
    """``A^S`` per row ``(B,)`` and a bool ``(B,)`` marking rows whose anchor group gave a signal."""
    inputs.require("gigpo", "traj_index", "step_index", "step_rewards", "anchor_keys")
    assert inputs.anchor_keys is not None
    traj, num_traj = inputs.trajectory_codes(group)
    returns = discounted_step_returns(inputs, traj, num_traj, config.gamma)
    group = group.to(returns.device)
    anchor, _ = codes_of(inputs.anchor_keys, inputs.batch_size, what="anchor_keys")
    anchor_group, num_anchor_groups = pair_codes(group, anchor.to(returns.device))
    stats = group_stats(returns, anchor_group, num_anchor_groups)
    informative = ((stats.size > 1) & ~stats.uniform)[anchor_group]
    centred = returns - stats.mean[anchor_group]
    if config.mode == "mean_std_norm":
        centred = centred / (stats.std[anchor_group] + config.epsilon)
    return torch.where(informative, centred, torch.zeros_like(centred)), informative


@register_adv_estimator("gigpo", GiGPOConfig, needs_step_rows=True, needs_anchor_states=True)
def _gigpo(inputs: AdvantageInputs, config: GiGPOConfig) -> AdvantageOutput:
    """GiGPO ``A = A^E + ω·A^S`` (module docstring). Reads ``scores``/``token_level_rewards`` (episode score
    per row), ``index``, ``traj_index``, ``step_index``, ``step_rewards``, ``anchor_keys``."""
    episode_cfg = GRPOConfig(
        norm_adv_by_std_in_grpo=config.mode == "mean_std_norm",
        epsilon=config.epsilon,
        step_stats=config.episode_stats,
    )
    episode, metrics = grpo_scalar_advantage(inputs, episode_cfg, estimator="gigpo")
    group, _ = inputs.group_codes("gigpo")
    step, informative = gigpo_step_advantage(inputs, group, config)
    adv = episode + config.step_advantage_w * step.to(episode.dtype)
    metrics["adv/step_adv_rows_frac"] = informative.to(episode.dtype).mean()
    out = broadcast_rows(adv, inputs.response_mask)
    return AdvantageOutput(out, out, metrics)
