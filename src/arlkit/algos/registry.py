"""The entries of the advantage-estimator and policy-loss registries (:class:`arlkit.registry.Registry`).

Each entry records the callable, the frozen dataclass that types its hyperparameters, and the
family's typed flags (:class:`~arlkit.algos.advantages.EstimatorFlags`,
:class:`~arlkit.algos.policy_losses.LossFlags`), so a trainer (or a log reader) can rebuild a run
from ``(name, config)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from arlkit.config import ConfigError, build_config

__all__ = ["NoConfig", "RegistryEntry", "entry_builder"]

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M")


@dataclass(frozen=True)
class NoConfig:
    """The config of a component without hyperparameters."""


@dataclass(frozen=True)
class RegistryEntry(Generic[F, M]):
    """One registered component."""

    name: str
    """The name it is registered under."""
    fn: F
    """The function the family calls with its uniform signature."""
    config_cls: type
    """Frozen dataclass holding the component's hyperparameters and their defaults."""
    flags: M
    """The family's facts about the component (e.g. a fixed aggregation mode, needs a critic)."""

    def config(self, config: Any = None, **overrides: Any) -> Any:
        """Build the typed config: ``config`` (an instance, or None for defaults) with ``overrides`` applied.

        String values are coerced to the annotated type; an unknown key raises
        :class:`~arlkit.config.ConfigError` naming the valid keys.
        """
        if config is not None and not isinstance(config, self.config_cls):
            raise ConfigError(
                f"{self.name}: config must be a {self.config_cls.__name__}, got {type(config).__name__}"
            )
        if not overrides:
            return config if config is not None else self.config_cls()
        base: dict[str, Any] = dataclasses.asdict(config) if config is not None else {}  # type: ignore[call-overload]
        return build_config(self.config_cls, {**base, **overrides}, where=self.name)


def entry_builder(kind: str, name: str, config_cls: type, flags: M) -> Callable[[F], RegistryEntry[F, M]]:
    """``fn -> RegistryEntry(name, fn, config_cls, flags)`` for :meth:`arlkit.registry.Registry.register`;
    ``config_cls`` must be a dataclass (``TypeError`` otherwise, at registration)."""
    if not dataclasses.is_dataclass(config_cls):
        raise TypeError(f"{kind} {name!r}: config_cls must be a dataclass, got {config_cls!r}")
    return lambda fn: RegistryEntry(name, fn, config_cls, flags)
