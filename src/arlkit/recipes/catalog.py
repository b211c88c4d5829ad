"""What the command line shares across commands before any run starts, without importing torch: the
errors a user can fix and the sampling options of LLM policies. The choices of one command come from
the recipe it runs (``ARENA_VARIANTS`` from :mod:`~arlkit.recipes.arena`, the tiny model's sizes from
:mod:`~arlkit.recipes.model`, an analysis's config from :mod:`~arlkit.recipes.analyze`)."""

from __future__ import annotations

from arlkit.config import ConfigError
from arlkit.policies import PolicyError, SamplingConfig

__all__ = ["USER_ERRORS", "SamplingConfig", "environment_sources", "policy_sources"]

USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, PolicyError)
"""Errors of input a user can fix (an unknown name, a bad value, a policy that cannot be built or
reached): the command line prints them as one line with exit code 2."""


def environment_sources() -> list[tuple[str, str]]:
    """``(name, where it comes from)`` of every environment: arlkit's own modules and installed plugins
    (entry points in ``arlkit.envs``, with their distribution)."""
    from arlkit.envs import env_source, list_envs

    return [(name, env_source(name)) for name in list_envs()]


def policy_sources() -> list[tuple[str, str]]:
    """``(kind, where it comes from)`` of every policy kind, installed plugins (``arlkit.policies``) included."""
    from arlkit.policies.registry import POLICIES

    return [(POLICIES.label(kind), POLICIES.source(kind)) for kind in POLICIES.names()]
