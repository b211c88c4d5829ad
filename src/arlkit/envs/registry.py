"""Name -> environment factory, each with a typed config dataclass.

Built-in environments register with :func:`register_env`. Plugins (docs/integrations.md#plugins) come
from installed distributions' ``arlkit.envs`` entry points or by ``module:factory`` name
(``--env my_pkg.envs:make_countdown``); a plugin object that does not register itself is adopted as a
factory: its config class is its ``config_cls`` attribute, else the dataclass its first parameter is
annotated with; a factory without parameters takes no config."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from arlkit.config import ConfigError, config_from_dict
from arlkit.envs.protocol import CORE_METHODS, Env
from arlkit.registry import Registry

__all__ = ["ENVS", "NoConfig", "RegisteredEnv", "env_config", "env_source", "list_envs", "make", "register_env"]

E = TypeVar("E")


@dataclass(frozen=True)
class RegisteredEnv:
    """A registered environment: its name, config dataclass and constructor ``factory(config)`` (the
    ``env`` section of a run's config is :class:`arlkit.config.EnvSpec`)."""

    name: str
    config_cls: type
    factory: Callable[[Any], Env]


@dataclass(frozen=True)
class NoConfig:
    """The config of a plugin environment whose factory takes none."""


def _adopt(name: str, obj: Any) -> RegisteredEnv:
    """A plugin object as an environment (module docstring); ``TypeError`` says what it lacks. What the
    factory builds is checked against the :class:`~arlkit.envs.protocol.Env` protocol."""
    if not callable(obj):
        raise TypeError(f"{type(obj).__name__} is not an environment factory (a class or a function)")

    def checked(env: Any) -> Env:
        missing = [part for part in ("name", "t_max", *CORE_METHODS) if not hasattr(env, part)]
        if missing:
            raise ConfigError(f"environment {name!r} built a {type(env).__name__}, which is not an environment: "
                              f"it lacks {', '.join(missing)}")
        return env

    config_cls = getattr(obj, "config_cls", None)
    if config_cls is None:
        parameters = list(inspect.signature(obj).parameters.values())
        if not parameters:
            return RegisteredEnv(name, NoConfig, lambda config: checked(obj()))
        try:
            hints = typing.get_type_hints(obj.__init__ if inspect.isclass(obj) else obj)
        except Exception:  # noqa: BLE001 - annotations that do not resolve leave the config class unknown
            hints = {}
        config_cls = hints.get(parameters[0].name)
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise TypeError("its config class is unknown: annotate the factory's first parameter with a dataclass, "
                        "or set its config_cls attribute")
    return RegisteredEnv(name, config_cls, lambda config: checked(obj(config)))


ENVS: Registry[RegisteredEnv] = Registry(
    "environment",
    group="arlkit.envs",
    adopt=_adopt,
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


def list_envs(*, plugins: bool = True) -> list[str]:
    """Registered environment names, sorted; ``plugins=False``: arlkit's built-in environments only
    (without those of entry points, the environment hubs' adapters among them, and ``module:factory`` names)."""
    return ENVS.names(plugins=plugins)


def env_source(name: str) -> str:
    """Where environment ``name`` comes from: its module, or the entry point and distribution of a plugin."""
    return ENVS.source(name)


def env_config(name: str, values: Mapping[str, Any] | None = None) -> Any:
    """The typed config of environment ``name`` built from ``values`` (strings are coerced; a nested
    mapping or a dotted key, ``sandbox.memory_mb``, sets a field of a nested section)."""
    return config_from_dict(ENVS.get(name).config_cls, dict(values or {}), where=f"env {name}")


def make(name: str, **config: Any) -> Env:
    """Build environment ``name`` with config overrides, e.g. ``make("frozenlake", size=6)``."""
    return ENVS.get(name).factory(env_config(name, config))
