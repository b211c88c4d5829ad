"""BFCL's own API classes, built and called as BFCL's multi-turn executor does — without ``eval``.

``bfcl-eval`` (the optional extra ``arlkit[bfcl]``; docs/benchmarks.md) ships the stateful classes
of BFCL's multi-turn categories (file system, math, messages, posts, tickets, trading, travel,
vehicle control). BFCL's executor builds each involved class with no arguments, loads its state
with ``_load_scenario(deepcopy(initial_config[class]), long_context=...)`` (not for the stateless
``MathAPI``), keeps the instances for the whole entry, and evaluates every call string with
``eval``. arlkit builds the instances the same way but never evaluates text: a call arrives parsed
(:mod:`arlkit.envs.bfcl.calls`, literals only) and is dispatched by name to a public method of an
involved instance. Results are rendered as BFCL renders them (a ``str`` unchanged, a ``dict`` as
JSON — ``str()`` if that fails — anything else with ``str()``; an exception as
``Error during execution: <message>``), so the checker compares the same strings BFCL compares.

A name that is not an offered method gets the result BFCL's ``eval`` produces for an undefined
name. Hostile arguments make some of BFCL's code run without bound, in C where nothing inside the
process can stop it (``round_number(number=1, decimal_places=-1000000000)`` builds a power of ten
with a billion digits). So a model's call runs in a worker process with a deadline
(:class:`~arlkit.sandbox.deadline.DeadlinePool`): the called instance travels there and back by
pickle, and a call that runs past the deadline is killed, leaves the instance as it was and gets an
error result. :func:`hazard` refuses the best-known runaways (a big integer power, a decimal square
root or logarithm at millions of digits) at once (docs/benchmarks.md, "Differences from BFCL").
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import math
from collections.abc import Mapping
from typing import Any

from arlkit.config import ConfigError
from arlkit.envs.bfcl.calls import Call
from arlkit.sandbox.deadline import CallFailed, DeadlinePool

__all__ = [
    "BFCL_PIN",
    "INSTALL_HINT",
    "MULTI_TURN_CLASSES",
    "bfcl_module",
    "build_instances",
    "call_strings",
    "execute",
    "format_result",
    "hazard",
    "is_long_context",
    "openai_tools",
    "public_methods",
    "public_state",
]

BFCL_PIN = "bfcl-eval==2026.3.23"
INSTALL_HINT = f"pip install --no-deps {BFCL_PIN} mpmath (or `make install`)"
# bfcl-eval's function-calling helpers (model_handler.utils) import its Java/JavaScript parsers, hence tree-sitter.
FC_INSTALL_HINT = "pip install tree-sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4 tenacity"
# The classes of BFCL's four multi-turn categories, and the module of each in bfcl_eval.
MULTI_TURN_CLASSES = (
    "GorillaFileSystem",
    "MathAPI",
    "MessageAPI",
    "TwitterAPI",
    "TicketAPI",
    "TradingBot",
    "TravelAPI",
    "VehicleControlAPI",
)
# BFCL's executor refuses these method names before evaluating a call.
_REFUSED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
MAX_POWER_DIGITS = 100_000
MAX_PRECISION = 10_000


def bfcl_module(name: str) -> Any:
    """``bfcl_eval.<name>``, or a :class:`ConfigError` naming the install command."""
    try:
        return importlib.import_module(f"bfcl_eval.{name}")
    except ImportError as exc:
        raise ConfigError(f"the bfcl environment needs bfcl-eval ({exc}); {INSTALL_HINT}") from None


def openai_tools(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL's function docs as the ``tools`` BFCL's function-calling handlers send an OpenAI-style chat
    server (bfcl-eval's ``convert_to_tool`` with its Gorilla-to-OpenAPI type mapping)."""
    utils = _fc_utils()
    types = bfcl_module("constants.type_mappings").GORILLA_TO_OPENAPI
    style = bfcl_module("constants.enums").ModelStyle.OPENAI_COMPLETIONS
    return list(utils.convert_to_tool(docs, types, style))


def call_strings(calls: list[Mapping[str, str]]) -> list[str]:
    """The call strings of native tool calls (``{"name", "arguments"}``, the arguments JSON), as BFCL's
    function-calling handlers decode them for execution (bfcl-eval's ``convert_to_function_call``); they
    are parsed as literals afterwards, never evaluated. ``ValueError`` when an argument list is not a
    JSON object."""
    utils = _fc_utils()
    out = []
    for call in calls:
        arguments = call.get("arguments") or "{}"
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments of {call.get('name')!r} are not JSON ({exc.msg})") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"the arguments of {call.get('name')!r} are not a JSON object")
        out.extend(utils.convert_to_function_call([{str(call.get("name")): parsed}]))
    return out


def _fc_utils() -> Any:
    try:
        return importlib.import_module("bfcl_eval.model_handler.utils")
    except ImportError as exc:
        raise ConfigError(f"native tool calls on bfcl need bfcl-eval's function-calling helpers ({exc}); "
                          f"{FC_INSTALL_HINT}") from None


