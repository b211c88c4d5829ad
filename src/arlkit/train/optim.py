"""The optimizer and learning-rate schedule of every training loop (RL and behaviour cloning), built
from one :class:`~arlkit.train.config.OptimConfig`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from arlkit.train.config import OptimConfig

__all__ = ["adamw", "lr_lambda", "lr_scheduler"]


def adamw(params: Iterable[torch.nn.Parameter], optim: OptimConfig, *, lr: float | None = None) -> torch.optim.AdamW:
    """AdamW over ``params`` with ``optim``'s betas, eps and weight decay, at ``lr`` (default ``optim.lr``;
    the critic passes ``optim.critic_lr``)."""
    return torch.optim.AdamW(params, lr=optim.lr if lr is None else lr, betas=(optim.beta1, optim.beta2),
                             eps=optim.eps, weight_decay=optim.weight_decay)


def lr_lambda(optim: OptimConfig, total_updates: int) -> Callable[[int], float]:
    """Multiplier of ``optim.lr`` after ``u`` optimizer updates: linear warm-up over ``warmup_steps``
    updates (``(u + 1) / warmup_steps``), then ``optim.schedule`` over the remaining updates (constant: 1)."""

    def factor(u: int) -> float:
        if u < optim.warmup_steps:
            return (u + 1) / optim.warmup_steps
        span = max(1, total_updates - optim.warmup_steps)
        progress = min(1.0, (u - optim.warmup_steps) / span)
        if optim.schedule == "linear":
            return 1.0 - progress
        if optim.schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    return factor


def lr_scheduler(optimizer: torch.optim.Optimizer, optim: OptimConfig, total_updates: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The per-update schedule :func:`lr_lambda` on ``optimizer``."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(optim, total_updates))
