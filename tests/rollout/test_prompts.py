"""The two prompt profiles: RT Table 2's system prompt and the tiny model's compact one."""

from __future__ import annotations

import pytest

from arlkit.recipes.eval import EvalConfig
from arlkit.rollout.prompts import (
    COMPACT_PROMPT_VERSION,
    PROMPT_VERSION,
    PromptConfig,
    budget_line,
    prompt_version,
    turn_messages,
)


def _chat(prompt: PromptConfig, budget: int = 8, turns: int = 3) -> list[dict]:
    observations = [f"map {i}" for i in range(turns + 1)]
    replies = [f"reply {i}" for i in range(turns)]
    return turn_messages("frozenlake", "INSTRUCTION", "FORMAT", budget=budget, observations=observations,
                         replies=replies, prompt=prompt)  # fmt: skip


def test_compact_announced_states_the_remaining_and_total_budget_before_each_observation() -> None:
    messages = _chat(PromptConfig("announced", history=None, profile="compact"), budget=8, turns=3)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == [f"turns remaining: {8 - i:02d} of 08\nmap {i}" for i in range(4)]
    assert not any("INSTRUCTION" in m["content"] or "FORMAT" in m["content"] for m in messages)


def test_compact_with_history_zero_is_one_message_and_hidden_mode_drops_the_budget() -> None:
    assert _chat(PromptConfig("announced", history=0, profile="compact"), budget=32, turns=5) == [
        {"role": "user", "content": "turns remaining: 27 of 32\nmap 5"}]
    assert _chat(PromptConfig("hidden", history=0, profile="compact"), budget=32, turns=5) == [
        {"role": "user", "content": "map 5"}]


def test_budget_line_is_fixed_width_and_widens_past_99_turns() -> None:
    assert budget_line(8, 3) == "turns remaining: 05 of 08"
    assert budget_line(120, 20) == "turns remaining: 100 of 120"
    assert budget_line(120, 115) == "turns remaining: 005 of 120"


def test_rt_profile_is_unchanged_and_the_versions_tell_the_profiles_apart() -> None:
    messages = _chat(PromptConfig("announced", history=0))
    assert messages[0]["role"] == "system" and "INSTRUCTION" in messages[0]["content"]
    assert "8 turns in total, 3 completed, 5 remaining" in messages[0]["content"]
    assert prompt_version(PromptConfig()) == PROMPT_VERSION
    assert prompt_version(PromptConfig(profile="compact")) == COMPACT_PROMPT_VERSION != PROMPT_VERSION


def test_an_unknown_profile_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="profile must be one of rt, compact"):
        PromptConfig(profile="short")  # type: ignore[arg-type]
