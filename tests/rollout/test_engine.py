"""The batched rollout engine, prompts and parsing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from arlkit.envs import make
from arlkit.envs.checker import JUNK_REPLIES
from arlkit.policies import CONTEXT_LENGTH_EXCEEDED, Reply, Request, make_policy
from arlkit.rollout import EngineConfig, PromptConfig, build_messages, make_jobs, parse_tagged_action, run_rollouts
from arlkit.rollout.records import ENDINGS, Trajectory


def _factory(**config: object):
    return lambda: make("frozenlake", **config)


def _summary(trajs):  # type: ignore[no-untyped-def]
    return [(t.task_id, t.sample, t.success_turn, [turn.action for turn in t.turns]) for t in trajs]


def test_outcomes_do_not_depend_on_batch_composition() -> None:
    tasks = _factory()().tasks("test", 6)
    jobs = make_jobs(tasks, 4, 20, seed=5)
    policy = make_policy("noisy-oracle:0.4")
    wide = run_rollouts(_factory(), jobs, policy, engine=EngineConfig(max_active=256))
    narrow = run_rollouts(_factory(), jobs, policy, engine=EngineConfig(max_active=3))
    assert _summary(wide) == _summary(narrow)
    other_seed = run_rollouts(_factory(), make_jobs(tasks, 4, 20, seed=6), policy)
    assert _summary(other_seed) != _summary(wide)


@dataclass
class Scripted:
    """Answers from a fixed list of replies and records every request."""

    replies: Sequence[str]
    name: str = "scripted"
    seen: list[Request] = field(default_factory=list)

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        self.seen.extend(requests)
        return [Reply(self.replies[r.turn % len(self.replies)]) for r in requests]


def test_junk_replies_are_invalid_turns_that_consume_the_budget() -> None:
    tasks = _factory()().tasks("test", 2)
    policy = Scripted(JUNK_REPLIES)
    trajs = run_rollouts(_factory(), make_jobs(tasks, 1, len(JUNK_REPLIES), 0), policy)
    for traj in trajs:
        assert len(traj.turns) == len(JUNK_REPLIES) and not traj.success
        assert not any(turn.valid for turn in traj.turns)
        assert all("Invalid action" in turn.observation for turn in traj.turns)


def test_announced_prompt_carries_the_counters_and_hidden_does_not() -> None:
    tasks = _factory(slippery=False)().tasks("test", 1)
    policy = Scripted(["<action>Up</action>"])
    run_rollouts(_factory(slippery=False), make_jobs(tasks, 1, 3, 0), policy, PromptConfig("announced"))
    systems = [r.messages[0]["content"] for r in policy.seen]
    for t, text in enumerate(systems):
        assert f"3 turns in total, {t} completed, {3 - t} remaining" in text
    assert [r.remaining for r in policy.seen] == [3, 2, 1]
    hidden = Scripted(["<action>Up</action>"])
    run_rollouts(_factory(slippery=False), make_jobs(tasks, 1, 3, 0), hidden, PromptConfig("hidden"))
    for request in hidden.seen:
        text = request.messages[0]["content"]
        assert "budget" not in text.lower() and "remaining" not in text and request.remaining is None
    # apart from the budget statements, the task sections are identical
    assert systems[0].split("TASK-SPECIFIC INSTRUCTION:")[1] == hidden.seen[0].messages[0]["content"].split("TASK-SPECIFIC INSTRUCTION:")[1]


def test_history_window_keeps_the_first_observation_and_last_pairs() -> None:
    msgs = build_messages("sys", ["o0", "o1", "o2", "o3"], ["r1", "r2", "r3"], history=2)
    assert [m["content"] for m in msgs] == ["sys", "o0", "r2", "o2", "r3", "o3"]
    full = build_messages("sys", ["o0", "o1"], ["r1"])
    assert [m["role"] for m in full] == ["system", "user", "assistant", "user"]
    # history 0: the current observation only (the first turn's current observation is the first one)
    assert [m["content"] for m in build_messages("sys", ["o0", "o1", "o2"], ["r1", "r2"], history=0)] == ["sys", "o2"]
    assert [m["content"] for m in build_messages("sys", ["o0"], [], history=0)] == ["sys", "o0"]
    with pytest.raises(ValueError, match="history"):
        PromptConfig(history=-1)
    with pytest.raises(ValueError):
        build_messages("sys", ["o0"], ["r1"])


def test_backend_errors_end_only_their_trajectory() -> None:
    @dataclass
    class Failing:
        name: str = "failing"

        def generate(self, requests: Sequence[Request]) -> list[Reply]:
            return [
                Reply("", error="HTTP 503 after 3 retries") if r.seed % 2 else Reply("<action>Down</action>")
                for r in requests
            ]

    tasks = _factory()().tasks("test", 4)
    trajs = run_rollouts(_factory(), make_jobs(tasks, 4, 5, 0), Failing())
    failed = [t for t in trajs if t.error]
    ok = [t for t in trajs if not t.error]
    assert failed and ok and len(trajs) == 16
    assert all(t.error == "HTTP 503 after 3 retries" and not t.turns for t in failed)
    assert all(t.ended_by == "policy_error" for t in failed)
    assert all(t.turns and t.ended_by != "policy_error" for t in ok)


def test_a_full_context_window_ends_the_trajectory_as_a_failure_not_an_error() -> None:
    @dataclass
    class Window:
        """Two turns fit; the third prompt does not."""

        name: str = "window"

        def generate(self, requests: Sequence[Request]) -> list[Reply]:
            return [Reply("", finish_reason=CONTEXT_LENGTH_EXCEEDED) if r.turn == 2 else Reply("<action>Up</action>")
                    for r in requests]

    tasks = _factory(slippery=False)().tasks("test", 3)
    trajs = run_rollouts(_factory(slippery=False), make_jobs(tasks, 2, 10, 0), Window())
    assert len(trajs) == 6
    for traj in trajs:
        assert traj.ended_by == CONTEXT_LENGTH_EXCEEDED and traj.error is None
        assert len(traj.turns) == 2 and not traj.success and traj.success_turn is None


def test_every_trajectory_records_why_it_ended() -> None:
    env = _factory()()
    tasks = env.tasks("test", 8)
    trajs = run_rollouts(_factory(), make_jobs(tasks, 4, 12, 0), make_policy("random"))
    seen = {t.ended_by for t in trajs}
    assert seen <= set(ENDINGS) and {"terminal", "budget"} <= seen  # slippery random walks fall in holes
    for traj in trajs:
        assert (traj.ended_by == "success") == traj.success
        if traj.ended_by == "budget":
            assert len(traj.turns) == 12
        elif not traj.success:
            assert traj.ended_by == "terminal"  # a hole (possibly on the last turn)


@pytest.mark.parametrize(
    "reply,action,strict",
    [
        ("<think>go</think><action>Left</action>", "Left", True),
        ("  <think>go</think>\n<action> Left </action>\n", "Left", True),
        ("<action>Left</action>", "Left", False),
        ("I move <action>Left</action> now", "Left", False),
        ("<ACTION>Up</ACTION>", "Up", False),
        ("<action>Left</action><action>Right</action>", None, False),
        ("<action>Left", None, False),
        ("<action>  </action>", None, False),
        ("", None, False),
        ("<think>a</think><think>b</think><action>Up</action>", "Up", False),
    ],
)
def test_parsing(reply: str, action: str | None, strict: bool) -> None:
    parsed = parse_tagged_action(reply)
    assert parsed.action == action
    assert parsed.strict_format == strict
    assert (parsed.error is None) == (action is not None)


def test_success_turn_and_return_are_recorded() -> None:
    env = make("frozenlake", slippery=False)
    tasks = env.tasks("test", 5)
    trajs = run_rollouts(_factory(slippery=False), make_jobs(tasks, 1, 70, 0), make_policy("oracle"))
    for traj, task in zip(trajs, tasks):
        env.reset(task, 0)
        assert traj.success and traj.success_turn == env.shortest_solution_length() == len(traj.turns)
        assert traj.to_json()["return"] == 1.0
        assert all(turn.strict_format for turn in traj.turns)


def test_counters_after_observations_keep_earlier_messages_unchanged() -> None:
    tasks = _factory(slippery=False)().tasks("test", 1)
    policy = Scripted(["<action>Up</action>"])
    prompt = PromptConfig("announced", counters="observation")
    run_rollouts(_factory(slippery=False), make_jobs(tasks, 1, 3, 0), policy, prompt)
    chats = [list(r.messages) for r in policy.seen]
    # every chat extends the previous one: the prefix a backend cached is still valid
    for before, after in zip(chats, chats[1:]):
        assert after[: len(before)] == before
    assert "3 turns in total; every observation ends" in chats[0][0]["content"]
    assert chats[2][-1]["content"].endswith("[Turns: 2 completed, 1 remaining of 3]")
    assert chats[0][1]["content"].endswith("[Turns: 0 completed, 3 remaining of 3]")


@pytest.mark.parametrize("counters", ["system", "observation"])
def test_each_turn_records_the_remaining_budget_its_prompt_announced(counters: str) -> None:
    tasks = _factory()().tasks("test", 3)
    policy = Scripted(["<action>Up</action>", "junk", "<action>Left</action>"])
    trajs = run_rollouts(_factory(), make_jobs(tasks, 2, 5, 0), policy, PromptConfig("announced", counters=counters))
    asked = {(r.seed, r.turn): r for r in policy.seen}
    for traj in trajs:
        assert [turn.remaining for turn in traj.turns] == [5 - k for k in range(len(traj.turns))]
        assert all(turn.remaining == asked[(traj.policy_seed, k)].remaining for k, turn in enumerate(traj.turns))
        assert all(turn.prompt is None for turn in traj.turns)  # prompts are kept only when asked
    hidden = run_rollouts(_factory(), make_jobs(tasks, 2, 5, 0), Scripted(["<action>Up</action>"]), PromptConfig("hidden"))
    assert all(turn.remaining is None for traj in hidden for turn in traj.turns)


def test_kept_prompts_are_the_requests_messages_and_the_backends_prompt_ids() -> None:
    @dataclass
    class Encoding(Scripted):
        """Reports prompt ids (here: the lengths of the messages), as the ``hf`` backend does."""

        def generate(self, requests: Sequence[Request]) -> list[Reply]:
            replies = super().generate(requests)
            return [Reply(reply.text, prompt_ids=tuple(len(m["content"]) for m in request.messages))
                    for request, reply in zip(requests, replies, strict=True)]

    tasks = _factory()().tasks("test", 2)
    for policy, prompt in ((Scripted(["<action>Down</action>"]), PromptConfig("announced", history=1)),
                           (Encoding(["<action>Down</action>"]), PromptConfig("hidden"))):
        trajs = run_rollouts(_factory(), make_jobs(tasks, 2, 4, 1), policy, prompt, keep_prompts=True)
        asked = {(r.seed, r.turn): r for r in policy.seen}
        assert len(asked) == sum(len(t.turns) for t in trajs)
        for traj in trajs:
            for k, turn in enumerate(traj.turns):
                request = asked[(traj.policy_seed, k)]
                assert turn.prompt is not None and turn.prompt.messages == request.messages
                expected = tuple(len(m["content"]) for m in request.messages) if isinstance(policy, Encoding) else None
                assert turn.prompt.ids == expected
                assert turn.remaining == request.remaining
            # the in-memory prompt stays out of the record and out of comparisons
            line = traj.to_json()
            assert all("prompt" not in turn for turn in line["turns"])
            assert Trajectory.from_json(line) == traj and Trajectory.from_json(line).turns[0].prompt is None


class _Counted:
    """A frozenlake that records the budgets it is told and counts its closes (its reset raises
    with ``broken``)."""

    def __init__(self, log: dict[str, list], broken: bool = False) -> None:
        self._env = make("frozenlake", slippery=False)
        self._log, self._broken = log, broken
        self.name, self.t_max = self._env.name, self._env.t_max

    def __getattr__(self, name: str):  # noqa: ANN204 - the rest of the protocol
        return getattr(self._env, name)

    def set_budget(self, budget: int | None) -> None:
        self._log["budgets"].append(budget)

    def reset(self, task, seed: int) -> str:  # noqa: ANN001
        if self._broken:
            raise RuntimeError("the environment failed")
        return self._env.reset(task, seed)

    def close(self) -> None:
        self._log["closed"].append(1)


@pytest.mark.parametrize(("mode", "told"), [("announced", 3), ("hidden", None)])
def test_the_engine_tells_the_budget_and_closes_every_environment(mode: str, told: int | None) -> None:
    log: dict[str, list] = {"budgets": [], "closed": []}
    tasks = make("frozenlake").tasks("test", 2)
    run_rollouts(lambda: _Counted(log), make_jobs(tasks, 2, 3, 0), make_policy("random"), PromptConfig(mode))
    assert log["budgets"] == [told] * 4 and len(log["closed"]) == 4


def test_an_environment_that_raises_is_closed_too() -> None:
    log: dict[str, list] = {"budgets": [], "closed": []}
    tasks = make("frozenlake").tasks("test", 1)
    with pytest.raises(RuntimeError, match="the environment failed"):
        run_rollouts(lambda: _Counted(log, broken=True), make_jobs(tasks, 1, 3, 0), make_policy("random"))
    assert len(log["closed"]) == 1