def is_long_context(entry_id: str) -> bool:
    """Whether BFCL loads an entry's scenarios with ``long_context=True`` (its category rule)."""
    category = entry_id.rsplit("_", 1)[0]
    return "long_context" in category or "composite" in category


def build_instances(classes: tuple[str, ...], initial_config: Mapping[str, Any], long_context: bool) -> dict[str, Any]:
    """Fresh instances of ``classes`` with their initial state, built as BFCL's executor builds them."""
    config = bfcl_module("constants.executable_backend_config")
    out = {}
    for name in classes:
        if name not in MULTI_TURN_CLASSES:
            raise ValueError(f"unknown BFCL class {name!r}; valid choices: {', '.join(MULTI_TURN_CLASSES)}")
        instance = getattr(importlib.import_module(config.CLASS_FILE_PATH_MAPPING[name]), name)()
        if name not in config.STATELESS_CLASSES:
            instance._load_scenario(copy.deepcopy(dict(initial_config.get(name, {}))), long_context=long_context)
        out[name] = instance
    return out


def public_methods(instances: Mapping[str, Any]) -> dict[str, str]:
    """``method name -> class name`` over the public methods (a later class wins a shared name, as in BFCL)."""
    table = {}
    for class_name, instance in instances.items():
        for method_name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not method_name.startswith("_"):
                table[method_name] = class_name
    return table


def public_state(instance: Any) -> dict[str, Any]:
    """The attributes BFCL's state checker compares: ``vars()`` without names starting with ``_``."""
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}


def format_result(value: Any) -> str:
    """A call's return value as BFCL's executor records it."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except Exception:  # BFCL falls back to str() for anything json cannot write
            return str(value)
    return str(value)


def _digits(value: Any) -> float:
    return math.log10(abs(value)) if isinstance(value, int) and not isinstance(value, bool) and value else 0.0


def hazard(class_name: str, method: str, arguments: Mapping[str, Any]) -> str | None:
    """Why a call would run BFCL's code without bound, or ``None``; ``arguments`` are bound by name."""
    if class_name != "MathAPI":
        return None
    if method == "power":
        base, exponent = arguments.get("base"), arguments.get("exponent")
        if isinstance(exponent, int) and not isinstance(exponent, bool) and isinstance(base, int):
            if exponent > MAX_POWER_DIGITS or exponent > 0 and exponent * max(_digits(base), 1.0) > MAX_POWER_DIGITS:
                return f"the result would have more than {MAX_POWER_DIGITS} digits"
    if method in ("square_root", "logarithm"):
        precision = arguments.get("precision")
        if isinstance(precision, (int, float)) and not isinstance(precision, bool) and precision > MAX_PRECISION:
            return f"precision above {MAX_PRECISION} digits is refused"
    return None


def _run(instance: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any]:
    """``instance.name(*args, **kwargs)`` as BFCL records its result, and the instance after it."""
    try:
        return format_result(getattr(instance, name)(*args, **kwargs)), instance
    except Exception as exc:  # BFCL records any exception raised by a call as its result
        return f"Error during execution: {exc}", instance


def _warm_classes() -> None:
    """Import every BFCL class in a new worker before its first deadline."""
    for name in MULTI_TURN_CLASSES:
        importlib.import_module(bfcl_module("constants.executable_backend_config").CLASS_FILE_PATH_MAPPING[name])


_CALLS = DeadlinePool(warm=_warm_classes)


def execute(instances: dict[str, Any], methods: Mapping[str, str], call: Call, *,
            timeout_s: float | None = None) -> str:
    """Run one parsed call on the instances and return its result as BFCL records it.

    ``methods`` is the table of callable names (:func:`public_methods`, minus any hidden ones).
    With ``timeout_s`` the call runs in a worker process and its instance in ``instances`` is
    replaced by the one that comes back; past the deadline the call is stopped, the instance stays
    as it was and the result is an error. Without it (the trusted ground truth) it runs here.
    """
    if call.name in _REFUSED:
        return f"Error during execution: Function call {call.name} is not allowed."
    class_name = methods.get(call.name)
    if class_name is None:
        return f"Error during execution: name {call.name!r} is not defined"
    bound = getattr(instances[class_name], call.name)
    kwargs = dict(call.kwargs)
    try:
        named = inspect.signature(bound).bind(*call.args, **kwargs).arguments
    except TypeError:
        named = kwargs
    refused = hazard(class_name, call.name, named)
    if refused is not None:
        return f"Error during execution: arlkit refused {call.name}(): {refused}"
    if timeout_s is None:
        return _run(instances[class_name], call.name, call.args, kwargs)[0]
    try:
        result, instances[class_name] = _CALLS.call(_run, instances[class_name], call.name, call.args, kwargs,
                                                    timeout_s=timeout_s)
    except CallFailed as exc:
        return f"Error during execution: arlkit stopped {call.name}(): {exc}"
    return result
