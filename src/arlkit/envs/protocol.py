"""The environment contract every arlkit environment follows.

An environment is a small, Gymnasium-like object driven by *text*: ``reset`` puts it on a task,
``step`` takes the action text the model wrote, and every result says whether the action was valid.
Turn budgets are not the environment's business: the rollout engine counts turns and stops a
trajectory when its budget is spent (an invalid action still consumes a turn).

The oracle (exact action values, optimal actions, shortest solution length) is a separate, optional
capability: an environment that has one also satisfies :class:`Oracle`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["ActionSpace", "BudgetHeadroom", "Env", "Oracle", "ParsedAction", "StepResult", "Task", "has_oracle"]


@dataclass(frozen=True)
class Task:
    """One instance of an environment (a FrozenLake map, a SQL question, ...).

    Attributes:
        task_id: stable identifier, unique within the environment's task space; derived from the
            content so that the same task always gets the same id.
        payload: JSON-serialisable description from which ``Env.reset`` rebuilds the task.
    """

    task_id: str
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepResult:
    """What one ``Env.step`` returns.

    Attributes:
        observation: human-readable text shown to the agent next.
        reward: scalar reward of this step (success reward on the final step; 0 otherwise).
        done: the episode has ended (success, failure state, or an explicit submit).
        success: the task was solved by this step.
        valid: the action was admissible; an invalid action leaves the state unchanged.
    """

    observation: str
    reward: float
    done: bool
    success: bool
    valid: bool


@dataclass(frozen=True)
class ParsedAction:
    """The action extracted from one model reply.

    Attributes:
        action: the action text to execute, or ``None`` when nothing usable was found.
        error: why no action could be used (``None`` when ``action`` is set).
        strict_format: the whole reply matched ``<think>...</think><action>...</action>`` (think
            optional) with exactly one tag of each; a lenient parse may execute an action yet flag
            the format as not strict, which the trainer may penalise.
    """

    action: str | None
    error: str | None = None
    strict_format: bool = False


@runtime_checkable
class Env(Protocol):
    """A text environment. One instance runs one trajectory at a time.

    Attributes:
        name: registry name (``"frozenlake"``).
        t_max: the task family's full turn budget T_max.
    """

    name: str
    t_max: int

    def tasks(self, split: str, n: int) -> list[Task]:
        """The first ``n`` tasks of ``split`` (``"train"`` or ``"test"``), deterministic for the
        environment's config. Train and test are disjoint by content. Raises ``ValueError`` when the
        split has fewer than ``n`` distinct tasks."""
        ...

    def reset(self, task: Task, seed: int) -> str:
        """Start ``task``; ``seed`` drives any environment randomness (slippery moves). Returns the
        first observation."""
        ...

    def parse_action(self, reply: str) -> ParsedAction:
        """Extract the action from a raw model reply. Must never raise, whatever the reply."""
        ...

    def step(self, action: str) -> StepResult:
        """Execute one parsed action. Unknown or inadmissible actions return ``valid=False`` with an
        observation saying why, and leave the state unchanged. Must never raise on any string."""
        ...

    def render(self) -> str:
        """The current state as the agent sees it (used after an unparsable reply)."""
        ...

    def instruction(self) -> str:
        """The task-specific instruction of the prompt (rules, legend, goal)."""
        ...

    def action_format(self) -> str:
        """The action-format section of the prompt (the admissible actions and how to write them)."""
        ...

    def state_key(self) -> Hashable:
        """A hashable key of the full environment state (anchor states, matched states)."""
        ...

    def snapshot(self) -> Any:
        """An opaque copy of the full state, RNG included; ``restore`` brings it back exactly."""
        ...

    def restore(self, snapshot: Any) -> None:
        """Return to a state captured by ``snapshot``."""
        ...


@runtime_checkable
class Oracle(Protocol):
    """Exact knowledge of an environment, from its current state.

    ``remaining`` is the number of turns left including the one about to be taken.
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


def has_oracle(env: object) -> bool:
    """Whether ``env`` offers the optional oracle capability."""
    return isinstance(env, Oracle)
