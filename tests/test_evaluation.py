"""run_eval end to end with scripted policies: bounds, Monte-Carlo agreement, hidden-mode truncation."""

from __future__ import annotations

import numpy as np
import pytest

from arlkit.evaluation import EvalConfig, run_eval
from arlkit.envs import make
from arlkit.metrics.passkt import task_counts


def test_oracle_hits_the_structural_bound_exactly_at_every_budget(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env_args = {"size": 6, "slippery": False, "t_max": 20, "p_frozen": 0.6}  # holes force detours
    config = EvalConfig(env="frozenlake", env_args=env_args, policies=("oracle",), tasks=40, samples=1,
                        budgets=("9", "10", "11", "100%"), bootstrap=200)
    result = run_eval(config, tmp_path / "run")
    env = make("frozenlake", **env_args)
    tasks = env.tasks("test", 40)
    for row in result.rows:
        # structural bound: the share of maps whose shortest path fits in T
        solvable = []
        for task in tasks:
            env.reset(task, 0)
            solvable.append(env.shortest_solution_length() <= row.T)
        assert row.upper_bound == pytest.approx(np.mean(solvable))
        assert row.pass_ == pytest.approx(row.upper_bound, abs=1e-12)
    assert result.rows[0].pass_ == 0.0  # 9 turns cannot cross a 6x6 map (10 moves at least)
    assert 0 < result.rows[1].pass_ < 1  # 10 turns cut off the maps whose paths need detours


def test_random_policy_agrees_with_an_independent_monte_carlo(tmp_path) -> None:  # type: ignore[no-untyped-def]
    gym_fl = pytest.importorskip("gymnasium.envs.toy_text.frozen_lake")
    env_args = {"size": 4, "slippery": True, "t_max": 16}
    config = EvalConfig(env="frozenlake", env_args=env_args, policies=("random",), tasks=20, samples=16,
                        budgets=("100%",), ks=(1, 4))
    result = run_eval(config, tmp_path / "run")
    tasks = make("frozenlake", **env_args).tasks("test", 20)
    rng = np.random.default_rng(123)
    p_hat = []
    for task in tasks:
        gym_env = gym_fl.FrozenLakeEnv(desc=task.payload["desc"], is_slippery=True)
        wins = 0
        for episode in range(300):
            gym_env.reset(seed=int(rng.integers(1 << 30)))
            for _ in range(16):
                _, reward, terminated, _, _ = gym_env.step(int(rng.integers(4)))
                if terminated:
                    wins += reward > 0
                    break
        p_hat.append(wins / 300)
    p_hat_arr = np.array(p_hat)
    for row in result.rows:
        monte_carlo = float(np.mean(1 - (1 - p_hat_arr) ** row.k))
        assert row.ci_low <= monte_carlo <= row.ci_high, (row.k, row.pass_, monte_carlo)


def test_hidden_mode_truncation_equals_separate_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env_args = {"size": 5, "t_max": 24, "success_rate": 0.8}
    common = dict(env="frozenlake", env_args=env_args, policies=("random", "oracle"), tasks=12, samples=6, budget_mode="hidden")
    one = run_eval(EvalConfig(**common, budgets=("6", "12", "18", "24")), tmp_path / "one")  # type: ignore[arg-type]
    assert {t.budget for t in one.trajectories} == {24}
    for T in (6, 12, 18):
        separate = run_eval(EvalConfig(**common, budgets=(str(T),)), tmp_path / f"sep{T}")  # type: ignore[arg-type]
        assert {t.budget for t in separate.trajectories} == {T}
        for policy in ("random", "oracle"):
            a = task_counts([t for t in one.trajectories if t.policy == policy], T, "hidden", one.task_ids)
            b = task_counts([t for t in separate.trajectories if t.policy == policy], T, "hidden", one.task_ids)
            assert a == b
        rows_one = {(r.policy, r.k): r.pass_ for r in one.rows if r.T == T}
        rows_sep = {(r.policy, r.k): r.pass_ for r in separate.rows}
        assert rows_one == rows_sep


def test_announced_runs_never_mix_budgets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = EvalConfig(env="frozenlake", env_args={"slippery": False}, policies=("noisy-oracle:0.5",), tasks=5, samples=4,
                        budgets=("5", "10"), bootstrap=200)
    result = run_eval(config, tmp_path / "run")
    assert sorted({t.budget for t in result.trajectories}) == [5, 10]
    assert len(result.trajectories) == 2 * 5 * 4
    for traj in result.trajectories:
        assert len(traj.turns) <= traj.budget
