"""What the command line shares across commands before any run starts, without importing torch: the
errors a user can fix and the sampling options of LLM policies. The choices of one command come from
the recipe it runs (``ARENA_VARIANTS`` from :mod:`~arlkit.recipes.arena`, the tiny model's sizes from
:mod:`~arlkit.recipes.model`, an analysis's config from :mod:`~arlkit.recipes.analyze`)."""

from __future__ import annotations

from arlkit.config import ConfigError
from arlkit.policies import PolicyError, SamplingConfig

__all__ = ["USER_ERRORS", "SamplingConfig"]

USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, PolicyError)
"""Errors of input a user can fix (an unknown name, a bad value, a policy that cannot be built or
reached): the command line prints them as one line with exit code 2."""
