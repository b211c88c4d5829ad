"""The terminal environment's two session modes side by side: stateless and persistent.

For every shipped test task, the reference path is played once in each mode on one environment
(one command per turn, then ``submit``), and the wall time of each turn is recorded: the first
command (a persistent session starts its sandbox there), every later command, and the check.
Stateless: each command is a fresh sandbox run that unpacks the task folder, runs bash and packs
it again; the check is another run. Persistent: one sandbox per trajectory holds a live shell;
each command is a round trip through its pipes plus a hash of the folder; the check runs beside
the shell in the same sandbox. Both modes must pass every task; the script fails otherwise.

Run: .venv/bin/python benchmarks/bench_terminal_session.py [--json benchmarks/results/terminal_session.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

from arlkit.envs.protocol import Task
from arlkit.envs.terminal import TerminalConfig, TerminalEnv
from arlkit.envs.terminal.tasks import split_tasks


def _play(mode: str) -> dict[str, list[float]]:
    config = TerminalConfig(session=mode)  # type: ignore[arg-type]
    env = TerminalEnv(config)
    times: dict[str, list[float]] = {"first": [], "later": [], "check": [], "task": []}
    for spec in split_tasks(env.all_tasks(), "test", config.split_seed, config.test_fraction):
        env.reset(Task(spec.task_id, spec.to_payload()), 0)
        begin = time.perf_counter()
        for i, command in enumerate(spec.solution):
            start = time.perf_counter()
            env.step(command)
            times["first" if i == 0 else "later"].append(time.perf_counter() - start)
        start = time.perf_counter()
        result = env.step("submit")
        times["check"].append(time.perf_counter() - start)
        times["task"].append(time.perf_counter() - begin)
        if not result.success:
            raise SystemExit(f"{mode}: the reference solution of {spec.name} failed its check")
        env.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    results: dict[str, object] = {"machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()}}
    for mode in ("stateless", "persistent"):
        times = _play(mode)
        row = {k: {"n": len(v), "median_ms": round(1000 * statistics.median(v), 1), "total_s": round(sum(v), 2)}
               for k, v in times.items() if v}
        results[mode] = row
        print(f"{mode:10s} " + "  ".join(f"{k}: median {r['median_ms']} ms (n={r['n']})" for k, r in row.items()), flush=True)
    ratio = results["stateless"]["task"]["total_s"] / results["persistent"]["task"]["total_s"]  # type: ignore[index]
    results["stateless_over_persistent_task_time"] = round(ratio, 2)
    print(f"whole tasks: stateless / persistent = {ratio:.2f}x")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
