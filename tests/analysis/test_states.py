"""Replaying recorded trajectories rebuilds their states and prompts exactly."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from arlkit.analysis.runs import AnalysisInputError, check_compatible, load_run, paired_runs, resolve_tasks
from arlkit.analysis.states import ReplayError, point_messages, point_request, replay_states, restore_point
from arlkit.envs import make
from arlkit.policies import Reply, Request, make_policy
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts


@pytest.mark.parametrize("fixture", ["fl_run", "sokoban_run"])
def test_replayed_state_keys_equal_the_recorded_ones(fixture: str, request: pytest.FixtureRequest) -> None:
    run = load_run(request.getfixturevalue(fixture))
    tasks = resolve_tasks(run)
    env = run.make_env()
    checked = 0
    for traj in run.trajectories:
        points = replay_states(env, tasks[traj.task_id], traj, history=run.history)
        assert [p.state_key for p in points] == [turn.state for turn in traj.turns]
        assert [p.t for p in points] == list(range(len(traj.turns)))
        checked += len(points)
    assert checked > 50


def test_replay_refuses_a_record_it_cannot_reproduce(fl_run: Path) -> None:
    run = load_run(fl_run)
    traj = next(t for t in run.trajectories if len(t.turns) > 2)
    turns = list(traj.turns)
    turns[2] = dataclasses.replace(turns[2], state=traj.task_id + "@99")
    with pytest.raises(ReplayError, match="before turn 3"):
        replay_states(run.make_env(), resolve_tasks(run)[traj.task_id], dataclasses.replace(traj, turns=turns))


@dataclass
class Spy:
    """Wraps a policy and records every request's messages by (policy seed, turn)."""

    inner: object
    name: str = "spy"
    seen: dict = field(default_factory=dict)

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        for r in requests:
            self.seen[(r.seed, r.turn)] = (list(r.messages), r.remaining)
        return self.inner.generate(requests)  # type: ignore[attr-defined]


@pytest.mark.parametrize("prompt", [PromptConfig("announced", None), PromptConfig("hidden", 2),
                                    PromptConfig("announced", 0, "observation")])
def test_points_rebuild_the_exact_prompt_the_policy_saw(prompt: PromptConfig) -> None:
    make_env = lambda: make("frozenlake", t_max=10)  # noqa: E731
    tasks = make_env().tasks("test", 3)
    spy = Spy(make_policy("noisy-oracle:0.5"))
    trajs = run_rollouts(make_env, make_jobs(tasks, 2, 10, seed=3), spy, prompt)
    by_id = {t.task_id: t for t in tasks}
    env = make_env()
    for traj in trajs:
        for point in replay_states(env, by_id[traj.task_id], traj, history=prompt.history, counters=prompt.counters):
            live = restore_point(make_env, point)
            assert live.snapshot() == point.snapshot
            messages, remaining = spy.seen[(traj.policy_seed, point.t)]
            assert point_messages(point, live) == messages
            assert point_request(point, live, 0).remaining == remaining


def test_run_loading_and_refusals(fl_run: Path, sokoban_run: Path, tmp_path: Path) -> None:
    with pytest.raises(AnalysisInputError, match="mix environments"):
        check_compatible([load_run(fl_run), load_run(sokoban_run)])
    with pytest.raises(AnalysisInputError, match="several policies"):
        paired_runs([fl_run, fl_run], base_spec="oracle", rl_spec="random")
    with pytest.raises(AnalysisInputError, match="not a run directory"):
        load_run(tmp_path)
    pair = paired_runs([fl_run], base_spec="noisy-oracle:0.6", rl_spec="noisy-oracle:0.2")
    assert {t.policy for t in pair.base} == {"noisy-oracle:0.6"} and {t.policy for t in pair.rl} == {"noisy-oracle:0.2"}
    with pytest.raises(AnalysisInputError, match="no trajectories at budget"):
        paired_runs([fl_run], base_spec="noisy-oracle:0.6", rl_spec="noisy-oracle:0.2", budget=3)


def test_runs_carry_their_counter_position(fl_run: Path, tmp_path: Path) -> None:
    """The analyses rebuild prompts with the counters where the run put them (run.json's ``prompt.counters``);
    runs that put them in different places are refused, like runs with different budget modes."""
    import json
    import shutil

    moved = tmp_path / "observation"
    shutil.copytree(fl_run, moved)
    record = json.loads((moved / "run.json").read_text())
    (moved / "run.json").write_text(json.dumps({**record, "prompt": {**record["prompt"], "counters": "observation"}}))
    assert load_run(fl_run).counters == record["prompt"]["counters"] == "system"
    assert load_run(moved).counters == "observation"
    assert paired_runs([moved], base_spec="noisy-oracle:0.6", rl_spec="noisy-oracle:0.2").counters == "observation"
    with pytest.raises(AnalysisInputError, match="turn counters"):
        check_compatible([load_run(fl_run), load_run(moved)])
