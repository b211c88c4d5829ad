"""An environment's ``max_sessions`` caps the trajectories the engine keeps alive, in both
schedules, without changing outcomes; environments without it keep ``max_active``."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from arlkit.envs import make
from arlkit.envs.capabilities import session_cap
from arlkit.policies import make_policy
from arlkit.rollout import EngineConfig, make_jobs, run_rollouts


class Counted:
    """Builds frozenlake environments (with ``max_sessions`` when given) and counts how many are
    alive at once: built and not yet closed."""

    def __init__(self, max_sessions: Any = None) -> None:
        self.max_sessions, self.alive, self.peak, self.built = max_sessions, 0, 0, 0
        self.lock = threading.Lock()

    def __call__(self) -> Any:
        env = make("frozenlake", size=4)
        if self.max_sessions is not None:
            env.max_sessions = self.max_sessions
        counter = self

        def close() -> None:
            with counter.lock:
                counter.alive -= 1

        env.close = close
        with self.lock:
            self.built += 1
            self.alive += 1
            self.peak = max(self.peak, self.alive)
        return env


@pytest.mark.parametrize("schedule", ["async", "lockstep"])
def test_max_sessions_caps_the_trajectories_alive(schedule: str) -> None:
    jobs = make_jobs(make("frozenlake", size=4).tasks("test", 4), 3, 6, seed=1)
    policy = make_policy("noisy-oracle:0.3")
    capped, free = Counted(2), Counted()
    first = run_rollouts(capped, jobs, policy, engine=EngineConfig(max_active=8, schedule=schedule))
    second = run_rollouts(free, jobs, policy, engine=EngineConfig(max_active=8, schedule=schedule))
    assert capped.peak == 2 and capped.alive == 0 and capped.built == len(jobs)  # one environment per trajectory
    assert free.peak == 8 and free.alive == 0 and free.built == len(jobs)
    assert [(t.task_id, t.sample, [x.action for x in t.turns]) for t in first] == \
        [(t.task_id, t.sample, [x.action for x in t.turns]) for t in second]


def test_session_cap_reads_only_positive_integers() -> None:
    env = make("frozenlake")
    assert session_cap(env) is None
    for value, cap in ((3, 3), (0, None), (None, None), (True, None), ("4", None), (-1, None)):
        env.max_sessions = value
        assert session_cap(env) == cap
