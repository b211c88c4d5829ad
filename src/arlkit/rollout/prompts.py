"""The budget-aware prompt (RT App. A.3 and Table 2; docs/concepts.md, "Prompts") and the chat history shown to the model.

Two profiles. ``rt`` (the default, for real LLMs): the system prompt is rebuilt before every action
with the turn counters; in ``announced`` mode it states the total, completed and remaining turns; in
``hidden`` mode every budget statement is left out and nothing else changes. ``compact`` (for the
embedded tiny model): no system prompt; each observation is preceded by one fixed-width budget line
(``turns remaining: 05 of 08``) in announced mode, and is shown bare in hidden mode. The wording is
part of arlkit's results: keep it stable (:func:`prompt_version` is recorded in every run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from arlkit.policies.protocol import Message

__all__ = [
    "BUDGET_MODES", "COMPACT_PROMPT_VERSION", "PROMPT_PROFILES", "PROMPT_VERSION", "PromptConfig", "budget_line",
    "build_messages", "prompt_version", "system_prompt", "turn_messages",
]

PROMPT_VERSION = "arlkit-budget-prompt-v1"
"""The version of the ``rt`` profile's wording."""
COMPACT_PROMPT_VERSION = "arlkit-compact-prompt-v1"
"""The version of the ``compact`` profile's wording."""
BUDGET_MODES = ("announced", "hidden")
PROMPT_PROFILES = ("rt", "compact")
BudgetMode = Literal["announced", "hidden"]
CounterPosition = Literal["system", "observation"]
Profile = Literal["rt", "compact"]


@dataclass(frozen=True)
class PromptConfig:
    """How prompts are built.

    Attributes:
        budget_mode: ``announced`` states the turn budget and counters; ``hidden`` does not.
        history: ``None`` shows the full chat; an integer h >= 1 shows the first observation and
            only the last h (action, observation) pairs (ARLArena uses h = 2); 0 shows only the
            current observation (enough where it is the whole state, as in FrozenLake and Sokoban).
        counters: where announced mode puts the completed/remaining counters. ``system`` (RT
            Table 2): in the system prompt, rebuilt before every action. ``observation``: the system
            prompt states the total budget once and each observation ends with the counters as they
            were when it was shown, so earlier messages never change and a backend can reuse its
            cache of the whole history. (Ignored by the ``compact`` profile, whose budget line always
            precedes each observation.)
        profile: ``rt`` (RT Table 2's system prompt with the environment's instruction and action
            format) or ``compact`` (no system prompt, so neither the task nor the reply format is
            stated, only a one-line budget statement before each observation: for a model that learns
            both by cloning, like the embedded tiny one, whose FrozenLake step rows then cost ~58 tokens
            with the reply instead of ~290). Train and evaluate with the same profile.
    """

    budget_mode: BudgetMode = "announced"
    history: int | None = None
    counters: CounterPosition = "system"
    profile: Profile = "rt"

    def __post_init__(self) -> None:
        if self.profile not in PROMPT_PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROMPT_PROFILES)}, got {self.profile!r}")
        if self.budget_mode not in BUDGET_MODES:
            raise ValueError(f"budget_mode must be one of {', '.join(BUDGET_MODES)}, got {self.budget_mode!r}")
        if self.counters not in ("system", "observation"):
            raise ValueError(f"counters must be system or observation, got {self.counters!r}")
        if self.history is not None and self.history < 0:
            raise ValueError(f"history must be >= 0 (or None for the full chat), got {self.history}")


def prompt_version(prompt: PromptConfig) -> str:
    """The version string of ``prompt``'s profile (recorded in every run next to its config)."""
    return COMPACT_PROMPT_VERSION if prompt.profile == "compact" else PROMPT_VERSION


def budget_line(budget: int, completed: int) -> str:
    """The ``compact`` profile's budget statement: remaining and total turns, zero-padded to a fixed
    width (two digits, more for budgets of 100 turns or more) so every line has the same shape."""
    width = max(2, len(str(budget)))
    return f"turns remaining: {budget - completed:0{width}d} of {budget:0{width}d}"


