"""The scripted oracle where its environment's oracle knows no action: the trajectory ends with a
policy error naming why, and the run goes on (no exception out of the engine)."""

from __future__ import annotations

from arlkit.envs import make
from arlkit.policies import make_policy
from arlkit.rollout import make_jobs, run_rollouts


def test_an_oracle_with_no_known_action_ends_its_trajectory_with_an_error() -> None:
    def unknown_here() -> object:
        env = make("frozenlake", slippery=False)
        env.optimal_actions = lambda remaining: []  # type: ignore[method-assign]  # an oracle that cannot answer
        return env

    tasks = make("frozenlake", slippery=False).tasks("test", 2)
    played = run_rollouts(unknown_here, make_jobs(tasks, 1, 10, seed=0), make_policy("oracle"))  # type: ignore[arg-type]
    assert [t.ended_by for t in played] == ["policy_error", "policy_error"] and all(not t.turns for t in played)
    assert all(t.error == "the oracle is unavailable in this state of 'frozenlake' (no optimal action known)" for t in played)
    assert all(t.success for t in run_rollouts(lambda: make("frozenlake", slippery=False), make_jobs(tasks, 1, 10, seed=0),
                                               make_policy("oracle")))  # fmt: skip
