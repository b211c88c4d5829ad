"""Speed of the ``sql`` and ``bfcl`` environments (SQL and tool-call figures).

Reports, as medians over repeats on this machine:
- SQL steps/s: ``env.step`` on the shipped test tasks, (a) a cheap exploratory query
  (``SELECT * FROM <table> LIMIT 5``), (b) each task's gold query (joins, grouping, sub-queries),
  (c) whole one-turn episodes ``reset`` + ``submit <gold>`` (scoring included); and the latency of a
  refused statement and of a query stopped at the time limit;
- tool-call steps/s: ``env.step`` along the ground-truth path of every BFCL multi_turn_base entry
  (parse with ``ast``, run on BFCL's classes, BFCL's checks on ``finish_turn()``), and for
  rejected hostile call strings (needs the bfcl extra);
- both through the rollout engine with the scripted ``oracle`` policy (prompt building and reply
  parsing included).

Run: .venv/bin/python benchmarks/bench_sql_tools.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

from arlkit.envs import make
from arlkit.envs.sql.env import SqlEnv
from arlkit.envs.bfcl import BfclEnv
from arlkit.policies import make_policy
from arlkit.rollout import make_jobs, run_rollouts


def _rate(count: int, start: float) -> float:
    return count / (time.perf_counter() - start)


def sql_figures(cache: str) -> dict[str, float]:
    env = make("sql", cache_dir=cache)
    assert isinstance(env, SqlEnv)
    tasks = env.tasks("test", len(env.task_set.test))
    for task in tasks:  # warm the connections and the gold cache
        env.reset(task, 0)
    out: dict[str, float] = {}

    start, n = time.perf_counter(), 0
    for _ in range(20):
        for task in tasks:
            env.reset(task, 0)
            table = env._databases[task.payload["db_id"]].tables[0].name  # benchmark only: reads a private field
            env.step(f"SELECT * FROM {table} LIMIT 5")
            n += 1
    out["sql steps/s, simple query"] = _rate(n, start)

    start, n = time.perf_counter(), 0
    for _ in range(5):
        for task in tasks:
            env.reset(task, 0)
            env.step(task.payload["query"])
            n += 1
    out["sql steps/s, gold queries"] = _rate(n, start)

    start, n = time.perf_counter(), 0
    for _ in range(5):
        for task in tasks:
            env.reset(task, 0)
            env.step("submit " + task.payload["query"])
            n += 1
    out["sql episodes/s, reset + submit gold"] = _rate(n, start)

    env.reset(tasks[0], 0)
    start = time.perf_counter()
    for _ in range(200):
        env.step("DROP TABLE student")
    out["sql refused statements/s"] = 200 / (time.perf_counter() - start)
    start = time.perf_counter()
    env.step("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r")
    out["sql runaway query stopped after, s"] = time.perf_counter() - start
    return out


def tools_figures() -> dict[str, float]:
    env = make("bfcl")
    assert isinstance(env, BfclEnv)
    tasks = env.tasks("test", len(env.entries))
    # The expert path of every entry, recorded once, then replayed without the oracle's cost.
    paths = []
    for task in tasks:
        env.reset(task, 0)
        actions = []
        while True:
            action = env.optimal_actions(env.t_max)[0]
            actions.append(action)
            if env.step(action).done:
                break
        paths.append((task, actions))
    out: dict[str, float] = {}
    start, n = time.perf_counter(), 0
    for _ in range(3):
        for task, actions in paths:
            env.reset(task, 0)
            for action in actions:
                env.step(action)
            n += len(actions)
    out["tool steps/s, expert path (incl. checks)"] = _rate(n, start)
    hostile = [
        "__import__('os').system('id')",
        "mv(source=(lambda: 'a')(), destination='b')",
        "mean(numbers=[x for x in range(9)])",
        "ls(); finish_turn(); ls()",
        "cd(folder='a', folder='b')",
    ]
    env.reset(tasks[0], 0)
    start, n = time.perf_counter(), 0
    for _ in range(400):
        for text in hostile:
            env.step(text)
            n += 1
    out["tool steps/s, rejected hostile calls"] = _rate(n, start)
    return out


def engine_figure(name: str, config: dict[str, object], budget: int) -> float:
    make_env: Callable[[], object] = lambda: make(name, **config)  # noqa: E731
    env = make(name, **config)
    tasks = env.tasks("test", 20)
    start = time.perf_counter()
    trajectories = run_rollouts(make_env, make_jobs(tasks, 4, budget, 0), make_policy("oracle"))  # type: ignore[arg-type]
    return sum(len(t.turns) for t in trajectories) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as cache:
        for _ in range(args.repeats):
            for key, value in {**sql_figures(cache), **tools_figures()}.items():
                runs.setdefault(key, []).append(value)
            runs.setdefault("sql engine steps/s (oracle policy)", []).append(
                engine_figure("sql", {"cache_dir": cache}, 10)
            )
            runs.setdefault("bfcl engine steps/s (oracle policy)", []).append(engine_figure("bfcl", {}, 24))
    width = max(len(k) for k in runs)
    for key, values in runs.items():
        print(f"{key:<{width}}  {statistics.median(values):>10.1f}")


if __name__ == "__main__":
    main()
