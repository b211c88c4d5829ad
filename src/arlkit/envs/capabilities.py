"""Every optional environment capability, one small runtime-checkable Protocol each.

The core :class:`~arlkit.envs.protocol.Env` has six methods; whatever else an environment offers is
one of these, and the code that needs it checks with ``isinstance`` (or a ``has_...``/``can_...``
helper) and raises :class:`MissingCapability` when it is absent
(:func:`arlkit.envs.checker.check_env` lists what each one unlocks):

- :class:`StateKey` — a hashable key of the current state. Recorded with every turn (loop revisits,
  GiGPO anchor states) and checked when a trajectory is replayed.
- :class:`Snapshot` — ``snapshot``/``restore`` of the full state, RNG included. With
  :class:`StateKey` it lets the step-level analyses rebuild recorded states and branch from them
  (:func:`has_snapshots`, :func:`require_snapshots`).
- :class:`Oracle` — exact action values, optimal actions, shortest solution length, success
  probability from the current state.
- :class:`ActionSpace` — the finite list of admissible actions.
- :class:`BudgetHeadroom` — the exact budget headroom of the current task (docs/metrics.md#budget-headroom).
- :class:`StepQuality` — the quality of one action in the current state, given the remaining
  turns. Also accepted: :class:`ActionScorer`, a remaining-independent ``quality(action)`` (the
  code environment's hidden-test pass rate of a program). Environments with an :class:`Oracle`
  and a finite action set get ``Q*_h(s, a)`` with h the remaining turns and gamma 0.95 (docs/metrics.md#step-quality).
- :class:`ErrorInjector` — put the environment in an *error state* with one harmful action. Also
  accepted: :class:`MutationSource`, an ``error_mutation(rng, program=None)`` returning a mutant
  of the current program that passes fewer tests (the code environment's rule-based mutations);
  the mutant is submitted as the injected action, and only states that already have a program
  qualify. Oracle environments with a finite action set get RT App. B.5's construction (docs/metrics.md#error-states): a random
  action, kept only when it increased the shortest distance to success.
- ``blocking_steps`` — a class attribute, ``True`` when ``reset``/``step`` wait on something slow
  (a sandboxed program run): the rollout engine then runs them in its worker pool, several at once;
  other environments step inline (:func:`steps_block`).
- ``max_sessions`` — an attribute, the most instances of the environment alive at once, for
  environments whose every instance holds a session of a server with a session limit (an OpenEnv
  server): the rollout engine keeps at most that many trajectories alive (it caps
  ``EngineConfig.max_active``); absent or ``None``: no limit (:func:`session_cap`).
- ``splits`` — a class attribute, the task splits ``tasks()`` serves; default ``("train", "test")``.
  A benchmark that is only a test set (``bfcl``) declares ``("test",)`` (:func:`served_splits`).
- :class:`FunctionCalling` — the current task's actions as OpenAI function tools, for backends that call
  tools natively (``--tool-calls native``): the tools to offer, the prompt text for that mode, and the
  action a reply's tool calls stand for (:func:`supports_function_calling`).
- :class:`FailureDetector` — whether a step was a failed call (tool calling). Default: the step was
  invalid, or its observation carries a JSON error object (``{"error": ...}``, how a SQL or tool
  call that ran and failed is reported).
- :class:`SummaryNotes` — lines an evaluation's ``summary.md`` gives about the environment's part of
  the run (alfworld: the games whose planner gave no answer within its limits).

An analysis that needs a capability the environment lacks raises :class:`MissingCapability`; the
CLI reports it and goes on with the analyses that can run.
"""

from __future__ import annotations

import random
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from arlkit.envs.protocol import Env, PromptText, StepResult, Task

__all__ = [
    "ActionScorer",
    "ActionSpace",
    "BudgetHeadroom",
    "ErrorInjector",
    "FailureDetector",
    "FunctionCalling",
    "InjectedError",
    "MissingCapability",
    "MutationSource",
    "Oracle",
    "Snapshot",
    "StateKey",
    "StepQuality",
    "SummaryNotes",
    "action_quality",
    "call_failed",
    "can_inject_errors",
    "has_oracle",
    "has_snapshots",
    "has_step_quality",
    "inject_error",
    "mutation_inject_error",
    "oracle_inject_error",
    "require_snapshots",
    "served_splits",
    "session_cap",
    "state_key_of",
    "steps_block",
    "summary_notes",
    "supports_function_calling",
]


class MissingCapability(RuntimeError):
    """The environment lacks a capability an analysis needs (e.g. no oracle for step quality)."""


