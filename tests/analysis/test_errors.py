"""Error states, continuation from them, and error correction after failed calls (docs/metrics.md#error-states)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from arlkit.envs.capabilities import call_failed, oracle_inject_error
from arlkit.analysis.errors import ErrorsConfig, build_error_states, error_states_analysis, observed_correction_rate
from arlkit.analysis.runs import paired_runs
from arlkit.analysis.sampling import continue_from
from arlkit.analysis.states import restore_point
from arlkit.envs import make
from arlkit.envs.frozenlake.env import FrozenLakeEnv
from arlkit.policies import Reply, Request, make_policy
from arlkit.rollout import make_jobs, run_rollouts


def _pair(run: Path, base: str, rl: str):  # type: ignore[no-untyped-def]
    return paired_runs([run], base_spec=base, rl_spec=rl)


def test_injection_keeps_only_states_whose_distance_grew() -> None:
    # Gymnasium's 4x4 map, deterministic, player on cell 1 (5 moves from the goal): Left (to cell 0,
    # 6 moves) is an error; Down falls into a hole (episode over: rejected); Right and Up are not.
    env = make("frozenlake", slippery=False, t_max=20)
    env.reset(FrozenLakeEnv.task_from_map(["SFFF", "FHFH", "FFFH", "HFFG"]), 0)
    env.step("Right")
    kept = 0
    for seed in range(60):
        before_snapshot = env.snapshot()
        before = env.shortest_solution_length()  # type: ignore[attr-defined]
        injected = oracle_inject_error(env, np.random.default_rng(seed), 10)
        if injected is None:
            assert env.snapshot() == before_snapshot  # a rejected attempt leaves the state as it was
            continue
        kept += 1
        after = env.shortest_solution_length()  # type: ignore[attr-defined]
        assert after is None or after > before
        assert injected.result.valid and not injected.result.done
        assert injected.reply == f"<action>{injected.action}</action>"
        assert injected.action == "Left" and after == 6
        env.restore(before_snapshot)
    assert 0 < kept < 60


@pytest.mark.parametrize(("fixture", "base", "rl"), [("fl_run", "noisy-oracle:0.6", "noisy-oracle:0.2"),
                                                    ("sokoban_run", "noisy-oracle:0.5", "noisy-oracle:0.1")])
def test_error_states_are_worse_than_their_origin(fixture: str, base: str, rl: str, request: pytest.FixtureRequest) -> None:
    pair = _pair(request.getfixturevalue(fixture), base, rl)
    groups = [("base", pair.base, None), ("rl", pair.rl, None)]
    states, _ = build_error_states(pair.make_env, pair.tasks, groups, 16, np.random.default_rng(0))
    assert len(states) >= 4 and sum(s.source == "base" for s in states) * 2 == len(states)
    for s in states:
        origin = restore_point(pair.make_env, s.origin)
        error = restore_point(pair.make_env, s.point)
        d0, d1 = origin.shortest_solution_length(), error.shortest_solution_length()  # type: ignore[attr-defined]
        assert d0 is not None and (d1 is None or d1 > d0)
        assert s.point.t == s.origin.t + 1 and s.point.remaining >= 1
        assert s.point.replies[-1] == f"<action>{s.action}</action>"
        assert s.point.replies[:-1] == s.origin.replies


@dataclass
class SnapshotSpy:
    """Records the environment snapshot a policy sees at the first request of every seed."""

    inner: object
    name: str = "spy"
    first: dict = field(default_factory=dict)

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        for r in requests:
            self.first.setdefault(r.seed, (r.turn, r.env.snapshot()))
        return self.inner.generate(requests)  # type: ignore[attr-defined]


def test_continuation_starts_from_exactly_the_restored_error_state(fl_run: Path) -> None:
    pair = _pair(fl_run, "noisy-oracle:0.6", "noisy-oracle:0.2")
    states, _ = build_error_states(pair.make_env, pair.tasks, [("base", pair.base, None), ("rl", pair.rl, None)], 6,
                                   np.random.default_rng(1))
    points = [s.point for s in states]
    spy = SnapshotSpy(make_policy("noisy-oracle:0.3"))
    runs = continue_from(spy, pair.make_env, points, 2, seed=0, tag="continue")
    assert len(spy.first) == 2 * len(points)
    from arlkit.rollout.seeds import derive_seed

    for i, point in enumerate(points):
        for j in range(2):
            turn, snapshot = spy.first[derive_seed(0, "continue", i, j)]
            assert turn == point.t
            assert snapshot == point.snapshot  # position, done flag and RNG state, exactly
            assert 1 <= runs[i][j].turns <= point.remaining


def test_oracle_continuation_success_is_exact_on_deterministic_maps(fl_det_run: Path) -> None:
    pair = _pair(fl_det_run, "noisy-oracle:0.5", "random")
    states, _ = build_error_states(pair.make_env, pair.tasks, [("base", pair.base, None), ("rl", pair.rl, None)], 10,
                                   np.random.default_rng(2))
    points = [s.point for s in states]
    runs = continue_from(make_policy("oracle"), pair.make_env, points, 1, seed=0, tag="c")
    for point, (run,) in zip(points, runs, strict=True):
        env = restore_point(pair.make_env, point)
        assert run.success == (env.success_probability(point.remaining) == 1.0)  # type: ignore[attr-defined]


def test_error_analysis_ranks_policies_and_pairs_the_continuations(fl_run: Path) -> None:
    pair = _pair(fl_run, "noisy-oracle:0.6", "noisy-oracle:0.2")
    result = error_states_analysis(make_policy("random"), make_policy("oracle"), pair.make_env, pair.tasks, pair.base,
                                   pair.rl, ErrorsConfig(states=20, actions=4, continuations=2, bootstrap=200))
    assert result.comparison is not None and result.comparison.share_base_better.value == 0.0
    assert result.continuation is not None
    assert result.continuation.rl.value > result.continuation.base.value
    assert result.continuation.difference.value == pytest.approx(np.mean(result.rl_success) - np.mean(result.base_success))
    assert result.correction.controlled is None  # scripted policies never fail a call
    assert any("no failed call" in n for n in result.notes)


@dataclass
class Script:
    """Replies from a list by turn index (cycling)."""

    replies: Sequence[str]
    name: str = "script"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        return [Reply(self.replies[r.turn % len(self.replies)]) for r in requests]


def test_error_correction_after_failed_calls() -> None:
    make_env = lambda: make("frozenlake", slippery=False, t_max=8)  # noqa: E731
    tasks = make_env().tasks("test", 2)
    # turns: fail, ok, fail, fail, ok, fail, ok, ok -> failures at 0, 2, 3, 5 are followed by ok, fail, ok, ok
    script = Script(["oops", "<action>Up</action>", "oops", "<action>Jump</action>", "<action>Left</action>", "oops",
                     "<action>Up</action>", "<action>Left</action>"])
    trajs = run_rollouts(make_env, make_jobs(tasks, 1, 8, seed=0), script)
    n, rate = observed_correction_rate(trajs)
    assert (n, rate) == (8, 0.75)  # two trajectories x 4 failures; 3 of 4 followed by a working step
    by_id = {t.task_id: t for t in tasks}
    fixer, junk = Script(["<action>Up</action>"]), Script(["no action here"])
    result = error_states_analysis(junk, fixer, make_env, by_id, trajs, trajs,
                                   ErrorsConfig(states=2, actions=1, continuations=1, correction_states=6,
                                                correction_actions=2, bootstrap=100))
    corr = result.correction.controlled
    assert corr is not None and corr.n_states == 6
    assert (corr.base.value, corr.rl.value, corr.difference.value) == (0.0, 1.0, 1.0)


def test_json_error_results_count_as_failed_calls() -> None:
    assert call_failed(None, False, "Invalid action: ...")
    assert call_failed(None, True, 'ls(path="x") -> {"error": "no such file"}')
    assert not call_failed(None, True, 'ls() -> ["a.txt"]')
