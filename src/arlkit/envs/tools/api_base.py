"""What makes a class a tool API: the ``@tool`` marker, schemas read from signatures and
docstrings, argument checking, and the public state the BFCL state check compares.

An API class has a class attribute ``api_name`` (its name in entries), optional ``bfcl_names``
(BFCL class names whose entries it can run, e.g. ``GorillaFileSystem``), a one-line
``description``, a no-argument constructor giving the default state and ``load_state(config)``
that sets the initial state from an entry's ``initial_config``. Its tools are the methods marked
with :func:`tool`; each has typed parameters and a Google-style docstring whose ``Args:`` section
documents every parameter. A tool never raises on arguments of the right types: problems are
returned as ``{"error": "..."}`` and leave the state unchanged.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, Union

__all__ = [
    "ApiClass",
    "ArgumentError",
    "Param",
    "ToolSpec",
    "api_tools",
    "check_arguments",
    "public_state",
    "tool",
    "tool_specs",
    "type_name",
]

F = TypeVar("F", bound=Callable[..., Any])
ApiClass = type


def tool(fn: F) -> F:
    """Mark a method as a tool the model may call."""
    fn.__arlkit_tool__ = True  # type: ignore[attr-defined]
    return fn


class ArgumentError(ValueError):
    """A call's arguments do not fit the tool's signature; the message says which and why."""


@dataclass(frozen=True)
class Param:
    """One parameter of a tool.

    Attributes:
        name: parameter name.
        annotation: its type (``str``, ``int``, ``float``, ``bool``, ``list[T]``, ``dict[str, T]``,
            a ``Literal[...]`` or ``T | None``).
        description: text from the docstring's ``Args:`` section.
        required: no default value.
        default: the default value when not required.
    """

    name: str
    annotation: Any
    description: str
    required: bool
    default: Any = None


@dataclass(frozen=True)
class ToolSpec:
    """One tool: owning API, name, summary and parameters (in signature order)."""

    api: str
    name: str
    summary: str
    params: tuple[Param, ...]

    def signature(self) -> str:
        """``name(a: str, b: int = 3)``."""
        parts = []
        for p in self.params:
            text = f"{p.name}: {type_name(p.annotation)}"
            if not p.required:
                text += f" = {p.default!r}"
            parts.append(text)
        return f"{self.name}({', '.join(parts)})"

    def render(self) -> str:
        """The signature, the summary and one line per parameter, as shown to the model."""
        lines = [f"{self.signature()}: {self.summary}"]
        lines += [f"    {p.name}: {p.description}" for p in self.params if p.description]
        return "\n".join(lines)

    def json_schema(self) -> dict[str, Any]:
        """A BFCL-style function document."""
        props = {p.name: {"type": type_name(p.annotation), "description": p.description} for p in self.params}
        return {
            "name": self.name,
            "description": self.summary,
            "parameters": {
                "type": "dict",
                "properties": props,
                "required": [p.name for p in self.params if p.required],
            },
        }


def type_name(annotation: Any) -> str:
    """A short, Python-like spelling of a parameter type."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _arg_docs(doc: str) -> tuple[str, dict[str, str]]:
    lines = inspect.cleandoc(doc or "").splitlines()
    summary = lines[0].strip() if lines else ""
    docs: dict[str, str] = {}
    in_args, current = False, None
    for line in lines[1:]:
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:"):
            in_args = True
            continue
        if in_args and stripped.endswith(":") and not line.startswith(" "):
            break  # the next section (Returns: ...)
        if in_args and stripped:
            if line.startswith("    ") and not line.startswith("        ") and ":" in stripped:
                current, _, text = stripped.partition(":")
                current = current.strip()
                docs[current] = text.strip()
            elif current is not None:
                docs[current] += " " + stripped
    return summary, docs


_SPECS: dict[type, dict[str, ToolSpec]] = {}


