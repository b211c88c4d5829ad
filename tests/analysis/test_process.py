"""Process rewards: oracle Q and the LLM judge (docs/metrics.md#process-signals), and judge-vs-oracle agreement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arlkit.analysis.process import (
    JUDGE_SYSTEM_PROMPT,
    LLMJudge,
    StepContext,
    judge_agreement,
    judge_messages,
    oracle_process_reward,
    parse_judge_reply,
    spearman,
    step_context,
    trajectory_step_contexts,
)
from arlkit.analysis.runs import load_run, resolve_tasks
from arlkit.analysis.states import equal_pool, restore_point
from arlkit.envs import make
from arlkit.policies import Reply, Request


@pytest.mark.parametrize("n", range(11))
def test_integers_0_to_10_map_to_tenths(n: int) -> None:
    for text in (str(n), f" {n}\n", f"<think>hmm, about {n + 3}</think>{n}", f"0{n}" if n < 10 else "10"):
        verdict = parse_judge_reply(text)
        assert verdict.value == pytest.approx(n / 10) and verdict.error is None


@pytest.mark.parametrize("text", ["", "   ", "11", "-1", "7.5", "7/10", "Score: 7", "7 because it helps", "seven",
                                  "<think>7</think>", "10.", "1 0", None, 7, "\x00", "９"])
def test_anything_else_is_a_recorded_failure(text: object) -> None:
    verdict = parse_judge_reply(text)
    assert verdict.value is None and verdict.error


@given(st.text(max_size=40))
def test_parsing_never_raises(text: str) -> None:
    verdict = parse_judge_reply(text)
    assert verdict.value is None or 0.0 <= verdict.value <= 1.0


@dataclass
class Judge:
    """Scripted judge: replies from a list in order; records the requests."""

    replies: Sequence[object]
    name: str = "judge"
    requests: list = field(default_factory=list)

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        out = []
        for r in requests:
            item = self.replies[len(self.requests) % len(self.replies)]
            self.requests.append(r)
            out.append(Reply("", error=str(item)) if isinstance(item, Exception) else Reply(str(item)))
        return out


class Broken:
    name = "broken"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        raise ConnectionError("judge server down")


def _step(action: str | None = "Down", t: int = 2) -> StepContext:
    return StepContext("Reach G.", [f"obs{i}" for i in range(t + 1)], ["Right"] * t, action, remaining=5)


def test_judge_failures_are_counted_never_raised() -> None:
    judge = LLMJudge(Judge(["7", "great move!", RuntimeError("timeout"), "10"]))
    assert judge([_step()] * 4) == [0.7, None, None, 1.0]
    assert judge.failures == 2
    assert all(r.env is None and r.remaining is None for r in judge.policy.requests)  # type: ignore[attr-defined]
    down = LLMJudge(Broken())  # type: ignore[arg-type]
    verdicts = down.judge([_step(), _step()])
    assert [v.value for v in verdicts] == [None, None] and "ConnectionError" in (verdicts[0].error or "")


def test_judge_prompt_carries_every_field() -> None:
    messages = judge_messages(_step("Down", t=2))
    assert messages[0] == {"role": "system", "content": JUDGE_SYSTEM_PROMPT}
    user = messages[1]["content"]
    for needle in ("Reach G.", "Initial observation:\nobs0", "Turn 1 action: Right", "Turn 1 observation:\nobs1",
                   "Turn 2 action: Right", "CURRENT OBSERVATION:\nobs2", "including this action): 5", "ACTION TO JUDGE:\nDown"):
        assert needle in user
    assert "obs2" not in user.split("CURRENT OBSERVATION")[0]  # the current observation is not repeated
    first = judge_messages(_step(None, t=0))[1]["content"]
    assert "this is the first action" in first and "no valid action" in first
    assert "turns 1-1 omitted" in judge_messages(_step(t=3), max_history_turns=2)[1]["content"]


def test_oracle_process_reward_is_q_star() -> None:
    env = make("frozenlake", t_max=20)
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    ctx = [StepContext(env.prompt_text().instruction, [env.render()], [], a, 7, env) for a in ("Left", "Down", "Right", "Up", None)]
    values = env.action_values(7)  # type: ignore[attr-defined]
    assert oracle_process_reward(ctx) == [values["Left"], values["Down"], values["Right"], values["Up"], 0.0]


def test_process_rewards_of_a_recorded_trajectory(fl_run: Path) -> None:
    run = load_run(fl_run)
    tasks = resolve_tasks(run)
    traj = max(run.trajectories, key=lambda t: len(t.turns))
    contexts = trajectory_step_contexts(run.make_env, tasks[traj.task_id], traj)
    rewards = oracle_process_reward(contexts)
    assert len(rewards) == len(traj.turns)
    env = run.make_env()
    env.reset(tasks[traj.task_id], traj.env_seed)
    for t, (turn, reward, ctx) in enumerate(zip(traj.turns, rewards, contexts, strict=True)):
        assert reward == env.action_values(traj.budget - t)[turn.action]  # type: ignore[attr-defined]
        assert ctx.remaining == traj.budget - t and len(ctx.actions) == t
        env.step(turn.action)  # type: ignore[arg-type]
    judged = LLMJudge(Judge(["8"]))(contexts)
    assert judged == [0.8] * len(contexts)


def test_spearman_matches_scipy_with_ties() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.integers(0, 4, 15).astype(float), rng.integers(0, 5, 15).astype(float)
        expected = stats.spearmanr(a, b).statistic
        got = spearman(a, b)
        assert (np.isnan(expected) and np.isnan(got)) or got == pytest.approx(expected)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_judge_agreement_of_a_judge_that_knows_q(fl_run: Path) -> None:
    run = load_run(fl_run)
    tasks = resolve_tasks(run)
    groups = [(p, [t for t in run.trajectories if t.policy == p], None) for p in run.policies()]
    pools, _ = equal_pool(run.make_env, tasks, groups, 10, np.random.default_rng(0))
    points = [p for pool in pools for p in pool]
    # the 'judge' answers round(10 * Q*) for the exact prompt of each (state, action)
    answers = {}
    for point in points:
        env = restore_point(run.make_env, point)
        for action in env.admissible_actions():  # type: ignore[attr-defined]
            ctx = step_context(point, env, action)
            answers[judge_messages(ctx)[1]["content"]] = round(10 * oracle_process_reward([ctx])[0])

    @dataclass
    class Knowing:
        name: str = "knowing"

        def generate(self, requests: Sequence[Request]) -> list[Reply]:
            return [Reply(str(answers[r.messages[1]["content"]])) for r in requests]

    result = judge_agreement(LLMJudge(Knowing()), run.make_env, points, resamples=200)
    assert result.failures == 0 and len(result.rows) == 4 * len(points)
    assert result.spearman_all > 0.9
    noisy = judge_agreement(LLMJudge(Judge(["5", "oops", "3", "9"])), run.make_env, points, resamples=200)
    assert noisy.failures == len(noisy.rows) // 4 and "not an integer" in noisy.notes[0]
