"""Speed of the sandbox and of the ``code`` environment (issue #5's sandbox figures).

Reports, as medians over repeats on this machine:
- runs/s of a trivial program (``print(1)``) as a bare ``subprocess.run`` of the interpreter, and
  sandboxed at every isolation level that works here; the overhead of each level is the ratio of
  the bare rate to the sandboxed rate (how many times longer a sandboxed run takes);
- runs/s with 8 runs in flight at once (threads), at the strongest level;
- ``code`` environment steps/s on the shipped test tasks: a step with the reference solution
  (every public and hidden test of the task in one sandbox launch) and a step with a wrong program.

Levels are timed interleaved (shuffled order each round, median over rounds) so that load on a
shared machine hits every candidate alike.

Run: .venv/bin/python benchmarks/bench_sandbox.py [--rounds 8] [--batch 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from arlkit.envs import make
from arlkit.envs.code.env import CodeEnv
from arlkit.sandbox import ISOLATION_LEVELS, Sandbox, SandboxConfig, available_levels


def _median_rate(fn: Callable[[], int], repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        count = fn()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def interleaved_rates(candidates: dict[str, Callable[[], None]], rounds: int, batch: int) -> dict[str, float]:
    """Runs/s of each candidate: ``rounds`` rounds, each timing ``batch`` runs of every candidate in
    a shuffled order; the median over rounds. Load on a shared machine then hits all alike."""
    for run in candidates.values():
        run()  # warm up (probes, slot files, page cache)
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    order = list(candidates)
    rng = random.Random(0)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            start = time.perf_counter()
            for _ in range(batch):
                candidates[name]()
            samples[name].append(batch / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in samples.items()}


def bare_run() -> None:
    subprocess.run([sys.executable, "-s", "-c", "print(1)"], capture_output=True, check=True)


def sandboxed_run(sandbox: Sandbox) -> Callable[[], None]:
    def run() -> None:
        result = sandbox.run_python("print(1)")
        assert result.ok, result

    return run


def parallel_rate(sandbox: Sandbox, runs: int, repeats: int, threads: int) -> float:
    one = sandboxed_run(sandbox)

    def batch() -> int:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda _: one(), range(runs)))
        return runs

    one()
    return _median_rate(batch, repeats)


def code_step_rates(repeats: int) -> dict[str, float]:
    env = make("code")
    assert isinstance(env, CodeEnv)
    tasks = env.tasks("test", 17)

    def steps(program_for: Callable[[CodeEnv], str]) -> Callable[[], int]:
        def batch() -> int:
            for task in tasks:
                env._cache.clear()  # measure the sandboxed run, not the evaluation cache
                env.reset(task, seed=0)
                env.step(program_for(env))
            return len(tasks)

        return batch

    return {
        "reference step": _median_rate(steps(lambda e: e.optimal_actions(e.t_max)[0]), repeats),
        "wrong-program step": _median_rate(steps(lambda e: "print('no idea')\n"), repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="interleaved rounds (median over rounds)")
    parser.add_argument("--batch", type=int, default=5, help="runs per candidate per round")
    parser.add_argument("--repeats", type=int, default=3, help="timed batches of the other figures (median)")
    args = parser.parse_args()

    levels = available_levels(SandboxConfig())
    working = [lv for lv in ISOLATION_LEVELS if levels[lv] is None]
    print("isolation levels here:", {lv: ("works" if why is None else why) for lv, why in levels.items()})
    candidates: dict[str, Callable[[], None]] = {"bare subprocess": bare_run}
    for level in working:
        sandbox = Sandbox(SandboxConfig(isolation=level, min_isolation="none"))
        candidates[f"sandbox, level {level}"] = sandboxed_run(sandbox)
    rates = interleaved_rates(candidates, args.rounds, args.batch)
    bare = rates["bare subprocess"]
    for name, rate in rates.items():
        print(f"{name:<28} {rate:8.1f} runs/s   {1000 / rate:6.1f} ms/run   overhead {bare / rate:4.1f}x")
    best = Sandbox(SandboxConfig(min_isolation="none"))
    parallel = parallel_rate(best, 40, args.repeats, threads=8)
    print(f"{'sandbox, ' + best.isolation + ', 8 in flight':<28} {parallel:8.1f} runs/s")
    for name, rate in code_step_rates(args.repeats).items():
        print(f"{'code env, ' + name:<28} {rate:8.1f} steps/s  (level {best.isolation})")


if __name__ == "__main__":
    main()
