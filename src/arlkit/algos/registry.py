"""A small name -> component registry shared by the policy-loss and advantage-estimator families.

Each entry records the callable, the frozen dataclass that types its hyperparameters, and a few
family-specific flags, so a trainer (or a log reader) can rebuild a run from ``(name, config)``.
Unknown names list the known ones; registering a name twice raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from arlkit.config import ConfigError, build_config

__all__ = ["NoConfig", "Registry", "RegistryEntry"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class NoConfig:
    """The config of a component without hyperparameters."""


@dataclass(frozen=True)
class RegistryEntry(Generic[F]):
    """One registered component."""

    name: str
    """The name it is registered under."""
    fn: F
    """The function the family calls with its uniform signature."""
    config_cls: type
    """Frozen dataclass holding the component's hyperparameters and their defaults."""
    flags: Mapping[str, Any] = field(default_factory=dict)
    """Family-specific facts about the component (e.g. a fixed aggregation mode, needs a critic)."""

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


class Registry(Generic[F]):
    """Name -> :class:`RegistryEntry` for one family of components (``kind`` names it in messages)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, RegistryEntry[F]] = {}

    def register(self, name: str, config_cls: type = NoConfig, **flags: Any) -> Callable[[F], F]:
        """Decorator: ``@registry.register("name", MyConfig)``; a duplicate name raises ``ValueError``."""
        if not dataclasses.is_dataclass(config_cls):
            raise TypeError(f"{self.kind} {name!r}: config_cls must be a dataclass, got {config_cls!r}")

        def deco(fn: F) -> F:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = RegistryEntry(name, fn, config_cls, dict(flags))
            return fn

        return deco

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests and notebooks that re-run a registration)."""
        self.get(name)
        del self._entries[name]

    def get(self, name: str) -> RegistryEntry[F]:
        """The entry registered as ``name``; an unknown name raises ``ValueError`` listing the known ones."""
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(
                f"unknown {self.kind} {name!r}; valid choices: {', '.join(sorted(self._entries))}"
            ) from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[RegistryEntry[F]]:
        return iter(list(self._entries.values()))
