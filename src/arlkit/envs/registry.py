"""Name -> environment factory, each with a typed config dataclass."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from arlkit.config import config_from_dict
from arlkit.envs.protocol import Env
from arlkit.registry import Registry

__all__ = ["ENVS", "RegisteredEnv", "env_config", "list_envs", "make", "register_env"]

E = TypeVar("E")


@dataclass(frozen=True)
class RegisteredEnv:
    """A registered environment: its name, config dataclass and constructor ``factory(config)`` (the
    ``env`` section of a run's config is :class:`arlkit.config.EnvSpec`)."""

    name: str
    config_cls: type
    factory: Callable[[Any], Env]


ENVS: Registry[RegisteredEnv] = Registry(
    "environment",
    modules=(
        "arlkit.envs.frozenlake",
        "arlkit.envs.sokoban",
        "arlkit.envs.bfcl",
        "arlkit.envs.sql",
        "arlkit.envs.code",
        "arlkit.envs.gymnasium",
        "arlkit.envs.math_tir",
        "arlkit.envs.terminal",
        "arlkit.envs.webshop",
        "arlkit.envs.alfworld",
    ),
)
"""The environment registry; its ``modules`` are the built-in environments (a new family adds its package here)."""


def register_env(name: str, config_cls: type) -> Callable[[E], E]:
    """Class/function decorator: ``@register_env("frozenlake", FrozenLakeConfig)``.

    The decorated callable is called with one argument, an instance of ``config_cls``.
    """
    return ENVS.register(name, lambda factory: RegisteredEnv(name, config_cls, factory))  # type: ignore[arg-type]


def list_envs() -> list[str]:
    """Registered environment names, sorted."""
    return ENVS.names()


def env_config(name: str, values: Mapping[str, Any] | None = None) -> Any:
    """The typed config of environment ``name`` built from ``values`` (strings are coerced; a nested
    mapping or a dotted key, ``sandbox.memory_mb``, sets a field of a nested section)."""
    return config_from_dict(ENVS.get(name).config_cls, dict(values or {}), where=f"env {name}")


def make(name: str, **config: Any) -> Env:
    """Build environment ``name`` with config overrides, e.g. ``make("frozenlake", size=6)``."""
    return ENVS.get(name).factory(env_config(name, config))
