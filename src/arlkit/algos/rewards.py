"""Reward pieces a trainer composes (docs/algorithms.md#rewards; RT App. A.4, AA §3.1).
RT: "What Does Multi-Turn Reinforcement Learning Really Improve in LLM Agents?"
AA: "ARLArena: A Unified Framework for Stable Agentic Reinforcement Learning"

- the **episode reward**: success → ``success_reward`` (1; AA scales ALFWorld/WebShop to 10); a trajectory
  that exhausts its budget without success → 0; any other ending → the environment's partial reward
  (0 by default);
- the **step validity** of one reply under the format rules: a reply without a parsable action is invalid
  and not executed; with ``strict_format`` a reply that is not exactly
  ``<think>…</think><action>…</action>`` is invalid too, though a lenient parser may still execute its action;
- the **per-step rewards**: ``−invalid_action_penalty`` on each invalid step (0.1, AA) plus the episode
  reward on the final step; their sum is the trajectory's score for group advantages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["RewardConfig", "StepValidity", "classify_step", "episode_reward", "step_rewards"]


@dataclass(frozen=True)
class RewardConfig:
    """Reward settings of a run."""

    success_reward: float = 1.0
    """Reward of a successful trajectory (AA uses 10 on ALFWorld and WebShop)."""
    invalid_action_penalty: float = 0.1
    """Subtracted from the reward of each invalid step (AA)."""
    strict_format: bool = True
    """Mark a reply invalid unless it is exactly ``<think>…</think><action>…</action>`` (AA's strict format)."""

    def __post_init__(self) -> None:
        if self.invalid_action_penalty < 0:
            raise ValueError(f"invalid_action_penalty: must be >= 0, got {self.invalid_action_penalty}")


def episode_reward(
    success: bool,
    *,
    budget_exhausted: bool = False,
    partial_reward: float = 0.0,
    success_reward: float = 1.0,
) -> float:
    """The terminal reward of one trajectory.

    Args:
        success: the task was solved (within the budget).
        budget_exhausted: the trajectory used its whole budget T without success (RT App. A.4: reward 0).
        partial_reward: the environment's own reward for an unsuccessful ending that did not exhaust the
            budget (e.g. a partial score); 0 by default.
        success_reward: reward for success.
    """
    if success:
        return float(success_reward)
    if budget_exhausted:
        return 0.0
    return float(partial_reward)


class StepValidity(NamedTuple):
    """How one reply is treated."""

    execute: bool
    """Send the parsed action to the environment."""
    invalid: bool
    """Count the step as invalid (penalised, logged in the invalid-action rate)."""


def classify_step(action_found: bool, format_ok: bool, *, strict_format: bool) -> StepValidity:
    """Validity of one reply: ``action_found`` — a parser extracted an action; ``format_ok`` — the reply
    matches the strict format exactly. Without an action nothing is executed and the step is invalid;
    under ``strict_format`` a found action in a malformed reply is executed but the step is invalid."""
    if not action_found:
        return StepValidity(execute=False, invalid=True)
    return StepValidity(execute=True, invalid=strict_format and not format_ok)


def step_rewards(
    invalid: Sequence[bool] | Tensor,
    final_reward: float,
    *,
    invalid_action_penalty: float = 0.1,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Per-step rewards ``(T,)`` of one trajectory: ``r_t = −penalty·invalid_t``, plus ``final_reward`` at ``t = T−1``.

    ``invalid``: ``(T,)`` flags, one per step taken. A trajectory with no step gets an empty tensor.
    """
    flags = torch.as_tensor(invalid, dtype=torch.bool)
    if flags.dim() != 1:
        raise ValueError(f"invalid must be 1-D (one flag per step), got shape {tuple(flags.shape)}")
    rewards = -invalid_action_penalty * flags.to(dtype)
    if rewards.numel():
        rewards[-1] += final_reward
    return rewards
