"""The core protocol is six methods: an environment with only those runs rollouts, passes
``check_env`` (which names what it lacks), and every capability consumer says what is missing."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pytest

from arlkit.analysis import matched_states, replay_states
from arlkit.analysis.errors import error_states_analysis
from arlkit.envs import (
    ActionSpace,
    Env,
    MissingCapability,
    Oracle,
    ParsedAction,
    PromptText,
    Snapshot,
    StateKey,
    StepResult,
    Task,
    list_envs,
    make,
)
from arlkit.envs.capabilities import (
    action_quality,
    can_inject_errors,
    has_snapshots,
    inject_error,
    state_key_of,
)
from arlkit.envs.checker import CAPABILITIES, EnvCheckError, check_env
from arlkit.envs.protocol import CORE_METHODS
from arlkit.policies import PolicyError, Reply, Request, make_policy
from arlkit.rollout import make_jobs, run_rollouts
from arlkit.rollout.prompts import system_prompt


class Counter:
    """The smallest environment: count up to the task's target with ``inc``."""

    name, t_max = "counter", 6

    def __init__(self) -> None:
        self.count, self.target = 0, 0

    def tasks(self, split: str, n: int) -> list[Task]:
        offset = 0 if split == "train" else 100
        return [Task(f"{split}-{i}", {"target": 1 + (offset + i) % 4, "split": split}) for i in range(n)]

    def reset(self, task: Task, seed: int) -> str:
        self.count, self.target = 0, int(task.payload["target"])
        return self.render()

    def parse_action(self, reply: str) -> ParsedAction:
        found = re.findall(r"<action>(.*?)</action>", reply, flags=re.DOTALL)
        if len(found) != 1 or not found[0].strip():
            return ParsedAction(None, "write exactly one <action>...</action>")
        return ParsedAction(found[0].strip(), None, True)

    def step(self, action: str) -> StepResult:
        if action != "inc":
            return StepResult(f"Invalid action {action[:20]!r}.\n{self.render()}", 0.0, False, False, False)
        self.count += 1
        solved = self.count == self.target
        return StepResult(self.render(), float(solved), solved, solved, True)

    def render(self) -> str:
        return f"count {self.count} of {self.target}"

    def prompt_text(self) -> PromptText:
        return PromptText("Count up to the target.", "The action is inc, for example <action>inc</action>.")


class Echo:
    """Always answers ``inc``."""

    name = "echo"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        return [Reply("<think>up</think><action>inc</action>") for _ in requests]


def test_core_protocol_has_six_methods() -> None:
    assert len(CORE_METHODS) <= 6
    assert set(CORE_METHODS) == {"tasks", "reset", "parse_action", "step", "render", "prompt_text"}
    env = Counter()
    assert isinstance(env, Env)
    assert not any(isinstance(env, c.protocol) for c in CAPABILITIES)


@pytest.mark.parametrize("name", list_envs(plugins=False))  # plugins: their own tests (tests/integrations)
def test_builtin_envs_keep_their_capabilities_and_prompt_text(name: str) -> None:
    env = make(name)
    assert isinstance(env, Env) and has_snapshots(env)
    env.reset(env.tasks("test", 1)[0], 0)
    text = env.prompt_text()
    assert isinstance(text, PromptText) and text.instruction.strip() and "<action>" in text.action_format


def test_a_core_only_env_passes_the_checker_and_the_report_names_what_it_lacks() -> None:
    report = check_env(Counter())
    assert not report.problems and not report.missing_core and report.checks
    assert set(report.lacking) == {c.name for c in CAPABILITIES}
    assert not report.has("Oracle") and not report.has("Snapshot")
    text = str(report)
    assert text == report.summary()
    assert "core Env: complete" in text
    assert "[no ] Oracle" in text and "[no ] ActionSpace" in text and "[no ] Snapshot" in text
    assert "random policy (needs ActionSpace)" in text
    assert "the random policy" in text and "SFT relabelling" in text  # what each capability unlocks
    full = check_env("frozenlake")
    assert full.has("Oracle") and full.has("StateKey") and full.has("Snapshot") and not full.has("StepQuality")


def test_a_missing_core_method_is_named() -> None:
    class NoPrompt(Counter):
        prompt_text = None  # type: ignore[assignment]

    with pytest.raises(EnvCheckError, match=r"missing core method\(s\) of Env: prompt_text\(\)") as caught:
        check_env(NoPrompt())
    assert caught.value.report is not None and caught.value.report.missing_core == ["prompt_text()"]
    assert "MISSING prompt_text()" in str(caught.value.report)

    class NoRender:
        name, t_max = "bare", 3

    with pytest.raises(EnvCheckError, match=r"tasks\(\), reset\(\), parse_action\(\), step\(\), render\(\), prompt_text\(\)"):
        check_env(NoRender())  # type: ignore[arg-type]


def test_a_core_only_env_runs_rollouts() -> None:
    env = Counter()
    tasks = env.tasks("test", 3)
    trajectories = run_rollouts(Counter, make_jobs(tasks, 2, 5, seed=0), Echo())
    assert [t.success_turn for t in trajectories] == [int(t.payload["target"]) for t in tasks for _ in range(2)]
    assert all(turn.state == "" for t in trajectories for turn in t.turns)  # no state keys recorded
    assert state_key_of(env) == ""


def test_prompt_text_goes_into_the_system_prompt_unchanged() -> None:
    seen: list[Request] = []

    class Recording(Echo):
        def generate(self, requests: Sequence[Request]) -> list[Reply]:
            seen.extend(requests)
            return super().generate(requests)

    env = Counter()
    run_rollouts(Counter, make_jobs(env.tasks("test", 1), 1, 3, seed=0), Recording())
    text = env.prompt_text()
    expected = system_prompt("counter", text.instruction, text.action_format, budget=3, completed=0, budget_mode="announced")
    assert seen[0].messages[0]["content"] == expected


def test_capability_consumers_raise_missing_capability() -> None:
    env = Counter()
    task = env.tasks("test", 1)[0]
    trajectory = run_rollouts(Counter, make_jobs([task], 1, 3, seed=0), Echo())[0]
    env.reset(task, 0)
    assert not isinstance(env, (StateKey, Snapshot, Oracle, ActionSpace))
    with pytest.raises(MissingCapability, match="no state_key and no snapshot/restore"):
        replay_states(env, task, trajectory)  # type: ignore[arg-type]
    with pytest.raises(MissingCapability, match="cannot score actions"):
        action_quality(env, "inc", 3)  # type: ignore[arg-type]
    assert not can_inject_errors(env)  # type: ignore[arg-type]
    with pytest.raises(MissingCapability, match="no oracle"):
        inject_error(env, np.random.default_rng(0), 3)  # type: ignore[arg-type]
    with pytest.raises(MissingCapability):
        matched_states(Echo(), Echo(), Counter, {task.task_id: task}, [trajectory], [trajectory])  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="finite action set"):
        make_policy("random").generate([Request([], 0, 0, env)])
    with pytest.raises(PolicyError, match="oracle"):
        make_policy("oracle").generate([Request([], 0, 0, env)])


def test_error_analysis_skips_what_needs_snapshots() -> None:
    env = Counter()
    task = env.tasks("test", 1)[0]
    trajectories = run_rollouts(Counter, make_jobs([task], 2, 3, seed=0), Echo())
    result = error_states_analysis(Echo(), Echo(), Counter, {task.task_id: task}, trajectories, trajectories)  # type: ignore[arg-type]
    assert not result.states and result.correction.controlled is None
    assert any("snapshot/restore" in note and "skipped" in note for note in result.notes)
