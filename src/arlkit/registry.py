"""Name -> entry registries: environments, policy kinds, advantage estimators, policy losses.

A :class:`Registry` holds one family of components. It is generic over its entries: each family
defines its entry type, a frozen dataclass with the component and its typed facts (a config class,
whether a policy kind needs an argument, whether an estimator needs a critic), and registers with
a decorator that builds the entry from the decorated object::

    ENVS: Registry[RegisteredEnv] = Registry("environment", modules=("arlkit.envs.frozenlake", ...))

    def register_env(name, config_cls):
        return ENVS.register(name, lambda factory: RegisteredEnv(name, config_cls, factory))

Registrations run when the module holding them is imported. ``modules`` lists the family's own
modules, imported on the first lookup or listing; ``on_demand`` maps a name to the module that
registers it, imported only when that name is asked for (backends that import torch). Both are
read in :meth:`Registry.load`, the one place where registrations from outside the registering
call come in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

from arlkit.config import ConfigError

__all__ = ["Registry"]

E = TypeVar("E")
T = TypeVar("T")


class Registry(Generic[E]):
    """Name -> entry of type ``E`` for one family of components.

    Args:
        kind: the family's name in messages (``"environment"``, ``"policy"``, ``"advantage estimator"``).
        modules: modules whose import registers the family's built-in entries; imported (in this
            order) before the first lookup or listing.
        on_demand: name -> the module that registers it, imported only when that name is looked up;
            the name is listed among the valid choices before its module is imported.
        label: how a name is shown among the valid choices (e.g. ``hf`` as ``hf:PATH``); the name itself
            by default.
    """

    def __init__(
        self,
        kind: str,
        *,
        modules: Sequence[str] = (),
        on_demand: Mapping[str, str] | None = None,
        label: Callable[[str], str] = str,
    ) -> None:
        self.kind = kind
        self.modules = tuple(modules)
        self.on_demand = dict(on_demand or {})
        self.label = label
        self._entries: dict[str, E] = {}
        self._loaded = False

    # -- registering ---------------------------------------------------------------------------------

    def add(self, name: str, entry: E) -> None:
        """Register ``entry`` as ``name``; a name registered twice raises ``ValueError``."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry

    def register(self, name: str, entry_of: Callable[[T], E] | None = None) -> Callable[[T], T]:
        """Decorator registering ``entry_of(obj)`` as ``name`` (the decorated object itself without
        ``entry_of``) and returning ``obj`` unchanged; a duplicate name raises ``ValueError``."""

        def deco(obj: T) -> T:
            self.add(name, entry_of(obj) if entry_of is not None else obj)  # type: ignore[arg-type]
            return obj

        return deco

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests and notebooks that run a registration again)."""
        self.get(name)
        del self._entries[name]

    # -- looking up ----------------------------------------------------------------------------------

    def load(self) -> None:
        """Import the family's modules (once all of them import, later calls do nothing)."""
        if self._loaded:
            return
        for module in self.modules:
            importlib.import_module(module)
        self._loaded = True

    def get(self, name: str, *, quoted: str | None = None) -> E:
        """The entry registered as ``name``, importing its on-demand module first if it has one.

        An unknown name raises :class:`~arlkit.config.ConfigError` in one line naming the valid
        choices; ``quoted`` is what the message quotes (``name`` by default, e.g. the whole spec
        ``noisy-oracle:0.3`` when ``name`` is its kind).
        """
        self.load()
        if name not in self._entries and name in self.on_demand:
            importlib.import_module(self.on_demand[name])
        if name not in self._entries:
            shown = name if quoted is None else quoted
            choices = ", ".join(self.label(n) for n in self.names())
            raise ConfigError(f"unknown {self.kind} {shown!r}; valid choices: {choices}")
        return self._entries[name]

    def names(self) -> list[str]:
        """Every name that :meth:`get` accepts, on-demand ones included, sorted."""
        self.load()
        return sorted(set(self._entries) | set(self.on_demand))

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries or name in self.on_demand

    def __iter__(self) -> Iterator[E]:
        """The registered entries (on-demand names whose module is not imported yet are not among them)."""
        self.load()
        return iter(list(self._entries.values()))
