"""Typed configs: frozen dataclasses are the single place where defaults live.

``build_config`` turns loose ``key=value`` input (a CLI, a YAML file) into a dataclass instance,
rejecting unknown keys, values of the wrong type and non-finite numbers with one clear message.
:func:`check_number` states a field's valid range once, in the dataclass's ``__post_init__``;
:func:`read_yaml` reads a YAML config file strictly (UTF-8, no duplicate keys) and
:func:`check_model_dir` checks that a path is a loadable model directory before any work starts.

The one loader of every command's config (``arlkit eval``, ``train``, ``sft``): :func:`load_config`
reads a YAML file whose nested mappings are the nested sections and applies dotted ``key=value``
overrides (``optim.lr=3e-4``, ``env.args.size=5``, ``prompt.history=0``). :class:`EnvSpec` is the
``env`` section every config shares; the one parser of budget settings is :mod:`arlkit.budgets`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

__all__ = [
    "ConfigError",
    "EnvSpec",
    "RunError",
    "build_config",
    "check_model_dir",
    "check_number",
    "config_diff",
    "config_from_dict",
    "config_to_dict",
    "config_to_plain",
    "expand_shorthands",
    "load_config",
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


def _brief(value: Any, limit: int = 120) -> str:
    """``repr(value)`` cut to ``limit`` characters: error messages stay one short line, whatever was given."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


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
        raise ValueError(f"{name}: must be {wanted}, got {_brief(value)}")


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
        raise ConfigError(errors[0] if errors else f"{name}: invalid value {_brief(value)}")
    if origin is typing.Literal:
        choices = typing.get_args(annotation)
        for choice in choices:
            if value == choice or (isinstance(value, str) and str(choice) == value):
                return choice
        raise ConfigError(f"{name}: {_brief(value)} is not one of {', '.join(map(str, choices))}")
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
        raise ConfigError(f"{name}: expected true or false, got {_brief(value)}")
    if annotation is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected an integer, got {_brief(value)}")
        if isinstance(value, int):
            return value
        try:
            return int(str(value))
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {_brief(value)}") from None
    if annotation is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected a number, got {_brief(value)}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {_brief(value)}") from None
        if not math.isfinite(number):
            # NaN and infinities pass every range check written as a comparison; no field takes them.
            raise ConfigError(f"{name}: expected a finite number, got {_brief(value)}")
        return number
    if annotation is str:
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{name}: expected a string, got {_brief(value)}")
        return str(value)
    if callable(getattr(annotation, "from_setting", None)):  # a value type written as text (a Budget)
        return annotation.from_setting(value)  # its errors name the setting
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


def expand_shorthands(config: Any) -> None:
    """For a frozen config's ``__post_init__``: a string given for a section whose type has a ``SHORTHAND``
    field becomes that section holding the string there (``env="sokoban"``, ``model="runs/bc/final"``), as
    in YAML and ``key=value`` overrides."""
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        tp, value = hints.get(f.name), getattr(config, f.name)
        if isinstance(value, str) and _is_dataclass_type(tp) and getattr(tp, "SHORTHAND", None):
            object.__setattr__(config, f.name, tp(**{tp.SHORTHAND: value}))


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


YAML_MAX_DEPTH = 64
"""Nesting levels a YAML document may have (deeper ones are refused before Python's recursion limit)."""
YAML_MAX_NODES = 100_000
"""Nodes a YAML document may expand to, an alias counting every node it stands for each time it is
used: a document of aliases of aliases (an "alias bomb") is refused before its value exists."""


