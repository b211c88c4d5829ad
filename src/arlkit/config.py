"""Typed configs: frozen dataclasses are the single place where defaults live.

``build_config`` turns loose ``key=value`` input (a CLI, a YAML file) into a dataclass instance,
rejecting unknown keys, values of the wrong type and non-finite numbers with one clear message.
:func:`check_number` states a field's valid range once, in the dataclass's ``__post_init__``;
:func:`read_yaml` reads a YAML config file strictly (UTF-8, no duplicate keys) and
:func:`check_model_dir` checks that a path is a loadable model directory before any work starts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

__all__ = [
    "ConfigError",
    "RunError",
    "build_config",
    "check_model_dir",
    "check_number",
    "config_to_dict",
    "parse_key_values",
    "parse_yaml",
    "read_yaml",
]

C = TypeVar("C")


class ConfigError(ValueError):
    """A config key or value is not acceptable; the message names the field and the valid choices."""


class RunError(RuntimeError):
    """A run cannot go on for a reason outside its config (no usable checkpoint, ...); the CLI prints
    the message as one line and exits with code 1."""


def check_number(
    name: str,
    value: float,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> None:
    """Raise ``ValueError("name: must be ...")`` unless ``value`` is a finite number in the range given
    by the bounds (``gt``: >, ``ge``: >=, ``lt``: <, ``le``: <=)."""
    parts = [f"{op} {bound:g}" for op, bound in ((">", gt), (">=", ge), ("<", lt), ("<=", le)) if bound is not None]
    wanted = "a finite number" + (f" {' and '.join(parts)}" if parts else "")
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = ((gt is None or value > gt) and (ge is None or value >= ge)
              and (lt is None or value < lt) and (le is None or value <= le))  # fmt: skip
    if not ok:
        raise ValueError(f"{name}: must be {wanted}, got {value!r}")


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
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
        if not math.isfinite(number):
            # NaN and infinities pass every range check written as a comparison; no field takes them.
            raise ConfigError(f"{name}: expected a finite number, got {value!r}")
        return number
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
    """Split ``["a=1", "b=x"]`` into a dict; malformed items and a key given twice raise
    :class:`ConfigError`."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option}: expected KEY=VALUE, got {pair!r}")
        if key.strip() in out:
            raise ConfigError(f"{option}: {key.strip()!r} is given twice ({out[key.strip()]!r} and {value.strip()!r})")
        out[key.strip()] = value.strip()
    return out


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping holding the same key twice (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # ``<<: *base`` merges are overridden on purpose
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {first})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for a YAML error: what is wrong and where (PyYAML's own text spans several lines)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"


def parse_yaml(text: str, *, where: str) -> Any:
    """Parse YAML ``text`` strictly (safe types only, no duplicate keys); ``where`` names the source
    in the :class:`ConfigError` raised for bad input."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({_yaml_problem(exc)})") from None


def read_yaml(path: str | Path) -> Any:
    """The content of the YAML file ``path`` (see :func:`parse_yaml`); a missing or unreadable file,
    or one that is not UTF-8, raises :class:`ConfigError` naming it."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return parse_yaml(text, where=str(path))


_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def check_model_dir(path: str | Path, *, field: str) -> Path:
    """``path`` as a Path when it looks like a Hugging Face model directory: a ``config.json`` holding a
    JSON object, a weights file and a tokenizer. Otherwise raise :class:`ConfigError` naming ``field``
    (cheap: nothing is loaded; ``arlkit ... --check`` and every command call it before writing)."""
    where = Path(path).expanduser()
    if not where.exists():
        raise ConfigError(f"{field}: model directory {str(path)!r} does not exist")
    if not where.is_dir():
        raise ConfigError(f"{field}: {str(path)!r} is a file, not a model directory")
    config = where / "config.json"
    try:
        parsed = json.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{field}: {str(path)!r} is not a Hugging Face model directory (no config.json)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{field}: {config} is not a readable JSON file ({exc})") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"{field}: {config} does not hold a JSON object")
    if not any((where / name).is_file() for name in _WEIGHT_FILES) and not any(where.glob("*.safetensors")):
        raise ConfigError(f"{field}: {str(path)!r} holds no model weights ({' or '.join(_WEIGHT_FILES[::2])})")
    if not any((where / name).is_file() for name in _TOKENIZER_FILES):
        raise ConfigError(f"{field}: {str(path)!r} holds no tokenizer ({', '.join(_TOKENIZER_FILES[:2])})")
    return where