@runtime_checkable
class StateKey(Protocol):
    """Optional capability: a key of the current state."""

    def state_key(self) -> Hashable:
        """A hashable key of the full environment state (anchor states, matched states)."""
        ...


@runtime_checkable
class Snapshot(Protocol):
    """Optional capability: copy and bring back the full state."""

    def snapshot(self) -> Any:
        """An opaque copy of the full state, RNG included; ``restore`` brings it back exactly."""
        ...

    def restore(self, snapshot: Any) -> None:
        """Return to a state captured by ``snapshot``."""
        ...


@runtime_checkable
class Oracle(Protocol):
    """Optional capability: exact knowledge of an environment, from its current state.

    ``remaining`` is the number of turns left including the one about to be taken. Where an oracle
    cannot answer in some state (alfworld's planner out of its limits) it says it does not know: no
    optimal actions, no action values, shortest length ``None``, success probability NaN.
    """

    def action_values(self, remaining: int) -> Mapping[str, float]:
        """Q*_h(s, a) with h = ``remaining`` and gamma = 0.95 for every admissible action ``a``."""
        ...

    def optimal_actions(self, remaining: int) -> Sequence[str]:
        """The actions whose value equals the best value (all of them when every value is 0)."""
        ...

    def shortest_solution_length(self) -> int | None:
        """Fewest actions that can solve the task from here, or ``None`` when it cannot be solved."""
        ...

    def success_probability(self, remaining: int) -> float:
        """The best probability any policy has to succeed within ``remaining`` turns from here
        (gamma = 1). For deterministic environments it is 1 when the shortest solution fits, else 0."""
        ...


@runtime_checkable
class ActionSpace(Protocol):
    """Optional capability of environments with a finite action set (the random policy needs it)."""

    def admissible_actions(self) -> Sequence[str]:
        """Every action that is admissible in the current state, in canonical spelling."""
        ...


@runtime_checkable
class BudgetHeadroom(Protocol):
    """Optional capability: the exact budget headroom of the current task (docs/metrics.md#budget-headroom)."""

    def headroom(self, budget: int) -> float:
        """Success probability within ``budget`` of the budget-aware optimum minus that of the
        policy that is optimal for the full budget T_max, from the task's start."""
        ...


@runtime_checkable
class FunctionCalling(Protocol):
    """Optional capability: actions as native tool calls (OpenAI's ``tools`` and ``tool_calls``).

    A reply's tool calls are ``{"id", "name", "arguments"}`` mappings, ``arguments`` the JSON text the
    server sent; a reply that calls nothing is a call list of length 0.
    """

    def function_tools(self) -> list[dict[str, Any]]:
        """The OpenAI chat ``tools`` entries the current state offers (called before every action)."""
        ...

    def function_prompt_text(self) -> PromptText:
        """The instruction and action format of the prompt when actions are native tool calls."""
        ...

    def function_calls_action(self, calls: Sequence[Mapping[str, str]]) -> str:
        """The action (``step``'s argument) that ``calls`` stand for; ``ValueError`` with the reason
        when they stand for none (arguments that are not JSON, say): that reply is an invalid action."""
        ...


@runtime_checkable
class SummaryNotes(Protocol):
    """Optional capability: what an evaluation's ``summary.md`` should say about the environment."""

    def summary_notes(self, tasks: Sequence[Task]) -> list[str]:
        """Markdown lines (``- ...``) about ``tasks`` as this process played them (alfworld: the games
        whose planner gave no answer within its limits); empty when there is nothing to say."""
        ...


def summary_notes(env: object, tasks: Sequence[Task]) -> list[str]:
    """``env.summary_notes(tasks)``, or nothing when ``env`` has no :class:`SummaryNotes`."""
    return list(env.summary_notes(tasks)) if isinstance(env, SummaryNotes) else []


@runtime_checkable
class AnnouncedBudget(Protocol):
    """Optional capability: the environment wants to know the turn budget the agent is told."""

    def set_budget(self, budget: int | None) -> None:
        """Called before each ``reset`` with the announced budget, or ``None`` when budgets are
        hidden (a wrapped environment of a hub that counts turns itself)."""
        ...


@runtime_checkable
class Closable(Protocol):
    """Optional capability: the environment holds something for a trajectory (a live shell
    session, a wrapped environment, a server session)."""

    def close(self) -> None:
        """Release it; idempotent. The rollout engine calls it when each trajectory ends, however
        it ends."""
        ...


def announce_budget(env: object, budget: int | None) -> None:
    """``env.set_budget(budget)`` where ``env`` has :class:`AnnouncedBudget`."""
    if isinstance(env, AnnouncedBudget):
        env.set_budget(budget)


