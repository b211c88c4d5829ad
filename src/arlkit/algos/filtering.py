"""DAPO-style dynamic filtering of rollout groups (Yu et al. 2025; docs/algorithms.md#dynamic-filtering; AA §4.3).

A group whose trajectories all received the same raw reward carries no group-relative signal. After
each round of rollouts the trainer asks :func:`filter_groups` which of the new groups to keep and how
many more to sample. A trainer loop reads::

    kept, attempt = [], 1
    groups = sample(target)
    while True:
        d = filter_groups([g.rewards for g in groups], num_needed=target - len(kept),
                          attempt=attempt, training_step=step, config=cfg)
        kept += [g for g, k in zip(groups, d.keep) if k]
        log(d.num_dropped)
        if d.done:
            break
        groups, attempt = sample(d.num_to_resample), attempt + 1

Rules: informative groups (rewards not all equal) are kept in order until ``num_needed`` is reached;
uniform groups are dropped and more tasks are sampled; on the last try (``attempt == max_tries``) the
remainder is filled with this try's uniform groups so the batch is full whenever enough groups were
sampled; during the first ``cold_start_steps`` training steps nothing is filtered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["FilterConfig", "FilterDecision", "filter_groups", "is_uniform_group"]


@dataclass(frozen=True)
class FilterConfig:
    """Dynamic-filtering settings (AA: 2–3 tries, optional cold start of 15 steps)."""

    max_tries: int = 3
    """Rounds of sampling per training step, the first included; the last one fills the batch."""
    cold_start_steps: int = 0
    """Training steps (0-based index below this) during which no group is filtered."""
    reward_atol: float = 0.0
    """Rewards within this absolute distance of each other count as equal."""

    def __post_init__(self) -> None:
        if self.max_tries < 1:
            raise ValueError(f"max_tries: must be >= 1, got {self.max_tries}")
        if self.cold_start_steps < 0:
            raise ValueError(f"cold_start_steps: must be >= 0, got {self.cold_start_steps}")
        if self.reward_atol < 0:
            raise ValueError(f"reward_atol: must be >= 0, got {self.reward_atol}")


class FilterDecision(NamedTuple):
    """What to do with one round of groups."""

    keep: tuple[bool, ...]
    """Per group of this round, in order: add it to the batch."""
    num_to_resample: int
    """Groups still missing from the batch (sample at least this many next round); 0 when done."""
    done: bool
    """Stop sampling: the batch is full, or this was the last try, or filtering is inactive."""
    num_uniform: int
    """Groups of this round whose rewards were all equal."""
    num_dropped: int
    """Uniform groups of this round left out of the batch (log this)."""
    num_filled: int
    """Uniform groups kept by the last-try fill or during cold start."""
    num_surplus: int
    """Informative groups left out because the batch was already full."""
    filtering_active: bool
    """False during the cold start."""


def is_uniform_group(rewards: Sequence[float] | Tensor, atol: float = 0.0) -> bool:
    """True when all raw rewards of a group are equal (within ``atol``); an empty group counts as uniform."""
    values = torch.as_tensor(rewards, dtype=torch.float64).reshape(-1)
    if values.numel() == 0:
        return True
    return bool(values.max() - values.min() <= atol)


def filter_groups(
    group_rewards: Sequence[Sequence[float] | Tensor],
    *,
    num_needed: int,
    attempt: int,
    training_step: int,
    config: FilterConfig,
) -> FilterDecision:
    """Decide which groups of this round to keep and how many to sample next (module docstring).

    Args:
        group_rewards: the raw rewards of each group sampled in this round (one sequence per group).
        num_needed: groups still missing from the batch before this round.
        attempt: 1-based index of this round within the training step.
        training_step: 0-based index of the training step (for the cold start).
        config: the filtering settings.
    """
    if num_needed < 0:
        raise ValueError(f"num_needed must be >= 0, got {num_needed}")
    if not 1 <= attempt <= config.max_tries:
        raise ValueError(f"attempt must be in [1, max_tries={config.max_tries}], got {attempt}")
    uniform = [is_uniform_group(r, config.reward_atol) for r in group_rewards]
    active = training_step >= config.cold_start_steps
    keep = [False] * len(uniform)
    room = num_needed
    for i, flat in enumerate(uniform):
        if room and (not flat or not active):
            keep[i], room = True, room - 1
    filled = sum(keep[i] and uniform[i] for i in range(len(keep)))
    last_try = attempt == config.max_tries
    if active and last_try:
        for i, flat in enumerate(uniform):
            if room and flat:
                keep[i], room, filled = True, room - 1, filled + 1
    num_uniform = sum(uniform)
    num_surplus = sum(1 for i, flat in enumerate(uniform) if not flat and not keep[i])
    done = room == 0 or last_try or not active
    return FilterDecision(
        keep=tuple(keep),
        num_to_resample=0 if done else room,
        done=done,
        num_uniform=num_uniform,
        num_dropped=num_uniform - sum(keep[i] for i, flat in enumerate(uniform) if flat),
        num_filled=filled,
        num_surplus=num_surplus,
        filtering_active=active,
    )
