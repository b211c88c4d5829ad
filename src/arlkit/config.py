"""Typed configs: frozen dataclasses are the single place where defaults live.

``build_config`` turns loose ``key=value`` input (a CLI, a YAML file) into a dataclass instance,
rejecting unknown keys and values of the wrong type with one clear message.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["ConfigError", "build_config", "config_to_dict", "parse_key_values"]

C = TypeVar("C")


class ConfigError(ValueError):
    """A config key or value is not acceptable; the message names the field and the valid choices."""


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(name, value, arg)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{name}: invalid value {value!r}")
    if origin is typing.Literal:
        choices = typing.get_args(annotation)
        for choice in choices:
            if value == choice or (isinstance(value, str) and str(choice) == value):
                return choice
        raise ConfigError(f"{name}: {value!r} is not one of {', '.join(map(str, choices))}")
    if origin in (tuple, list):
        items = value.split(",") if isinstance(value, str) else list(value)
        inner = typing.get_args(annotation)
        inner_type = inner[0] if inner else Any
        coerced = [_coerce(name, item, inner_type) for item in items]
        return tuple(coerced) if origin is tuple else coerced
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        try:
            return int(str(value))
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
    if annotation is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if annotation is str:
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{name}: expected a string, got {value!r}")
        return str(value)
    return value


def build_config(cls: type[C], values: Mapping[str, Any], *, where: str = "") -> C:
    """Instantiate the dataclass ``cls`` from ``values`` with type checking and coercion.

    Strings are converted to the annotated type (``"false"`` to ``False``, ``"6"`` to ``6``), so the
    same function serves CLI ``key=value`` pairs and YAML mappings.
    """
    prefix = f"{where}: " if where else ""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(
            f"{prefix}unknown key {unknown[0]!r}; valid keys: {', '.join(sorted(fields)) or '(none)'}"
        )
    kwargs = {key: _coerce(f"{prefix}{key}", value, hints[key]) for key, value in values.items()}
    try:
        return cls(**kwargs)
    except ValueError as exc:  # __post_init__ validation
        raise ConfigError(f"{prefix}{exc}") from None


def config_to_dict(config: Any) -> dict[str, Any]:
    """A JSON-serialisable dict of a config dataclass."""
    return dataclasses.asdict(config)


def parse_key_values(pairs: list[str] | tuple[str, ...], *, option: str) -> dict[str, str]:
    """Split ``["a=1", "b=x"]`` into a dict; malformed items raise :class:`ConfigError`."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option}: expected KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out