def _yaml_refusal(problem: str, mark: Any) -> yaml.composer.ComposerError:
    return yaml.composer.ComposerError(None, None, problem, mark)


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with its nesting bounded by :data:`YAML_MAX_DEPTH` and the size its aliases
    expand to by :data:`YAML_MAX_NODES`; a recursive alias (a node holding itself) is refused."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > YAML_MAX_DEPTH:
                raise _yaml_refusal(f"nested more than {YAML_MAX_DEPTH} levels deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None:
            _expanded_size(node, 1, {}, set())
        return node


def _expanded_size(node: Any, level: int, known: dict[int, tuple[int, int]], open_: set[int]) -> tuple[int, int]:
    """``(nodes, levels)`` that the composed YAML ``node`` at nesting ``level`` expands to, an alias being
    the same node object again (``known`` memoises by id, so each distinct node is walked once); raises
    past :data:`YAML_MAX_NODES` or :data:`YAML_MAX_DEPTH` (aliases nest too), or for a node holding itself."""
    if id(node) in open_:
        raise _yaml_refusal("an alias refers to a node that holds it (a recursive alias)", node.start_mark)
    if id(node) not in known:
        if level > YAML_MAX_DEPTH:
            raise _yaml_refusal(f"nested more than {YAML_MAX_DEPTH} levels deep (through its aliases)", node.start_mark)
        open_.add(id(node))
        children = node.value if isinstance(node, yaml.SequenceNode) else (
            [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else [])
        total, height = 1, 1
        for child in children:
            nodes, levels = _expanded_size(child, level + 1, known, open_)
            total, height = total + nodes, max(height, levels + 1)
            if total > YAML_MAX_NODES:
                raise _yaml_refusal(f"expands to more than {YAML_MAX_NODES} values (through its aliases)",
                                    node.start_mark)
        open_.discard(id(node))
        known[id(node)] = (total, height)
    total, height = known[id(node)]
    if level + height - 1 > YAML_MAX_DEPTH:
        raise _yaml_refusal(f"nested more than {YAML_MAX_DEPTH} levels deep (through its aliases)", node.start_mark)
    return total, height


class _StrictLoader(_BoundedLoader):
    """:class:`_BoundedLoader` that refuses a mapping holding the same key twice (PyYAML keeps the last)."""

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


def parse_yaml(text: str, *, where: str, unique_keys: bool = True) -> Any:
    """Parse YAML ``text`` strictly: safe types only, no duplicate keys (unless not ``unique_keys``),
    nesting and alias expansion bounded (:data:`YAML_MAX_DEPTH`, :data:`YAML_MAX_NODES`). The one YAML
    reader of arlkit; ``where`` names the source in the one-line :class:`ConfigError` raised for bad
    input (it never holds the document's values)."""
    try:
        return yaml.load(text, Loader=_StrictLoader if unique_keys else _BoundedLoader)  # noqa: S506 - SafeLoader subclasses
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


# -- the sections every config shares ------------------------------------------------------------------


@dataclass(frozen=True)
class EnvSpec:
    """The ``env`` section of a config: a registered environment and its config overrides. In YAML
    ``env: {name: frozenlake, args: {size: 5}}``; a bare name (``env: sokoban``) is short for ``{name:
    sokoban}`` and an override ``env=sokoban`` sets ``env.name`` only."""

    SHORTHAND: ClassVar[str] = "name"  # the field a bare string sets (config_from_dict)

    name: str = "frozenlake"
    """Registered environment (``arlkit.envs.list_envs()``)."""
    args: dict[str, Any] = field(default_factory=dict)
    """Environment config overrides, e.g. ``{size: 5, t_max: 32, task_set: budget_sensitive}``."""


# -- the loader: YAML files and dotted key=value overrides ---------------------------------------------


def _is_dataclass_type(tp: Any) -> bool:
    """A config section's type: a dataclass that is not a value type written as text (``from_setting``)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp) and not hasattr(tp, "from_setting")


def _field_default(cls: type, name: str) -> Any:
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return None


def _shallow(instance: Any) -> dict[str, Any]:
    return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}


def config_from_dict(cls: type[C], data: Mapping[str, Any], *, where: str = "") -> C:
    """Build ``cls`` from a nested mapping (nested dataclass fields from nested mappings; a partial
    section overrides the field's own default, unless its class builds it from the mapping alone with a
    ``from_section`` classmethod); a string for a section with a ``SHORTHAND`` field sets that field; a
    dotted key (``sandbox.memory_mb``) sets a field of a section."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or cls.__name__}: expected a mapping, got {type(data).__name__}")
    if any("." in str(key) for key in data):
        nested: dict[str, Any] = {}
        for key, value in data.items():
            _set_dotted(nested, str(key), dict(value) if isinstance(value, Mapping) else value, cls)
        data = nested
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in data.items():
        tp = hints.get(key)
        name = f"{where}.{key}" if where else str(key)
        if tp is not None and _is_dataclass_type(tp):
            if isinstance(value, str) and getattr(tp, "SHORTHAND", None):
                value = {tp.SHORTHAND: value}
            if isinstance(value, tp):
                values[key] = value
            elif isinstance(value, Mapping) and hasattr(tp, "from_section"):
                values[key] = tp.from_section(value, where=name)  # a section that builds itself (AlgoConfig)
            elif isinstance(value, Mapping):
                base = _field_default(cls, key)
                merged = {**(_shallow(base) if base is not None else {}), **value}
                values[key] = config_from_dict(tp, merged, where=name)
            else:
                raise ConfigError(f"{name}: expected a mapping of {tp.__name__} fields, got {_brief(value)}")
        elif tp is not None and typing.get_origin(tp) is dict and value is not None and not isinstance(value, Mapping):
            raise ConfigError(f"{name}: expected a mapping, got {_brief(value)}")
        else:
            values[key] = value
    return build_config(cls, values, where=where)


def config_to_plain(config: Any) -> Any:
    """A config as YAML/JSON-friendly nested dicts and lists (tuples become lists, a value type written as
    text its ``setting()``)."""
    if callable(getattr(config, "setting", None)) and not isinstance(config, type):
        return config.setting()
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {f.name: config_to_plain(getattr(config, f.name)) for f in dataclasses.fields(config)}
    if isinstance(config, (list, tuple)):
        return [config_to_plain(v) for v in config]
    if isinstance(config, Mapping):
        return {str(k): config_to_plain(v) for k, v in config.items()}
    return config


def _field_type(cls: Any, part: str) -> Any:
    """The annotation of field ``part`` of the dataclass ``cls`` (None when there is none)."""
    return typing.get_type_hints(cls).get(part) if _is_dataclass_type(cls) else None


def _set_dotted(data: dict[str, Any], key: str, value: Any, cls: Any = None) -> None:
    parts = key.split(".")
    node, tp = data, cls
    for part in parts[:-1]:
        tp = _field_type(tp, part)
        child = node.get(part)
        if isinstance(child, str) and getattr(tp, "SHORTHAND", None):
            child = node[part] = {tp.SHORTHAND: child}  # env: sokoban, then env.args.size=3
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"{key}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def load_config(cls: type[C], path: str | Path | None = None, overrides: Mapping[str, Any] | None = None,
                *, parse_values: bool = True) -> C:
    """Read a YAML file (optional; strict: :func:`read_yaml`) and apply dotted ``key=value`` overrides on
    top. String values are parsed as YAML scalars (``3e-4``, ``null``; a mapping only for a section or a
    mapping field) unless ``parse_values`` is False (flags: the field's type converts them). A string for
    a section with a shorthand field sets that field (``env=sokoban``: ``env.name``). Raises ConfigError."""
    data: dict[str, Any] = {}
    if path is not None:
        loaded = read_yaml(path)
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of config keys")
        data = loaded
    for key, value in (overrides or {}).items():
        tp: Any = cls
        for part in key.split("."):
            tp = _field_type(tp, part)
        parsed = value
        if isinstance(value, str) and parse_values:
            parsed = parse_yaml(value, where=f"override {key}")
            if isinstance(parsed, (dict, list)) and not (_is_dataclass_type(tp) or typing.get_origin(tp) is dict):
                parsed = value
        if getattr(tp, "SHORTHAND", None) and not isinstance(parsed, Mapping):
            key = f"{key}.{tp.SHORTHAND}"
        _set_dotted(data, key, parsed, cls)
    return config_from_dict(cls, data)


def config_diff(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``key: old -> new`` lines for every leaf that differs between two plain configs."""
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, "<unset>"), new.get(key, "<unset>")
        name = f"{prefix}{key}"
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            lines += config_diff(a, b, prefix=f"{name}.")
        elif a != b:
            lines.append(f"{name}: {a!r} -> {b!r}")
    return lines
