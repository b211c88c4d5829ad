"""The budget-aware prompt (RT App. A.3 and Table 2; docs/concepts.md, "Prompts") and the chat history shown to the model.

Two profiles. ``rt`` (the default, for real LLMs): the system prompt is rebuilt before every action
with the turn counters; in ``announced`` mode it states the total, completed and remaining turns; in
``hidden`` mode every budget statement is left out and nothing else changes. ``compact`` (for the
embedded tiny model): no system prompt; each observation is preceded by one fixed-width budget line
(``turns remaining: 05 of 08``) in announced mode, and is shown bare in hidden mode. The wording is
part of arlkit's results: keep it stable (:func:`prompt_version` is recorded in every run).

With native tool calls (``tool_calls="native"``, the ``rt`` profile) the environment's actions are
offered as function tools: the system prompt's action format is the environment's function-calling
text, a reply that called tools is an assistant message with its ``tool_calls``, and the observation
after it comes back as ``tool`` messages, one per call (OpenAI's chat format).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from arlkit.policies.protocol import Message

__all__ = [
    "BUDGET_MODES", "COMPACT_PROMPT_VERSION", "PROMPT_PROFILES", "PROMPT_VERSION", "TOOL_CALL_MODES", "PromptConfig",
    "budget_line", "build_messages", "prompt_version", "system_prompt", "turn_messages",
]

PROMPT_VERSION = "arlkit-budget-prompt-v1"
"""The version of the ``rt`` profile's wording."""
COMPACT_PROMPT_VERSION = "arlkit-compact-prompt-v1"
"""The version of the ``compact`` profile's wording."""
NATIVE_TOOLS_SUFFIX = "+native-tools"
"""Appended to the ``rt`` profile's version when actions are native tool calls."""
BUDGET_MODES = ("announced", "hidden")
PROMPT_PROFILES = ("rt", "compact")
TOOL_CALL_MODES = ("text", "native")
BudgetMode = Literal["announced", "hidden"]
CounterPosition = Literal["system", "observation"]
Profile = Literal["rt", "compact"]
ToolCallMode = Literal["text", "native"]


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
        tool_calls: ``text``: the model writes its action in the reply (``<action>...</action>``);
            ``native``: the environment's actions are offered as function tools and the model calls
            them (environments with the ``FunctionCalling`` capability, e.g. ``bfcl``; a backend that
            sends tools, ``openai:``; the ``rt`` profile).
    """

    budget_mode: BudgetMode = "announced"
    history: int | None = None
    counters: CounterPosition = "system"
    profile: Profile = "rt"
    tool_calls: ToolCallMode = "text"

    def __post_init__(self) -> None:
        if self.profile not in PROMPT_PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROMPT_PROFILES)}, got {self.profile!r}")
        if self.budget_mode not in BUDGET_MODES:
            raise ValueError(f"budget_mode must be one of {', '.join(BUDGET_MODES)}, got {self.budget_mode!r}")
        if self.counters not in ("system", "observation"):
            raise ValueError(f"counters must be system or observation, got {self.counters!r}")
        if self.history is not None and self.history < 0:
            raise ValueError(f"history must be >= 0 (or None for the full chat), got {self.history}")
        if self.tool_calls not in TOOL_CALL_MODES:
            raise ValueError(f"tool_calls must be one of {', '.join(TOOL_CALL_MODES)}, got {self.tool_calls!r}")
        if self.tool_calls == "native" and self.profile != "rt":
            raise ValueError("native tool calls need the rt profile (the compact profile states no action format)")


def prompt_version(prompt: PromptConfig) -> str:
    """The version string of ``prompt``'s profile (recorded in every run next to its config)."""
    if prompt.profile == "compact":
        return COMPACT_PROMPT_VERSION
    return PROMPT_VERSION + (NATIVE_TOOLS_SUFFIX if prompt.tool_calls == "native" else "")


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
    native_tools: bool = False,
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
        native_tools: actions are native tool calls: the action format is ``action_format`` alone
            (the environment's function-calling text), without the ``<action>`` tags.
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
    tags = "" if native_tools else "Reply as <think>your reasoning</think><action>your action</action>. "
    return f"{head}\n\nTASK-SPECIFIC INSTRUCTION:\n{instruction}\n\nACTION FORMAT:\n{tags}{action_format}"


def build_messages(
    system: str | None,
    observations: Sequence[str],
    replies: Sequence[str],
    history: int | None = None,
    calls: Sequence[Sequence[Mapping[str, str]]] | None = None,
) -> list[Message]:
    """The chat shown to the model before its next reply.

    Args:
        system: the system prompt for this turn (``None``: no system message).
        observations: observations so far, the first one included (``len(replies) + 1`` items).
        replies: the model's earlier replies, one per completed turn.
        history: ``None`` for the full chat; h >= 1 keeps the first observation and only the last
            h (reply, observation) pairs; 0 keeps only the current observation.
        calls: native tool calls: the tool calls of each reply (``{"id", "name", "arguments"}``).
            A reply with calls is an assistant message carrying them, and the observation after it
            one ``tool`` message per call: the first holds the observation, the others point to it.
    """
    if len(observations) != len(replies) + 1:
        raise ValueError("need exactly one more observation than replies")
    if calls is not None and len(calls) != len(replies):
        raise ValueError("need the tool calls of every reply")
    head: list[Message] = [] if system is None else [{"role": "system", "content": system}]
    if history == 0:
        return [*head, {"role": "user", "content": observations[-1]}]
    messages: list[Message] = [*head, {"role": "user", "content": observations[0]}]
    start = 0 if history is None else max(0, len(replies) - history)
    for i in range(start, len(replies)):
        made = list(calls[i]) if calls is not None else []
        if not made:
            messages.append({"role": "assistant", "content": replies[i]})
            messages.append({"role": "user", "content": observations[i + 1]})
            continue
        messages.append({"role": "assistant", "content": replies[i] or None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in made
        ]})
        for k, call in enumerate(made):
            shown = observations[i + 1] if k == 0 else "(The results of this turn's calls are in its first tool message.)"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": shown})
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
    calls: Sequence[Sequence[Mapping[str, str]]] | None = None,
) -> list[Message]:
    """The whole chat before the next action: the one place that lays out a turn's prompt (the
    engine, the analyses and the trainer all call it).

    Args:
        env_name, instruction, action_format: the environment's prompt texts (its function-calling
            texts with native tool calls).
        budget: the trajectory's turn budget T.
        observations: observations so far, the first one included.
        replies: the earlier replies (one fewer than observations).
        prompt: budget mode, history window, counter position, profile and tool-call mode.
        calls: with native tool calls, the tool calls each earlier reply made.
    """
    completed = len(replies)
    if prompt.profile == "compact":
        shown = list(observations)
        if prompt.budget_mode == "announced":
            shown = [f"{budget_line(budget, i)}\n{obs}" for i, obs in enumerate(observations)]
        return build_messages(None, shown, replies, prompt.history)
    native = prompt.tool_calls == "native"
    system = system_prompt(
        env_name, instruction, action_format, budget=budget, completed=completed,
        budget_mode=prompt.budget_mode, counters=prompt.counters, native_tools=native,
    )  # fmt: skip
    shown = list(observations)
    if prompt.budget_mode == "announced" and prompt.counters == "observation":
        shown = [f"{obs}\n{counter_note(budget, i)}" for i, obs in enumerate(observations)]
    return build_messages(system, shown, replies, prompt.history, calls if native else None)
