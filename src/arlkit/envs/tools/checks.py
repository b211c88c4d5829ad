"""Binding, executing and checking tool calls (docs/environments_sql_tools.md, "Checks per user turn").

Per user turn with a non-empty ground truth, the ground-truth calls and the model's calls run on
separate instances that started from the same state; the turn passes when

- **state check**: every public attribute of every API instance is equal on both sides, and
- **response check**: the ground-truth results appear, in order, as a subsequence of the model's
  results of that turn (extra model calls are allowed as long as the state still matches).

A turn whose ground truth is empty passes only when the model made no call in it (irrelevance).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arlkit.envs.tools.api_base import ArgumentError, ToolSpec, check_arguments, public_state
from arlkit.envs.tools.calls import Call, format_call

__all__ = ["BoundCall", "TurnCheck", "bind", "check_turn", "execute", "is_subsequence", "state_differences"]


@dataclass(frozen=True)
class BoundCall:
    """A call checked against its tool's signature.

    Attributes:
        api: the API class that owns the tool.
        name: the tool name.
        arguments: the arguments the caller gave, by name (converted to the parameter types).
        canonical: the call with every parameter (defaults filled in), in signature order; two
            calls with the same canonical text do the same thing.
    """

    api: str
    name: str
    arguments: Mapping[str, Any]
    canonical: str


def bind(call: Call, specs: Mapping[str, ToolSpec]) -> BoundCall:
    """Check ``call`` against the available tools; raises ``ArgumentError`` naming the problem."""
    spec = specs.get(call.name)
    if spec is None:
        available = ", ".join(sorted(specs))
        raise ArgumentError(f"unknown function {call.name!r}; the available functions are: {available}")
    arguments = check_arguments(spec, call.args, dict(call.kwargs))
    full = {p.name: arguments.get(p.name, p.default) for p in spec.params}
    return BoundCall(spec.api, spec.name, arguments, format_call(spec.name, full))


def execute(instances: Mapping[str, Any], call: BoundCall) -> Any:
    """Run ``call`` on its API instance; an exception inside a tool becomes an error result."""
    try:
        return getattr(instances[call.api], call.name)(**call.arguments)
    except Exception as exc:  # tools are written not to raise; this is the last line of defence
        return {"error": f"{call.name}: internal error ({type(exc).__name__})"}


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def state_differences(model: Mapping[str, Any], truth: Mapping[str, Any]) -> list[str]:
    """``Api.attribute`` for every public attribute that differs between the two sides."""
    out = []
    for api in sorted(truth):
        a, b = public_state(model[api]), public_state(truth[api])
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b or _canon(a[key]) != _canon(b[key]):
                out.append(f"{api}.{key}")
    return out


def is_subsequence(needle: Sequence[Any], haystack: Sequence[Any]) -> bool:
    """Whether ``needle`` appears in ``haystack`` in order (not necessarily contiguous)."""
    it = iter(_canon(h) for h in haystack)
    return all(any(_canon(n) == h for h in it) for n in needle)


@dataclass(frozen=True)
class TurnCheck:
    """The verdict on one user turn: ``passed`` and, when it failed, why."""

    passed: bool
    reason: str = ""


def check_turn(
    model: Mapping[str, Any],
    truth: Mapping[str, Any],
    model_results: Sequence[Any],
    truth_results: Sequence[Any],
    n_truth_calls: int,
    n_model_calls: int,
) -> TurnCheck:
    """Apply the irrelevance, state and response checks to one finished user turn."""
    if n_truth_calls == 0:
        if n_model_calls:
            return TurnCheck(False, f"this request needed no function call, but {n_model_calls} were made")
        return TurnCheck(True)
    diff = state_differences(model, truth)
    if diff:
        return TurnCheck(False, f"the resulting state differs from the expected one in {', '.join(diff)}")
    if not is_subsequence(truth_results, model_results):
        return TurnCheck(False, "the results the request needed were not all obtained (in order)")
    return TurnCheck(True)
