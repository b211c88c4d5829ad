"""The public environment checker runs over every registered environment."""

from __future__ import annotations

import pytest

from arlkit.envs import list_envs, make
from arlkit.envs.checker import EnvCheckError, check_env
from arlkit.envs.frozenlake.env import FrozenLakeEnv


@pytest.mark.parametrize("name", list_envs(plugins=False))  # plugins: their own tests (tests/integrations)
def test_every_registered_env_passes_the_checker(name: str) -> None:
    report = check_env(name)
    assert not report.problems and len(report.checks) > 10


def test_checker_catches_a_nondeterministic_env() -> None:
    class Flaky(FrozenLakeEnv):
        calls = 0

        def reset(self, task, seed):  # type: ignore[no-untyped-def]
            Flaky.calls += 1
            return super().reset(task, seed + Flaky.calls)  # ignores the seed's meaning

    env = make("frozenlake")
    flaky = Flaky(env.config)  # type: ignore[attr-defined]
    with pytest.raises(EnvCheckError, match="same seed"):
        check_env(flaky)


def test_checker_catches_a_broken_restore() -> None:
    class NoRestore(FrozenLakeEnv):
        def restore(self, snapshot):  # type: ignore[no-untyped-def]
            pass

    env = make("frozenlake", slippery=False)
    with pytest.raises(EnvCheckError, match="restore"):
        check_env(NoRestore(env.config))  # type: ignore[attr-defined]
