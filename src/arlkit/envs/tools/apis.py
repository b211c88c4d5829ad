"""The API classes arlkit implements, looked up by their own name or a BFCL alias."""

from __future__ import annotations

from typing import Any

from arlkit.envs.tools.api_base import ToolSpec, tool_specs
from arlkit.envs.tools.calculator import Calculator
from arlkit.envs.tools.filesystem import FileSystem
from arlkit.envs.tools.messenger import Messenger
from arlkit.envs.tools.trading import TradingAccount
from arlkit.envs.tools.travel import TravelAgency
from arlkit.envs.tools.vehicle import Vehicle

__all__ = ["API_CLASSES", "FINISH", "api_class", "canonical_api_name", "instantiate", "render_apis", "specs_for"]

API_CLASSES: dict[str, type] = {
    cls.api_name: cls for cls in (FileSystem, Calculator, Messenger, TradingAccount, TravelAgency, Vehicle)
}
_ALIASES = {alias: name for name, cls in API_CLASSES.items() for alias in getattr(cls, "bfcl_names", ())}

# The control action that ends the current user turn; reserved, never a tool name.
FINISH = "finish_turn"


def canonical_api_name(name: str) -> str | None:
    """arlkit's name of API ``name`` (an arlkit name or a BFCL alias), or ``None`` if unknown."""
    if name in API_CLASSES:
        return name
    return _ALIASES.get(name)


def api_class(name: str) -> type:
    """The class of API ``name``; ``KeyError`` listing the known names otherwise."""
    canonical = canonical_api_name(name)
    if canonical is None:
        known = ", ".join(sorted([*API_CLASSES, *_ALIASES]))
        raise KeyError(f"unknown API class {name!r}; arlkit implements: {known}")
    return API_CLASSES[canonical]


def instantiate(name: str, config: dict[str, Any] | None) -> Any:
    """A fresh instance of API ``name`` with its initial state loaded from ``config``."""
    instance = api_class(name)()
    instance.load_state(dict(config or {}))
    return instance


def specs_for(apis: tuple[str, ...] | list[str]) -> dict[str, ToolSpec]:
    """``tool name -> spec`` over the given (canonical) APIs; names must not collide."""
    out: dict[str, ToolSpec] = {}
    for name in apis:
        for tool_name, spec in tool_specs(API_CLASSES[name]).items():
            if tool_name in out or tool_name == FINISH:
                raise ValueError(f"tool name {tool_name!r} is defined twice (in {out[tool_name].api} and {name})")
            out[tool_name] = spec
    return out


def render_apis(apis: tuple[str, ...] | list[str]) -> str:
    """The tool documentation shown to the model for the given APIs."""
    blocks = []
    for name in apis:
        cls = API_CLASSES[name]
        specs = tool_specs(cls)
        body = "\n".join(specs[t].render() for t in sorted(specs))
        blocks.append(f"[{name}] {cls.description}\n{body}")  # type: ignore[attr-defined]
    return "\n\n".join(blocks)
