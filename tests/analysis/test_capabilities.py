"""The optional capabilities through which code and tool environments plug into the analyses."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from arlkit.envs.capabilities import (
    ActionScorer,
    MutationSource,
    action_quality,
    call_failed,
    can_inject_errors,
    has_step_quality,
    inject_error,
)
from arlkit.envs import ParsedAction, PromptText, StepResult, Task


@dataclass
class Mutant:
    program: str
    description: str


class ProgramEnv:
    """A stand-in for the code environment: a 'program' is a number; its quality (pass rate) is
    number / 10; the mutation source subtracts 3; reaching 10 solves the task."""

    name, t_max = "program", 5

    def __init__(self) -> None:
        self.program: str | None = None

    def reset(self, task: Task, seed: int) -> str:
        self.program = None
        return "submit a program"

    def parse_action(self, reply: str) -> ParsedAction:
        return ParsedAction(reply.strip() or None, None if reply.strip() else "empty")

    def step(self, action: str) -> StepResult:
        if not action.isdigit():
            return StepResult("Invalid action", 0.0, False, False, False)
        self.program = action
        solved = int(action) >= 10
        return StepResult(f"passed {min(int(action), 10)}/10", float(solved), solved, solved, True)

    def quality(self, action: str) -> float:
        return min(int(action), 10) / 10 if action.isdigit() else 0.0

    def error_mutation(self, rng: random.Random, program: str | None = None) -> Mutant | None:
        base = program or self.program
        return None if base is None or int(base) < 3 else Mutant(str(int(base) - 3), "minus three")

    def render(self) -> str:
        return str(self.program)

    def prompt_text(self) -> PromptText:
        return PromptText("write a big number", "digits")

    def state_key(self) -> str:
        return f"p@{self.program}"

    def snapshot(self) -> Any:
        return {"program": self.program}

    def restore(self, snapshot: Any) -> None:
        self.program = snapshot["program"]


def test_code_like_quality_and_mutations() -> None:
    env = ProgramEnv()
    assert isinstance(env, ActionScorer) and isinstance(env, MutationSource)
    assert has_step_quality(env) and can_inject_errors(env)  # type: ignore[arg-type]
    env.reset(Task("t"), 0)
    assert action_quality(env, "7", 3) == 0.7 and action_quality(env, None, 3) == 0.0  # type: ignore[arg-type]
    assert inject_error(env, np.random.default_rng(0), 3) is None  # type: ignore[arg-type]  # no program yet
    env.step("8")
    injected = inject_error(env, np.random.default_rng(0), 3)  # type: ignore[arg-type]
    assert injected is not None and injected.action == "5" and env.program == "5"
    assert injected.detail == "minus three" and injected.result.observation == "passed 5/10"
    assert "```python\n5\n```" in injected.reply


def test_failure_detector_hook() -> None:
    class Strict:
        def call_failed(self, valid: bool, observation: str) -> bool:
            return "warning" in observation

    assert call_failed(Strict(), True, "a warning")  # type: ignore[arg-type]
    assert not call_failed(Strict(), False, "fine")  # type: ignore[arg-type]  # the env's verdict wins
