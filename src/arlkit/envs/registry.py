"""Name -> environment factory, each with a typed config dataclass."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from arlkit.config import ConfigError, build_config
from arlkit.envs.protocol import Env

__all__ = ["RegisteredEnv", "env_config", "list_envs", "make", "register_env"]

E = TypeVar("E")


@dataclass(frozen=True)
class RegisteredEnv:
    """A registered environment: its name, config dataclass and constructor ``factory(config)`` (the
    ``env`` section of a run's config is :class:`arlkit.config.EnvSpec`)."""

    name: str
    config_cls: type
    factory: Callable[[Any], Env]


_REGISTRY: dict[str, RegisteredEnv] = {}


def register_env(name: str, config_cls: type) -> Callable[[E], E]:
    """Class/function decorator: ``@register_env("frozenlake", FrozenLakeConfig)``.

    The decorated callable is called with one argument, an instance of ``config_cls``.
    """

    def deco(factory: E) -> E:
        if name in _REGISTRY:
            raise ValueError(f"environment {name!r} is already registered")
        _REGISTRY[name] = RegisteredEnv(name, config_cls, factory)  # type: ignore[arg-type]
        return factory

    return deco


def list_envs() -> list[str]:
    """Registered environment names, sorted."""
    _load_builtins()
    return sorted(_REGISTRY)


def _spec(name: str) -> RegisteredEnv:
    _load_builtins()
    if name not in _REGISTRY:
        raise ConfigError(f"unknown environment {name!r}; valid choices: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def env_config(name: str, values: Mapping[str, Any] | None = None) -> Any:
    """The typed config of environment ``name`` built from ``values`` (strings are coerced)."""
    return build_config(_spec(name).config_cls, dict(values or {}), where=f"env {name}")


def make(name: str, **config: Any) -> Env:
    """Build environment ``name`` with config overrides, e.g. ``make("frozenlake", size=6)``."""
    return _spec(name).factory(env_config(name, config))


def _load_builtins() -> None:
    # Importing the modules runs their @register_env decorators.
    from arlkit.envs import builtin  # noqa: F401