def system_prompt(
    env_name: str,
    instruction: str,
    action_format: str,
    *,
    budget: int,
    completed: int,
    budget_mode: BudgetMode,
    counters: CounterPosition = "system",
) -> str:
    """The system prompt before action number ``completed + 1``.

    Args:
        env_name: the environment's name as shown to the model.
        instruction: the task-specific instruction (``Env.prompt_text().instruction``).
        action_format: the task-specific action format (``Env.prompt_text().action_format``).
        budget: the trajectory's turn budget T.
        completed: turns already completed.
        budget_mode: ``announced`` or ``hidden``.
        counters: ``system`` states the completed and remaining turns here; ``observation`` leaves
            them to the observations (see :class:`PromptConfig`).
    """
    if budget_mode == "announced":
        remaining = budget - completed
        if counters == "system":
            count_line = f"Turn budget: {budget} turns in total, {completed} completed, {remaining} remaining.\n"
        else:
            count_line = (
                f"Turn budget: {budget} turns in total; every observation ends with the number of turns "
                "completed and remaining.\n"
            )
        head = (
            f"You are an agent acting in the {env_name} environment under a finite interaction budget. "
            "One turn is one action from you followed by one observation from the environment.\n"
            f"{count_line}"
            "Follow the task-specific instruction below. In every turn output exactly one action in the "
            "required format; never put several actions in one turn. When the budget is spent the "
            "episode ends: no extra turns will be granted."
        )
    else:
        head = (
            f"You are an agent acting in the {env_name} environment. "
            "One turn is one action from you followed by one observation from the environment.\n"
            "Follow the task-specific instruction below. In every turn output exactly one action in the "
            "required format; never put several actions in one turn."
        )
    return (
        f"{head}\n\nTASK-SPECIFIC INSTRUCTION:\n{instruction}\n\n"
        f"ACTION FORMAT:\nReply as <think>your reasoning</think><action>your action</action>. {action_format}"
    )


def build_messages(
    system: str | None,
    observations: Sequence[str],
    replies: Sequence[str],
    history: int | None = None,
) -> list[Message]:
    """The chat shown to the model before its next reply.

    Args:
        system: the system prompt for this turn (``None``: no system message).
        observations: observations so far, the first one included (``len(replies) + 1`` items).
        replies: the model's earlier replies, one per completed turn.
        history: ``None`` for the full chat; h >= 1 keeps the first observation and only the last
            h (reply, observation) pairs; 0 keeps only the current observation.
    """
    if len(observations) != len(replies) + 1:
        raise ValueError("need exactly one more observation than replies")
    head: list[Message] = [] if system is None else [{"role": "system", "content": system}]
    if history == 0:
        return [*head, {"role": "user", "content": observations[-1]}]
    messages: list[Message] = [*head, {"role": "user", "content": observations[0]}]
    start = 0 if history is None else max(0, len(replies) - history)
    for i in range(start, len(replies)):
        messages.append({"role": "assistant", "content": replies[i]})
        messages.append({"role": "user", "content": observations[i + 1]})
    return messages


def counter_note(budget: int, completed: int) -> str:
    """The line appended to an observation when counters follow observations."""
    return f"[Turns: {completed} completed, {budget - completed} remaining of {budget}]"


def turn_messages(
    env_name: str,
    instruction: str,
    action_format: str,
    *,
    budget: int,
    observations: Sequence[str],
    replies: Sequence[str],
    prompt: PromptConfig,
) -> list[Message]:
    """The whole chat before the next action: the one place that lays out a turn's prompt (the
    engine, the analyses and the trainer all call it).

    Args:
        env_name, instruction, action_format: the environment's prompt texts.
        budget: the trajectory's turn budget T.
        observations: observations so far, the first one included.
        replies: the earlier replies (one fewer than observations).
        prompt: budget mode, history window and counter position.
    """
    completed = len(replies)
    if prompt.profile == "compact":
        shown = list(observations)
        if prompt.budget_mode == "announced":
            shown = [f"{budget_line(budget, i)}\n{obs}" for i, obs in enumerate(observations)]
        return build_messages(None, shown, replies, prompt.history)
    system = system_prompt(
        env_name, instruction, action_format, budget=budget, completed=completed,
        budget_mode=prompt.budget_mode, counters=prompt.counters,
    )  # fmt: skip
    shown = list(observations)
    if prompt.budget_mode == "announced" and prompt.counters == "observation":
        shown = [f"{obs}\n{counter_note(budget, i)}" for i, obs in enumerate(observations)]
    return build_messages(system, shown, replies, prompt.history)
