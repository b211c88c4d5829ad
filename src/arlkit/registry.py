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
registers it, imported only when that name is asked for (backends that import torch).

Plugins register the same way from outside the package (docs/integrations.md#plugins):

- an installed distribution's entry point in the family's ``group`` (``arlkit.envs``, ``arlkit.policies``):
  ``countdown = my_pkg.envs:make_countdown``. Its name is listed at once and its object loaded when the
  name is first asked for; importing it may register the name itself (a decorator), else ``adopt``
  turns the loaded object into an entry;
- a ``module:object`` name (``my_pkg.envs:make_countdown``), imported when asked for and adopted the
  same way, for code that is not installed.

:meth:`Registry.source` says where each name comes from (``arlkit eval --list-envs``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from arlkit.config import ConfigError

__all__ = ["PluginWarning", "Registry", "import_object"]

_OBJECT_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
"""``module.path:object.attr``: the form of a plugin named by where it lives."""


class PluginWarning(UserWarning):
    """An installed plugin that is ignored (it is named like a built-in entry)."""


def import_object(path: str, *, what: str) -> Any:
    """The object at ``module.path:name`` (dotted attributes allowed after the colon); a module that
    cannot be imported or lacks the name raises :class:`~arlkit.config.ConfigError` in one line."""
    module_name, _, attrs = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any failure of foreign code to import is the user's to fix
        raise ConfigError(f"{what} {path!r}: cannot import {module_name!r} ({type(exc).__name__}: "
                          f"{_first_line(exc)})") from None
    for attr in attrs.split("."):
        if not hasattr(obj, attr):
            raise ConfigError(f"{what} {path!r}: module {module_name!r} has no {attrs!r}")
        obj = getattr(obj, attr)
    return obj


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]

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
        group: the entry-point group of the family's plugins (``arlkit.envs``); None: no plugins.
        adopt: ``adopt(name, obj)``: the entry of a plugin object that did not register itself
            (an entry point's or a ``module:object`` name's); None: such names are not accepted.
    """

    def __init__(
        self,
        kind: str,
        *,
        modules: Sequence[str] = (),
        on_demand: Mapping[str, str] | None = None,
        label: Callable[[str], str] = str,
        group: str | None = None,
        adopt: Callable[[str, Any], E] | None = None,
    ) -> None:
        self.kind = kind
        self.modules = tuple(modules)
        self.on_demand = dict(on_demand or {})
        self.label = label
        self.group = group
        self.adopt = adopt
        self._entries: dict[str, E] = {}
        self._sources: dict[str, str] = {}
        self._plugins: dict[str, importlib.metadata.EntryPoint] = {}
        self._loaded = False

    # -- registering ---------------------------------------------------------------------------------

    def add(self, name: str, entry: E, *, source: str = "") -> None:
        """Register ``entry`` as ``name`` (``source``: where it comes from, for listings); a name
        registered twice raises ``ValueError``."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        self._sources[name] = source

    def register(self, name: str, entry_of: Callable[[T], E] | None = None) -> Callable[[T], T]:
        """Decorator registering ``entry_of(obj)`` as ``name`` (the decorated object itself without
        ``entry_of``) and returning ``obj`` unchanged; a duplicate name raises ``ValueError``."""

        def deco(obj: T) -> T:
            entry = entry_of(obj) if entry_of is not None else obj
            self.add(name, entry, source=str(getattr(obj, "__module__", "") or ""))  # type: ignore[arg-type]
            return obj

        return deco

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests and notebooks that run a registration again)."""
        self.get(name)
        del self._entries[name]
        self._sources.pop(name, None)

    # -- looking up ----------------------------------------------------------------------------------

    def load(self) -> None:
        """Import the family's modules and list its installed plugins (once all of them import, later
        calls do nothing). A plugin named like a built-in entry is ignored with a warning."""
        if self._loaded:
            return
        for module in self.modules:
            importlib.import_module(module)
        if self.group is not None:
            for point in importlib.metadata.entry_points(group=self.group):
                if point.name in self._entries and self._sources.get(point.name) == point.module:
                    self._sources[point.name] = self._where(point)  # its module was imported first: the same plugin
                    self._plugins.setdefault(point.name, point)
                elif point.name in self._entries or point.name in self.on_demand:
                    warnings.warn(f"entry point {point.name} = {point.value} ({_distribution(point)}) ignored: "
                                  f"arlkit has a built-in {self.kind} of that name", PluginWarning, stacklevel=2)
                else:
                    self._plugins.setdefault(point.name, point)
        self._loaded = True

    def source(self, name: str) -> str:
        """Where ``name`` comes from: the module that registered it, an installed distribution's entry
        point (listed before it is loaded), or the on-demand module that will register it."""
        self.load()
        if name in self._entries:
            return self._sources.get(name, "")
        if name in self._plugins:
            return self._where(self._plugins[name])
        return self.on_demand.get(name, "")

    def _where(self, point: importlib.metadata.EntryPoint) -> str:
        return f"entry point {self.group}: {point.value} ({_distribution(point)})"

    def _load_plugin(self, name: str) -> None:
        """Register the plugin ``name``: an entry point's object, or the object at ``module:object``."""
        if name in self._plugins:
            point = self._plugins[name]
            where = self._where(point)
            try:
                obj = point.load()
            except ConfigError:
                raise  # the plugin's own one-line message (a missing extra, a bad setting)
            except Exception as exc:  # noqa: BLE001 - a plugin that fails to import is reported, never raised
                raise ConfigError(f"{self.kind} {name!r} from {where} cannot be loaded ({type(exc).__name__}: "
                                  f"{_first_line(exc)})") from None
        elif self.adopt is not None and _OBJECT_PATH.match(name):
            where = name
            obj = import_object(name, what=self.kind)
        else:
            return
        if name not in self._entries:  # importing it did not register the name: adopt the object
            if self.adopt is None:
                raise ConfigError(f"{self.kind} {name!r} from {where}: loading it registered no {self.kind} of that name")
            try:
                entry = self.adopt(name, obj)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{self.kind} {name!r} from {where}: {_first_line(exc)}") from None
            self.add(name, entry, source=where)
        else:  # importing it registered the name: list it by its entry point
            self._sources[name] = where

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
            self._load_plugin(name)
        if name not in self._entries:
            shown = name if quoted is None else quoted
            choices = ", ".join(self.label(n) for n in self.names())
            raise ConfigError(f"unknown {self.kind} {shown!r}; valid choices: {choices}")
        return self._entries[name]

    def names(self, *, plugins: bool = True) -> list[str]:
        """Every name that :meth:`get` accepts, on-demand ones and installed plugins included, sorted
        (``module:object`` names are accepted too, and listed once used); ``plugins=False``: arlkit's
        own entries only (its modules' and on-demand ones)."""
        self.load()
        every = set(self._entries) | set(self.on_demand) | set(self._plugins)
        if plugins:
            return sorted(every)
        return sorted(n for n in every if n not in self._plugins and self._sources.get(n) != n)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries or name in self.on_demand or name in self._plugins

    def __iter__(self) -> Iterator[E]:
        """The registered entries (on-demand names whose module is not imported yet are not among them)."""
        self.load()
        return iter(list(self._entries.values()))


def _distribution(point: importlib.metadata.EntryPoint) -> str:
    """``name version`` of the distribution that declares ``point`` ("an unknown distribution" when none)."""
    dist = getattr(point, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