def tool_specs(cls: type) -> dict[str, ToolSpec]:
    """``name -> ToolSpec`` of every tool of API class ``cls`` (cached)."""
    cached = _SPECS.get(cls)
    if cached is not None:
        return cached
    specs: dict[str, ToolSpec] = {}
    for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction):
        if not getattr(fn, "__arlkit_tool__", False):
            continue
        hints = typing.get_type_hints(fn)
        summary, docs = _arg_docs(fn.__doc__ or "")
        params = []
        for p in list(inspect.signature(fn).parameters.values())[1:]:
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                raise TypeError(f"{cls.__name__}.{name}: tools take named parameters only")
            if p.name not in docs:
                raise TypeError(f"{cls.__name__}.{name}: parameter {p.name!r} is not documented")
            required = p.default is inspect.Parameter.empty
            params.append(Param(p.name, hints[p.name], docs[p.name], required, None if required else p.default))
        specs[name] = ToolSpec(getattr(cls, "api_name", cls.__name__), name, summary, tuple(params))
    _SPECS[cls] = specs
    return specs


def _check_value(where: str, value: Any, annotation: Any, depth: int = 0) -> Any:
    """``value`` converted to ``annotation`` (int -> float, tuple -> list) or ArgumentError."""
    if depth > 8:
        raise ArgumentError(f"{where}: value nested too deeply")
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin is Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return value
        raise ArgumentError(f"{where}: expected one of {', '.join(repr(a) for a in args)}, got {value!r:.60}")
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_value(where, value, arg, depth + 1)
            except ArgumentError as exc:
                errors.append(str(exc))
        raise ArgumentError(errors[0] if errors else f"{where}: unexpected value {value!r:.60}")
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ArgumentError(f"{where}: expected a list, got {type(value).__name__}")
        inner = args[0] if args else Any
        return [_check_value(f"{where}[{i}]", v, inner, depth + 1) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ArgumentError(f"{where}: expected a dict, got {type(value).__name__}")
        inner = args[1] if len(args) == 2 else Any
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ArgumentError(f"{where}: dict keys must be strings, got {k!r:.40}")
            out[k] = _check_value(f"{where}[{k!r}]", v, inner, depth + 1)
        return out
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ArgumentError(f"{where}: expected True or False, got {value!r:.60}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ArgumentError(f"{where}: expected an integer, got {value!r:.60}")
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ArgumentError(f"{where}: expected a number, got {value!r:.60}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ArgumentError(f"{where}: expected a string, got {value!r:.60}")
    raise ArgumentError(f"{where}: unsupported parameter type {annotation!r}")  # pragma: no cover


def check_arguments(spec: ToolSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Bind positional and keyword arguments to ``spec``'s parameters and check their types.

    Returns the explicitly given arguments by name (defaults are left to the method), converted
    where the type allows (an integer for a float parameter becomes a float). Raises
    :class:`ArgumentError` naming the problem.
    """
    names = [p.name for p in spec.params]
    if len(args) > len(names):
        raise ArgumentError(f"{spec.name}() takes {len(names)} argument(s) but {len(args)} were given")
    bound: dict[str, Any] = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key not in names:
            valid = ", ".join(names) or "none"
            raise ArgumentError(f"{spec.name}() got an unexpected argument {key!r}; its parameters are: {valid}")
        if key in bound:
            raise ArgumentError(f"{spec.name}() got two values for argument {key!r}")
        bound[key] = value
    for p in spec.params:
        if p.required and p.name not in bound:
            raise ArgumentError(f"{spec.name}() is missing the required argument {p.name!r}")
    by_name = {p.name: p for p in spec.params}
    return {k: _check_value(f"{spec.name}(): argument {k!r}", v, by_name[k].annotation) for k, v in bound.items()}


def public_state(instance: object) -> dict[str, Any]:
    """Every public attribute of an API instance (BFCL's state check compares these)."""
    return {k: v for k, v in sorted(vars(instance).items()) if not k.startswith("_")}


def api_tools(instance: object) -> dict[str, Callable[..., Any]]:
    """``name -> bound method`` of every tool of an API instance."""
    return {name: getattr(instance, name) for name in tool_specs(type(instance))}
