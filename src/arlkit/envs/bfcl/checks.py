"""The verdict on one user turn: BFCL's multi-turn checker, turn by turn (docs/benchmarks.md).

BFCL's ``multi_turn_checker`` walks an entry's turns and stops at the first failure. For a turn
with ground-truth calls it fails when the model made no call in the turn, then applies its own
``state_checker`` (every public attribute of every instance equals the ground truth's after the
turn) and ``response_checker`` (every ground-truth result of the turn appears among the model's
results of *all* turns so far, as an unordered multiset). A turn whose ground truth is empty is not
checked. :func:`check_turn` runs that sequence for one turn, calling BFCL's sub-checkers on the
instances arlkit executed, so a finished entry succeeds exactly when BFCL's checker says
``valid``; the episode ends at the turn where BFCL's checker would stop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arlkit.envs.bfcl.backend import bfcl_module

__all__ = ["TurnCheck", "check_turn"]


@dataclass(frozen=True)
class TurnCheck:
    """The verdict on one user turn: ``passed``, BFCL's ``error_type`` and why, when it failed."""

    passed: bool
    error_type: str = ""
    reason: str = ""


def check_turn(
    turn_index: int,
    n_truth_calls: int,
    model_steps: Sequence[Sequence[str]],
    model_instances: Mapping[str, Any],
    truth_instances: Mapping[str, Any],
    model_results: Sequence[str],
    truth_results: Sequence[str],
) -> TurnCheck:
    """BFCL's checks of turn ``turn_index``.

    Args:
        n_truth_calls: ground-truth calls of this turn.
        model_steps: the model's actions of this turn that made calls, each its call texts.
        model_instances / truth_instances: both sides' instances after this turn.
        model_results: the model's results over all turns so far, in order.
        truth_results: the ground truth's results of this turn.
    """
    if n_truth_calls == 0:
        return TurnCheck(True)
    utils = bfcl_module("eval_checker.multi_turn_eval.multi_turn_utils")
    checker = bfcl_module("eval_checker.multi_turn_eval.multi_turn_checker")
    if not model_steps or utils.is_empty_execute_response(list(model_steps)):
        return TurnCheck(False, "multi_turn:empty_turn_model_response", "no function was called for this request")
    state = checker.state_checker(dict(model_instances), dict(truth_instances))
    if not state["valid"]:
        classes = [c for c in truth_instances if not _same(model_instances[c], truth_instances[c], checker)]
        attributes = sorted(state.get("details", {}).get("differences", {}))
        where = ", ".join(f"{c}.{a}" for c in classes[:1] for a in attributes) or ", ".join(classes)
        return TurnCheck(False, state["error_type"], f"the resulting state differs from the expected one in {where}")
    response = checker.response_checker(list(model_results), list(truth_results), turn_index)
    if not response["valid"]:
        missing = len(response.get("details", {}).get("missing_items", []))
        return TurnCheck(
            False, response["error_type"], f"{missing} result(s) the request needed were not obtained by any call so far"
        )
    return TurnCheck(True)


def _same(model: Any, truth: Any, checker: Any) -> bool:
    valid, _ = checker._compare_instances(model, truth)
    return bool(valid)
