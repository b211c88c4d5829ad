"""run_eval end to end with scripted policies: bounds, Monte-Carlo agreement, hidden-mode truncation,
policy errors kept apart and retried."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from arlkit.config import ConfigError, EnvSpec
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.rollout import PromptConfig
from arlkit.envs import make
from arlkit.metrics.passkt import task_counts
from arlkit.policies import Reply, Request, make_policy, register_policy
from arlkit.rollout import Trajectory, read_trajectories


def test_oracle_hits_the_structural_bound_exactly_at_every_budget(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env_args = {"size": 6, "slippery": False, "t_max": 20, "p_frozen": 0.6}  # holes force detours
    config = EvalConfig(env=EnvSpec("frozenlake", env_args), policies=("oracle",), tasks=40, samples=1,
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
        assert row.expected_optimum == pytest.approx(np.mean(solvable))
        assert row.pass_ == pytest.approx(row.expected_optimum, abs=1e-12)
    assert result.rows[0].pass_ == 0.0  # 9 turns cannot cross a 6x6 map (10 moves at least)
    assert 0 < result.rows[1].pass_ < 1  # 10 turns cut off the maps whose paths need detours


def test_random_policy_agrees_with_an_independent_monte_carlo(tmp_path) -> None:  # type: ignore[no-untyped-def]
    gym_fl = pytest.importorskip("gymnasium.envs.toy_text.frozen_lake")
    env_args = {"size": 4, "slippery": True, "t_max": 16}
    config = EvalConfig(env=EnvSpec("frozenlake", env_args), policies=("random",), tasks=20, samples=16,
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
    common = dict(env=EnvSpec("frozenlake", env_args), policies=("random", "oracle"), tasks=12, samples=6,
                  prompt=PromptConfig("hidden"))
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
    config = EvalConfig(env=EnvSpec("frozenlake", {"slippery": False}), policies=("noisy-oracle:0.5",), tasks=5, samples=4,
                        budgets=("5", "10"), bootstrap=200)
    result = run_eval(config, tmp_path / "run")
    assert sorted({t.budget for t in result.trajectories}) == [5, 10]
    assert len(result.trajectories) == 2 * 5 * 4
    for traj in result.trajectories:
        assert len(traj.turns) <= traj.budget


# -- policy errors: not finished, kept apart, retried on resume ----------------------------------

_OUTAGE = {"on": False}


@dataclass
class _FlakyPolicy:
    """A noisy oracle behind a backend that, during an outage, fails the second turn of every
    trajectory with an odd seed (as a server answering 500 after all retries would)."""

    name: str = "test-flaky"
    inner: object = field(default_factory=lambda: make_policy("noisy-oracle:0.3"))

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        answers = self.inner.generate(requests)  # type: ignore[attr-defined]
        return [Reply("", error="InternalServerError after 5 attempt(s): busy")
                if _OUTAGE["on"] and r.turn == 1 and r.seed % 2 else a for r, a in zip(requests, answers, strict=True)]


@register_policy("test-flaky")
def _make_flaky(arg: object, sampling: object, backend: object) -> _FlakyPolicy:
    return _FlakyPolicy()


def _by_key(trajectories: Sequence[Trajectory]) -> dict[tuple[str, int, str, int], dict]:  # type: ignore[type-arg]
    return {t.key(): t.to_json() for t in trajectories}


def test_errored_trajectories_are_kept_apart_withheld_and_retried_on_resume(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = EvalConfig(env=EnvSpec("frozenlake", {"size": 4, "t_max": 8}), policies=("test-flaky", "oracle"), tasks=6,
                        samples=2, budgets=("50%", "100%"), bootstrap=100)
    _OUTAGE["on"] = False
    reference = run_eval(config, tmp_path / "ref")
    assert not reference.failed and len(reference.trajectories) == 2 * 2 * 6 * 2

    out = tmp_path / "run"
    _OUTAGE["on"] = True
    broken = run_eval(config, out)
    failed = broken.failed
    assert failed and all(t.ended_by == "policy_error" and t.policy == "test-flaky" for t in failed)
    assert len(broken.trajectories) + len(failed) == len(reference.trajectories)
    assert all(t.error is None for t in read_trajectories(out / "trajectories.jsonl"))
    assert len(read_trajectories(out / "errors.jsonl")) == len(failed)
    # the flaky policy's table is left out and marked; the other policy's is computed
    assert broken.withheld == ["test-flaky"] and {r.policy for r in broken.rows} == {"oracle"}
    summary = (out / "summary.md").read_text()
    assert f"**{len(failed)} trajectories ended by policy errors**" in summary
    assert "Pass@(K,T) not computed for test-flaky" in summary

    # --allow-errors: the outage goes on, the errored ones are retried and fail again, and the
    # table counts them as failures, saying so
    allowed = run_eval(replace(config, allow_errors=True), out)
    assert len(allowed.failed) == len(failed) and allowed.resumed == len(broken.trajectories)
    assert {r.policy for r in allowed.rows} == {"test-flaky", "oracle"}
    assert "--allow-errors: Pass@(K,T) counts the trajectories ended by policy errors as failures" in (out / "summary.md").read_text()
    assert len(read_trajectories(out / "errors.jsonl", unique=False)) == 2 * len(failed)  # every failed attempt is logged

    # the server recovers: a re-run retries exactly the errored ones and matches the reference
    _OUTAGE["on"] = False
    healed = run_eval(config, out)
    assert not healed.failed and healed.resumed == len(broken.trajectories)
    assert _by_key(healed.trajectories) == _by_key(reference.trajectories)
    assert healed.rows == reference.rows
    assert "policy errors" not in (out / "summary.md").read_text()


def test_an_env_option_spelled_at_its_default_resumes_and_a_changed_option_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run"
    base = {"size": 4, "slippery": False, "t_max": 8}
    first = run_eval(EvalConfig(env=EnvSpec("frozenlake", base), policies=("oracle",), tasks=3, samples=1,
                                budgets=("100%",), bootstrap=100), out)
    recorded = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert recorded["env"]["args"]["start"] == "corner"  # the identity holds the env's whole resolved config
    again = run_eval(EvalConfig(env=EnvSpec("frozenlake", {**base, "start": "corner"}), policies=("oracle",), tasks=3,
                                samples=1, budgets=("100%",), bootstrap=100), out)  # the default, spelled out
    assert [r.pass_ for r in again.rows] == [r.pass_ for r in first.rows] and again.resumed == len(first.trajectories)
    with pytest.raises(ConfigError, match="env.args.start"):
        run_eval(EvalConfig(env=EnvSpec("frozenlake", {**base, "start": "random"}), policies=("oracle",), tasks=3,
                            samples=1, budgets=("100%",), bootstrap=100), out)