def close_env(env: object) -> None:
    """``env.close()`` where ``env`` has :class:`Closable`."""
    if isinstance(env, Closable):
        env.close()


def supports_function_calling(env: object) -> bool:
    """Whether ``env`` can take its actions as native tool calls (:class:`FunctionCalling`)."""
    return isinstance(env, FunctionCalling)


def has_oracle(env: object) -> bool:
    """Whether ``env`` offers the optional oracle capability."""
    return isinstance(env, Oracle)


def has_snapshots(env: object) -> bool:
    """Whether recorded states of ``env`` can be rebuilt and branched (:class:`StateKey` and
    :class:`Snapshot`), as the step-level analyses need."""
    return isinstance(env, StateKey) and isinstance(env, Snapshot)


def require_snapshots(env: Any, purpose: str = "rebuilding recorded states") -> None:
    """Raise :class:`MissingCapability` unless ``env`` has :func:`has_snapshots`."""
    if not has_snapshots(env):
        missing = [m for m, cap in (("state_key", StateKey), ("snapshot/restore", Snapshot)) if not isinstance(env, cap)]
        raise MissingCapability(
            f"environment {getattr(env, 'name', type(env).__name__)!r} has no {' and no '.join(missing)}: {purpose} needs them"
        )


def state_key_of(env: object) -> str:
    """``str(env.state_key())``, or ``""`` (no key recorded) when ``env`` has no :class:`StateKey`."""
    return str(env.state_key()) if isinstance(env, StateKey) else ""


def served_splits(env: object) -> tuple[str, ...]:
    """The splits ``env.tasks`` serves: its ``splits`` attribute, else train and test."""
    splits = getattr(env, "splits", ("train", "test"))
    return tuple(splits) if isinstance(splits, (tuple, list)) else ("train", "test")


def steps_block(env: object) -> bool:
    """Whether ``env`` declares ``blocking_steps = True`` (its steps wait on a sandbox or other I/O)."""
    return getattr(env, "blocking_steps", False) is True


def session_cap(env: object) -> int | None:
    """``env.max_sessions`` when it is a positive integer (the most instances alive at once: each
    holds a server session), else ``None`` (no limit)."""
    cap = getattr(env, "max_sessions", None)
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1 else None


@runtime_checkable
class StepQuality(Protocol):
    """Optional capability: how good one action is in the current state."""

    def action_quality(self, action: str, remaining: int) -> float:
        """Quality in [0, 1] of taking ``action`` now with ``remaining`` turns left (this one
        included). Must not change the environment's state."""
        ...


@runtime_checkable
class ActionScorer(Protocol):
    """Optional capability: a remaining-independent quality of an action (code: pass rate)."""

    def quality(self, action: str) -> float:
        """Quality in [0, 1] of ``action`` in the current state; must not change the state."""
        ...


@dataclass(frozen=True)
class InjectedError:
    """One harmful step an :class:`ErrorInjector` took.

    Attributes:
        action: the action executed.
        reply: the turn as it appears in the agent's history (the reply text the agent is shown
            as having written).
        result: what the environment returned for it.
        detail: a short description for reports (``"distance 3 -> 5"``, ``"flipped a comparison"``).
    """

    action: str
    reply: str
    result: StepResult
    detail: str


@runtime_checkable
class ErrorInjector(Protocol):
    """Optional capability: put the environment in an error state."""

    def inject_error(self, rng: np.random.Generator, remaining: int) -> InjectedError | None:
        """Take one harmful action from the current state and return it; return ``None`` and leave
        the state unchanged when this attempt did not produce an error state (the analysis then
        tries another state). ``remaining`` counts the injected turn."""
        ...


@runtime_checkable
class MutationSource(Protocol):
    """Optional capability: a harmful edit of the current solution (code: a rule-based mutant)."""

    def error_mutation(self, rng: random.Random, program: str | None = None) -> Any:
        """An object with ``.program`` (the mutant) and ``.description``, or ``None``."""
        ...


@runtime_checkable
class FailureDetector(Protocol):
    """Optional capability: recognise a failed call (tool calling, SQL errors)."""

    def call_failed(self, valid: bool, observation: str) -> bool:
        """Whether a step with this validity and observation was a failed call."""
        ...


def has_step_quality(env: Env) -> bool:
    """Whether :func:`action_quality` can score actions in ``env``."""
    return isinstance(env, (StepQuality, ActionScorer)) or (isinstance(env, Oracle) and isinstance(env, ActionSpace))


def _canonical(action: str) -> str:
    return action.strip().strip(".").casefold()


