"""Speed of the ``webshop`` environment on the shipped catalogue (issue #19's benchmark).

Reports, as medians over repeats on this machine:
- loading the catalogue (1,200 products, 1,500 goals, gzipped JSON) and building the BM25 index, once
  per process;
- reset cost (reset + first page) and step cost with random admissible actions, one environment in a loop
  (BM25 results are cached per query, as in a long run);
- steps/s and resets/s through the rollout engine with the ``random`` policy (prompt building and parsing
  included; the engine builds one environment per trajectory);
- the oracle's cost: building one goal's oracle (the products that can score 1, the oracle's searches),
  and steps/s of the ``oracle`` policy through the engine.

Run: .venv/bin/python benchmarks/bench_webshop.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from arlkit.envs import make
from arlkit.envs.webshop import WebshopEnv
from arlkit.envs.webshop import env as webshop_env
from arlkit.policies import make_policy
from arlkit.rollout import make_jobs, run_rollouts


def load_and_index() -> float:
    webshop_env._STORES.clear()
    start = time.perf_counter()
    env = make("webshop")
    env.tasks("test", 1)
    assert isinstance(env, WebshopEnv)
    env.store.index.search("warm up the index")
    return time.perf_counter() - start


def loop_costs(steps: int = 20000) -> tuple[float, float]:
    """(seconds per reset, seconds per step) with random admissible actions."""
    env = make("webshop")
    assert isinstance(env, WebshopEnv)
    tasks = env.tasks("test", 500)
    rng = np.random.default_rng(0)
    reset_s = step_s = 0.0
    done, i = True, 0
    for _ in range(steps):
        if done:
            start = time.perf_counter()
            env.reset(tasks[i % len(tasks)], i)
            reset_s += time.perf_counter() - start
            i += 1
        actions = env.admissible_actions()
        start = time.perf_counter()
        done = env.step(actions[int(rng.integers(len(actions)))]).done
        step_s += time.perf_counter() - start
    return reset_s / i, step_s / steps


def engine(policy: str, samples: int) -> tuple[float, float]:
    """(steps/s, trajectories/s) through the engine on the 500 test goals."""
    tasks = make("webshop").tasks("test", 500)
    start = time.perf_counter()
    trajectories = run_rollouts(lambda: make("webshop"), make_jobs(tasks, samples, 15, 0), make_policy(policy))
    wall = time.perf_counter() - start
    return sum(len(t.turns) for t in trajectories) / wall, len(trajectories) / wall


def oracle_build() -> float:
    env = make("webshop")
    assert isinstance(env, WebshopEnv)
    tasks = env.tasks("train", 200)
    env.store.oracles.clear()
    start = time.perf_counter()
    for task in tasks:
        env.reset(task, 0)
        env.shortest_solution_length()
    return (time.perf_counter() - start) / len(tasks)


def main() -> None:
    repeats = 3
    rows = {
        "load catalogue + build BM25 index (s, once per process)": statistics.median(load_and_index() for _ in range(repeats)),
    }
    costs = [loop_costs() for _ in range(repeats)]
    rows["reset, one env in a loop (ms)"] = 1000 * statistics.median(c[0] for c in costs)
    rows["step, random admissible action (ms)"] = 1000 * statistics.median(c[1] for c in costs)
    random = [engine("random", 4) for _ in range(repeats)]
    rows["engine + random policy: steps/s"] = statistics.median(r[0] for r in random)
    rows["engine + random policy: resets (trajectories)/s"] = statistics.median(r[1] for r in random)
    rows["oracle for one goal, built (ms)"] = 1000 * statistics.median(oracle_build() for _ in range(repeats))
    rows["engine + oracle policy: steps/s"] = statistics.median(engine("oracle", 1)[0] for _ in range(repeats))
    width = max(len(k) for k in rows)
    for key, value in rows.items():
        print(f"{key:<{width}}  {value:>10.3f}")


if __name__ == "__main__":
    main()
