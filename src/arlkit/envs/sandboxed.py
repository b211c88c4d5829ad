"""The ``sandbox`` section of an environment that runs programs (``code``, ``math-tir``, ``terminal``).

Such an environment's config nests one :class:`~arlkit.sandbox.SandboxConfig` (``--env-arg
sandbox.memory_mb=2048``; in YAML ``env: {name: code, args: {sandbox: {memory_mb: 2048}}}``) for the
limits and isolation a user sets. A few of its fields follow the environment's own options instead:
the wall-clock and CPU limits follow the time an action may take, the output cap what an
observation shows or a test expects, the terminal's file and ``/tmp`` sizes its task folder's limit. Those fields stay
at their defaults in the section (a value given for one is refused, naming what sets it),
and :func:`env_sandbox` fills them in when the environment builds its sandbox. Folders and packages
the environment hides, and the scratch folders it needs, are added to the section's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from arlkit.sandbox import SandboxConfig

__all__ = ["env_sandbox", "refuse_derived"]

_DEFAULT = SandboxConfig()


def refuse_derived(section: SandboxConfig, derived: Mapping[str, str]) -> None:
    """Raise ``ValueError`` when ``section`` gives one of the fields ``derived`` maps to what the
    environment sets it from (e.g. ``{"wall_time_s": "step_budget_s"}``)."""
    for name, source in derived.items():
        if getattr(section, name) != getattr(_DEFAULT, name):
            raise ValueError(f"sandbox.{name} is set by the environment from {source}; leave it out")


def env_sandbox(
    section: SandboxConfig,
    *,
    hide_paths: tuple[str, ...] = (),
    hide_packages: tuple[str, ...] = (),
    scratch_dirs: tuple[str, ...] = (),
    **derived: Any,
) -> SandboxConfig:
    """``section`` with the ``derived`` fields set and the environment's hidden folders, hidden
    packages and scratch folders added to its own."""
    return dataclasses.replace(
        section,
        **derived,
        hide_paths=tuple(dict.fromkeys((*section.hide_paths, *hide_paths))),
        hide_packages=tuple(dict.fromkeys((*section.hide_packages, *hide_packages))),
        scratch_dirs=tuple(dict.fromkeys((*section.scratch_dirs, *scratch_dirs))),
    )