def action_quality(env: Env, action: str | None, remaining: int) -> float:
    """Quality of ``action`` in ``env``'s current state with ``remaining`` turns left.

    The environment's own :class:`StepQuality` or :class:`ActionScorer` when it has one, else the
    oracle's ``Q*_h(s, a)`` (for environments with a finite action set). A reply with no parsable
    action, or an action the environment does not admit, scores 0: it does not move the task
    forward (and the trainer penalises it as invalid).
    """
    if action is None:
        return 0.0
    if isinstance(env, StepQuality):
        return float(env.action_quality(action, remaining))
    if isinstance(env, ActionScorer):
        return float(env.quality(action))
    if isinstance(env, Oracle) and isinstance(env, ActionSpace):
        values = env.action_values(remaining)
        if action in values:
            return float(values[action])
        wanted = _canonical(action)
        for name, value in values.items():
            if _canonical(name) == wanted:
                return float(value)
        return 0.0
    raise MissingCapability(
        f"environment {env.name!r} cannot score actions (no action_quality, quality, or oracle with a finite action set)"
    )


def _require_undo(env: Env) -> None:
    if not isinstance(env, Snapshot):
        raise MissingCapability(
            f"environment {env.name!r} has no snapshot/restore: error injection undoes harmless attempts with them"
        )


def oracle_inject_error(env: Env, rng: np.random.Generator, remaining: int) -> InjectedError | None:
    """RT App. B.5's error injection for oracle environments: execute one random admissible action; keep the result
    when the shortest solution length grew (or the task became unsolvable) and the episode goes on,
    else restore the state and return ``None``."""
    if not (isinstance(env, Oracle) and isinstance(env, ActionSpace)):
        raise MissingCapability(f"environment {env.name!r} has no oracle with a finite action set and no inject_error")
    _require_undo(env)
    before = env.shortest_solution_length()
    if before is None:
        return None  # already lost: nothing to make worse
    actions = list(env.admissible_actions())
    action = actions[int(rng.integers(len(actions)))]
    snapshot = env.snapshot()
    result = env.step(action)
    after = env.shortest_solution_length()
    if result.valid and not result.done and (after is None or after > before):
        shown = "unsolvable" if after is None else str(after)
        return InjectedError(action, f"<action>{action}</action>", result, f"distance {before} -> {shown}")
    env.restore(snapshot)
    return None


def mutation_inject_error(env: Env, rng: np.random.Generator, remaining: int) -> InjectedError | None:
    """Error injection through :class:`MutationSource`: submit a mutant of the current program that
    passes fewer tests; ``None`` at states without a program, or when no such mutant was found."""
    if not isinstance(env, MutationSource):
        raise MissingCapability(f"environment {env.name!r} has no error_mutation")
    _require_undo(env)
    if getattr(env, "program", None) is None:
        return None  # nothing to break yet (mutating the reference would leak it into the history)
    mutant = env.error_mutation(random.Random(int(rng.integers(2**63))))
    if mutant is None:
        return None
    snapshot = env.snapshot()
    result = env.step(mutant.program)
    if not result.valid or result.done:
        env.restore(snapshot)
        return None
    reply = f"<action>```python\n{mutant.program}\n```</action>"
    return InjectedError(mutant.program, reply, result, str(getattr(mutant, "description", "mutation")))


def inject_error(env: Env, rng: np.random.Generator, remaining: int) -> InjectedError | None:
    """The environment's own :class:`ErrorInjector`, else a :class:`MutationSource` mutant, else
    :func:`oracle_inject_error`."""
    if isinstance(env, ErrorInjector):
        return env.inject_error(rng, remaining)
    if isinstance(env, MutationSource):
        return mutation_inject_error(env, rng, remaining)
    return oracle_inject_error(env, rng, remaining)


def can_inject_errors(env: Env) -> bool:
    """Whether :func:`inject_error` works in ``env`` (the oracle and mutation constructions also
    undo a harmless attempt, so they need :class:`Snapshot`)."""
    if isinstance(env, ErrorInjector):
        return True
    oracle = isinstance(env, Oracle) and isinstance(env, ActionSpace)
    return isinstance(env, Snapshot) and (isinstance(env, MutationSource) or oracle)


_JSON_ERROR = re.compile(r'\{\s*"error"\s*:')


def call_failed(env: Env | None, valid: bool, observation: str) -> bool:
    """The environment's :class:`FailureDetector` verdict, else: the step was invalid or its
    observation carries a JSON error object."""
    if env is not None and isinstance(env, FailureDetector):
        return bool(env.call_failed(valid, observation))
    return not valid or bool(_JSON_ERROR.search(observation or ""))
