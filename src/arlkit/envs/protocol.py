"""The core contract every arlkit environment follows: :class:`Env`, six methods.

An environment is a small, Gymnasium-like object driven by *text*: ``reset`` puts it on a task,
``step`` takes the action text the model wrote, and every result says whether the action was valid.
Turn budgets are not the environment's business: the rollout engine counts turns and stops a
trajectory when its budget is spent (an invalid action still consumes a turn).

Everything else an environment may offer (an oracle, a finite action set, state keys and
snapshots, step quality, error injection, ...) is an optional capability: a small Protocol in
:mod:`arlkit.envs.capabilities`, which the code that needs it checks for. :func:`arlkit.envs.checker.check_env`
lists what an environment has and what each capability unlocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

__all__ = ["CORE_METHODS", "Env", "ParsedAction", "PromptText", "StepResult", "Task"]


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


class PromptText(NamedTuple):
    """What :meth:`Env.prompt_text` returns; the rollout engine puts both into the system prompt
    (``TASK-SPECIFIC INSTRUCTION:`` and ``ACTION FORMAT:``, see :mod:`arlkit.rollout.prompts`).

    Attributes:
        instruction: the task-specific instruction (rules, legend, goal).
        action_format: the admissible actions and how to write them.
    """

    instruction: str
    action_format: str


@runtime_checkable
class Env(Protocol):
    """A text environment. One instance runs one trajectory at a time.

    Optional methods the engine uses where an environment has them are capabilities
    (:mod:`arlkit.envs.capabilities`): ``close()`` when a trajectory ends, ``set_budget(T)`` before
    each reset, and the oracle, snapshot and step-quality methods of the analyses.

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

    def prompt_text(self) -> PromptText:
        """The environment's part of the system prompt for the current task (called after
        ``reset``): its instruction (rules, legend, goal) and its action format (the admissible
        actions and how to write them)."""
        ...


CORE_METHODS: tuple[str, ...] = ("tasks", "reset", "parse_action", "step", "render", "prompt_text")
"""The methods every :class:`Env` defines (besides the attributes ``name`` and ``t_max``)."""
