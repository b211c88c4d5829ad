"""Scripted policies: ``random``, ``oracle`` and ``noisy-oracle:EPS``.

They read the live environment from :attr:`Request.env` and answer in the same
``<think>...</think><action>...</action>`` text a model would write, so every rollout through them
exercises the parser. Randomness depends only on ``(request.seed, request.turn)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arlkit.config import ConfigError
from arlkit.envs.capabilities import ActionSpace, Oracle
from arlkit.policies.protocol import PolicyError, Reply, Request
from arlkit.policies.registry import BackendOptions, SamplingConfig, register_policy

__all__ = ["NoisyOraclePolicy", "RandomPolicy", "format_reply", "oracle_horizon", "random_action"]


def format_reply(reasoning: str, action: str) -> str:
    """A reply in the strict format."""
    return f"<think>{reasoning}</think><action>{action}</action>"


def _rng(request: Request) -> np.random.Generator:
    return np.random.default_rng([request.seed & 0xFFFFFFFFFFFF, request.turn])


def oracle_horizon(request: Request) -> int:
    """Turns the oracle plans for: the announced remaining budget, or, when the budget is hidden,
    what is left of the family's full budget T_max (so a hidden-mode oracle is budget-blind)."""
    if request.remaining is not None:
        return request.remaining
    return max(1, int(request.env.t_max) - request.turn)


def random_action(request: Request, rng: np.random.Generator) -> str:
    """A uniformly random admissible action of ``request``'s environment, drawn from ``rng``."""
    env = request.env
    if not isinstance(env, ActionSpace):
        raise PolicyError(f"the random policy needs an environment with a finite action set; {env.name!r} has none")
    actions = list(env.admissible_actions())
    return actions[int(rng.integers(len(actions)))]


def _oracle_reply(request: Request, rng: np.random.Generator) -> Reply:
    """An optimal action (ties broken by ``rng``); where the environment's oracle is unknown (no
    optimal action: its planner gave no answer) a reply with an error, which ends the trajectory."""
    env = request.env
    if not isinstance(env, Oracle):
        raise PolicyError(f"the oracle policy needs an environment with an oracle; {env.name!r} has none")
    best = list(env.optimal_actions(oracle_horizon(request)))
    if not best:
        return Reply("", error=f"the oracle is unavailable in this state of {env.name!r} (no optimal action known)")
    return Reply(format_reply("optimal move", best[int(rng.integers(len(best)))]))


@dataclass
class RandomPolicy:
    """Uniformly random admissible actions."""

    name: str = "random"
    context_length: None = None  # unlimited: no tokens

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        return [Reply(format_reply("random move", random_action(r, _rng(r)))) for r in requests]


@dataclass
class NoisyOraclePolicy:
    """An optimal action (ties broken at random) or, with probability ``eps``, a random one."""

    eps: float = 0.0
    name: str = "oracle"
    context_length: None = None  # unlimited: no tokens

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        replies = []
        for request in requests:
            rng = _rng(request)
            if self.eps > 0 and rng.random() < self.eps:
                replies.append(Reply(format_reply("exploring", random_action(request, rng))))
            else:
                replies.append(_oracle_reply(request, rng))
        return replies


@register_policy("random")
def _make_random(arg: str | None, sampling: SamplingConfig, backend: BackendOptions) -> RandomPolicy:
    if arg:
        raise ConfigError(f"policy 'random' takes no argument, got {arg!r}")
    return RandomPolicy()


@register_policy("oracle")
def _make_oracle(arg: str | None, sampling: SamplingConfig, backend: BackendOptions) -> NoisyOraclePolicy:
    if arg:
        raise ConfigError(f"policy 'oracle' takes no argument, got {arg!r}")
    return NoisyOraclePolicy(0.0, "oracle")


@register_policy("noisy-oracle", needs_arg=True)
def _make_noisy(arg: str | None, sampling: SamplingConfig, backend: BackendOptions) -> NoisyOraclePolicy:
    try:
        eps = float(arg or "")
    except ValueError:
        raise ConfigError(f"noisy-oracle:EPS needs a number EPS in [0, 1], got {arg!r}") from None
    if not 0.0 <= eps <= 1.0:
        raise ConfigError(f"noisy-oracle:EPS needs EPS in [0, 1], got {eps}")
    return NoisyOraclePolicy(eps, f"noisy-oracle:{arg}")
