"""Every shipped reference solution solves its task through the environment, within T_max = 1 turn."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from arlkit.envs import make
from arlkit.envs.code.env import CodeEnv
from arlkit.envs.code.data import shipped_problems


def test_every_reference_solves_its_task_in_one_turn() -> None:
    problems = shipped_problems()

    def solve(problem) -> tuple[str, bool, str]:  # type: ignore[no-untyped-def]
        env = make("code")  # one env per thread: an env runs one trajectory at a time
        assert isinstance(env, CodeEnv)
        env.reset(CodeEnv.task_from_problem(problem), seed=0)
        action = env.optimal_actions(env.t_max)[0]
        result = env.step(action)
        return problem.problem_id, result.success, result.observation

    with ThreadPoolExecutor(3) as pool:
        outcomes = list(pool.map(solve, problems))
    failures = [(pid, obs[:300]) for pid, ok, obs in outcomes if not ok]
    assert not failures, failures
    assert len(outcomes) >= 60
