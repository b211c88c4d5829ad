"""Environment speed and the oracle's cost (issue #2's benchmark).

Reports, as medians over repeats on this machine:
- raw env steps/s for FrozenLake (8x8 slippery) and Sokoban (6x6, one box) with random actions;
- steps/s through the rollout engine with the scripted random policy (prompt building and parsing
  included);
- the cost of the exact oracle: building the model and Q* for all horizons of an 8x8 slippery map
  with T_max = 70, as a share of the wall time of one `oracle` evaluation on 100 such maps.

Run: .venv/bin/python benchmarks/bench_envs.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from arlkit.envs import make
from arlkit.config import EnvSpec
from arlkit.envs.frozenlake.maps import lake_model
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.policies import make_policy
from arlkit.rollout import make_jobs, run_rollouts


def raw_steps_per_second(name: str, config: dict, steps: int = 20000) -> float:
    env = make(name, **config)
    tasks = env.tasks("test", 50)
    actions = list(env.admissible_actions())  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    done, i, start = True, 0, time.perf_counter()
    for n in range(steps):
        if done:
            env.reset(tasks[i % len(tasks)], i)
            i += 1
        done = env.step(actions[int(rng.integers(len(actions)))]).done
    return steps / (time.perf_counter() - start)


def engine_steps_per_second(name: str, config: dict) -> float:
    make_env = lambda: make(name, **config)  # noqa: E731
    tasks = make_env().tasks("test", 50)
    start = time.perf_counter()
    trajs = run_rollouts(make_env, make_jobs(tasks, 8, 30, 0), make_policy("random"))
    return sum(len(t.turns) for t in trajs) / (time.perf_counter() - start)


def oracle_share() -> tuple[float, float, float]:
    config = {"size": 8, "slippery": True, "t_max": 70}
    env = make("frozenlake", **config)
    tasks = env.tasks("test", 100)
    lake_model.cache_clear()
    start = time.perf_counter()
    for task in tasks:
        model = lake_model(tuple(task.payload["desc"]), True, 1.0 / 3.0)
        model.q_values(70)
        model.q_values(70, gamma=1.0)
    oracle_time = time.perf_counter() - start
    lake_model.cache_clear()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run_eval(EvalConfig(env=EnvSpec("frozenlake", config), policies=("oracle",), tasks=100, samples=8),
                 Path(tmp) / "run")
        eval_time = time.perf_counter() - start
    return oracle_time, eval_time, oracle_time / eval_time


def main() -> None:
    repeats = 3
    rows = []
    for label, name, config in [
        ("FrozenLake 8x8 slippery", "frozenlake", {"size": 8}),
        ("Sokoban 6x6, 1 box", "sokoban", {}),
    ]:
        raw = statistics.median(raw_steps_per_second(name, config) for _ in range(repeats))
        eng = statistics.median(engine_steps_per_second(name, config) for _ in range(repeats))
        rows.append((label, raw, eng))
    print(f"{'environment':<26}{'raw steps/s':>14}{'engine steps/s':>16}")
    for label, raw, eng in rows:
        print(f"{label:<26}{raw:>14,.0f}{eng:>16,.0f}")
    shares = [oracle_share() for _ in range(repeats)]
    oracle_time = statistics.median(s[0] for s in shares)
    eval_time = statistics.median(s[1] for s in shares)
    share = statistics.median(s[2] for s in shares)
    print(
        f"\nQ* for 100 8x8 slippery maps (T_max 70, gamma 0.95 and 1): {oracle_time:.3f} s; "
        f"oracle eval of those maps (8 samples x 4 budgets): {eval_time:.2f} s; oracle share {100 * share:.1f}%"
    )


if __name__ == "__main__":
    main()
