"""Matched-state action quality and depth (docs/metrics.md#matched-states, #depth-profile)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from arlkit.envs.capabilities import MissingCapability, action_quality
from arlkit.analysis.depth import depth_profile
from arlkit.analysis.runs import paired_runs
from arlkit.analysis.steps import StepsConfig, matched_states
from arlkit.envs import make
from arlkit.envs.frozenlake.env import FrozenLakeEnv
from arlkit.policies import Reply, Request, make_policy
from arlkit.rollout import make_jobs, run_rollouts

GAMMA = 0.95
# Gymnasium's 4x4 map. Cells are numbered row-major 0..15; holes 5, 7, 11, 12; goal 15.
MAP = ["SFFF", "FHFH", "FFFH", "HFFG"]
# Shortest number of moves to the goal, by breadth-first search done by hand:
# 14->15 (1); 13, 10 (2); 9, 6 (3); 2, 8 (4); 1, 3, 4 (5); 0 (6).
DIST = {0: 6, 1: 5, 2: 4, 3: 5, 4: 5, 6: 3, 8: 4, 9: 3, 10: 2, 13: 2, 14: 1, 15: 0}
HOLES = {5, 7, 11, 12}


def v_star(cell: int, h: int) -> float:
    """Deterministic map: V*_h(s) = gamma^(d-1) when the goal is d <= h moves away, else 0."""
    d = DIST.get(cell)
    return GAMMA ** (d - 1) if d is not None and 1 <= d <= h else 0.0


def q_left(cell: int, h: int) -> float:
    """Q*_h(s, Left): the move ends on s - 1 (or stays put at the left border); reward 1 only at the
    goal, 0 in a hole, else gamma * V*_{h-1}(s')."""
    nxt = cell if cell % 4 == 0 else cell - 1
    if nxt == 15:
        return 1.0
    if nxt in HOLES:
        return 0.0
    return GAMMA * v_star(nxt, h - 1)


@dataclass
class Fixed:
    """Always the same reply."""

    reply: str
    name: str = "fixed"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        return [Reply(self.reply) for _ in requests]


def test_share_better_matches_a_hand_computation_on_a_tiny_pool() -> None:
    make_env = lambda: make("frozenlake", slippery=False, t_max=12)  # noqa: E731
    task = FrozenLakeEnv.task_from_map(MAP)
    base_policy, rl_policy = Fixed("<action>Left</action>"), make_policy("oracle")
    # base: one trajectory stuck at the start for 12 turns (Left at the border): 12 states;
    # RL: two trajectories along shortest paths (6 moves each): 12 states. The pool takes them all.
    base = run_rollouts(make_env, make_jobs([task], 1, 12, seed=0), base_policy)
    rl = run_rollouts(make_env, make_jobs([task], 2, 12, seed=0), rl_policy)
    result = matched_states(base_policy, rl_policy, make_env, {task.task_id: task}, base, rl,
                            StepsConfig(states=24, actions=3, bootstrap=200))
    rows = result.rows
    assert len(rows) == 24 and sum(r.source == "base" for r in rows) == 12
    for r in rows:
        cell = int(r.state_key.split("@")[1])
        assert r.rl_quality == pytest.approx(v_star(cell, r.remaining), abs=1e-12)
        assert r.base_quality == pytest.approx(q_left(cell, r.remaining), abs=1e-12)
    hand = np.mean([v_star(int(r.state_key.split("@")[1]), r.remaining) > q_left(int(r.state_key.split("@")[1]), r.remaining)
                    for r in rows])
    assert result.comparison.share_rl_better.value == pytest.approx(hand)
    # every state is won by RL except the start state with fewer than 6 turns left (t = 7..11),
    # where the goal is out of reach and both qualities are 0: share = 19 / 24
    assert hand == pytest.approx(19 / 24)
    assert result.comparison.share_tie == pytest.approx(5 / 24)


def test_matched_states_rank_oracle_and_noisy_oracle(fl_run: Path) -> None:
    pair = paired_runs([fl_run], base_spec="noisy-oracle:0.6", rl_spec="noisy-oracle:0.2")
    config = StepsConfig(states=60, actions=8, bootstrap=300)
    kwargs = {"make_env": pair.make_env, "tasks": pair.tasks, "base_trajectories": pair.base, "rl_trajectories": pair.rl,
              "config": config}
    vs_oracle = matched_states(make_policy("noisy-oracle:0.6"), make_policy("oracle"), **kwargs).comparison
    assert vs_oracle.share_base_better.value == 0.0  # nothing beats Q* of the best action
    assert vs_oracle.share_rl_better.value > 0.5
    assert vs_oracle.difference.low > 0
    noisy = matched_states(make_policy("noisy-oracle:0.6"), make_policy("noisy-oracle:0.2"), **kwargs).comparison
    assert noisy.rl_mean.value > noisy.base_mean.value
    assert noisy.share_rl_better.value > noisy.share_base_better.value
    assert noisy.difference.low > 0
    swapped = matched_states(make_policy("noisy-oracle:0.2"), make_policy("noisy-oracle:0.6"), **kwargs).comparison
    assert swapped.difference.high < 0


def test_small_pool_uses_what_exists_and_says_so(fl_run: Path) -> None:
    pair = paired_runs([fl_run], base_spec="noisy-oracle:0.6", rl_spec="noisy-oracle:0.2")
    result = matched_states(make_policy("random"), make_policy("oracle"), pair.make_env, pair.tasks, pair.base[:2],
                            pair.rl[:2], StepsConfig(states=10_000, actions=1, bootstrap=100))
    n_base = sum(r.source == "base" for r in result.rows)
    assert n_base == len(result.rows) - n_base  # equal numbers from each policy
    assert n_base == min(sum(len(t.turns) for t in pair.base[:2]), sum(len(t.turns) for t in pair.rl[:2]))
    assert any("asked for 10000 states" in note for note in result.notes)


class Blind:
    """FrozenLake without its oracle (and without an action list)."""

    def __init__(self) -> None:
        self._env = make("frozenlake", t_max=20)
        self.name, self.t_max = "frozenlake", 20

    def __getattr__(self, item: str):  # type: ignore[no-untyped-def]
        if item in ("action_values", "optimal_actions", "shortest_solution_length", "success_probability", "admissible_actions"):
            raise AttributeError(item)
        return getattr(self._env, item)

    def reset(self, task, seed):  # type: ignore[no-untyped-def]
        return self._env.reset(task, seed)

    def step(self, action):  # type: ignore[no-untyped-def]
        return self._env.step(action)

    def parse_action(self, reply):  # type: ignore[no-untyped-def]
        return self._env.parse_action(reply)

    def render(self):  # type: ignore[no-untyped-def]
        return self._env.render()

    def prompt_text(self):  # type: ignore[no-untyped-def]
        return self._env.prompt_text()

    def state_key(self):  # type: ignore[no-untyped-def]
        return self._env.state_key()

    def snapshot(self):  # type: ignore[no-untyped-def]
        return self._env.snapshot()

    def restore(self, snapshot):  # type: ignore[no-untyped-def]
        return self._env.restore(snapshot)


def test_missing_oracle_is_a_clear_skip(fl_run: Path) -> None:
    pair = paired_runs([fl_run], base_spec="noisy-oracle:0.6", rl_spec="noisy-oracle:0.2")
    with pytest.raises(MissingCapability, match="cannot score actions"):
        matched_states(make_policy("random"), make_policy("random"), Blind, pair.tasks, pair.base, pair.rl)
    with pytest.raises(MissingCapability):
        action_quality(Blind(), "Left", 3)  # type: ignore[arg-type]


def test_oracle_quality_lookup_is_lenient_about_spelling() -> None:
    env = make("frozenlake", slippery=False, t_max=12)
    env.reset(FrozenLakeEnv.task_from_map(MAP), 0)
    values = env.action_values(12)  # type: ignore[attr-defined]
    assert action_quality(env, "right", 12) == values["Right"] == pytest.approx(GAMMA**5)
    assert action_quality(env, " Down. ", 12) == values["Down"]
    assert action_quality(env, "jump", 12) == 0.0 and action_quality(env, None, 12) == 0.0


def test_depth_profile_bins_and_intervals() -> None:
    # depths 0.1 (two states, diffs 0.2 and 0.4) and 0.9 (one state, diff -0.1); bins of width 0.5
    prof = depth_profile([0.1, 0.15, 0.9], [0.0, 0.1, 0.5], [0.2, 0.5, 0.4], ["a", "b", "a"], bins=2, resamples=200)
    assert [b.n_states for b in prof] == [2, 1]
    assert prof[0].difference.value == pytest.approx(0.3)
    assert prof[0].difference.low >= 0.2 - 1e-12 and prof[0].difference.high <= 0.4 + 1e-12
    assert prof[1].difference.value == pytest.approx(-0.1) == prof[1].difference.low
    empty = depth_profile([0.1], [0.0], [1.0], ["a"], bins=4, resamples=100)
    assert empty[0].n_states == 1 and empty[1].difference is None
