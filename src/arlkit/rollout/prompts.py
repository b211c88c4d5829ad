"""The budget-aware prompt (SPEC §3, after RT Table 2) and the chat history shown to the model.

The system prompt is rebuilt before every action with the turn counters. In ``announced`` mode it
states the total, completed and remaining turns; in ``hidden`` mode every budget statement is left
out and nothing else changes. The wording is part of arlkit's results: keep it stable
(``PROMPT_VERSION`` is recorded in every run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from arlkit.policies.protocol import Message

__all__ = ["BUDGET_MODES", "PROMPT_VERSION", "PromptConfig", "build_messages", "system_prompt"]

PROMPT_VERSION = "arlkit-budget-prompt-v1"
BUDGET_MODES = ("announced", "hidden")
BudgetMode = Literal["announced", "hidden"]


@dataclass(frozen=True)
class PromptConfig:
    """How prompts are built.

    Attributes:
        budget_mode: ``announced`` states the turn budget and counters; ``hidden`` does not.
        history: ``None`` shows the full chat; an integer h shows only the last h
            (action, observation) pairs after the first observation (ARLArena uses h = 2).
    """

    budget_mode: BudgetMode = "announced"
    history: int | None = None

    def __post_init__(self) -> None:
        if self.budget_mode not in BUDGET_MODES:
            raise ValueError(f"budget_mode must be one of {', '.join(BUDGET_MODES)}, got {self.budget_mode!r}")
        if self.history is not None and self.history < 1:
            raise ValueError(f"history must be >= 1 (or None for the full chat), got {self.history}")


def system_prompt(
    env_name: str,
    instruction: str,
    action_format: str,
    *,
    budget: int,
    completed: int,
    budget_mode: BudgetMode,
) -> str:
    """The system prompt before action number ``completed + 1``.

    Args:
        env_name: the environment's name as shown to the model.
        instruction: the task-specific instruction (``Env.instruction()``).
        action_format: the task-specific action format (``Env.action_format()``).
        budget: the trajectory's turn budget T.
        completed: turns already completed.
        budget_mode: ``announced`` or ``hidden``.
    """
    if budget_mode == "announced":
        remaining = budget - completed
        head = (
            f"You are an agent acting in the {env_name} environment under a finite interaction budget. "
            "One turn is one action from you followed by one observation from the environment.\n"
            f"Turn budget: {budget} turns in total, {completed} completed, {remaining} remaining.\n"
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
    system: str,
    observations: Sequence[str],
    replies: Sequence[str],
    history: int | None = None,
) -> list[Message]:
    """The chat shown to the model before its next reply.

    Args:
        system: the system prompt for this turn.
        observations: observations so far, the first one included (``len(replies) + 1`` items).
        replies: the model's earlier replies, one per completed turn.
        history: ``None`` for the full chat, else keep the first observation and only the last
            ``history`` (reply, observation) pairs.
    """
    if len(observations) != len(replies) + 1:
        raise ValueError("need exactly one more observation than replies")
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": observations[0]}]
    start = 0 if history is None else max(0, len(replies) - history)
    for i in range(start, len(replies)):
        messages.append({"role": "assistant", "content": replies[i]})
        messages.append({"role": "user", "content": observations[i + 1]})
    return messages
