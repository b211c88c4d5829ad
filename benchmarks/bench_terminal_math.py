"""Speed of the ``terminal`` and ``math-tir`` environments, and the share of it spent in the sandbox.

Reports, on this machine:
- terminal: steps/s along every test task's reference path (each command and the checker is one
  sandbox run: unpack the task folder, run bash, pack it again), (a) stepping one environment in
  a loop and (b) through the rollout engine with the ``oracle`` policy (its worker pool steps
  several environments at once);
- math-tir: steps/s of the two-turn tool-use path (a code block that prints the answer, run in the
  sandbox, then the boxed answer) through the engine, and of the one-turn oracle (no sandbox);
- for each: sandbox seconds / wall seconds (summed over concurrent runs, so above 1 when the
  engine overlaps them).

Run: .venv/bin/python benchmarks/bench_terminal_math.py
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from arlkit.envs import make
from arlkit.envs.math_tir import MathTirEnv
from arlkit.envs.terminal import TerminalEnv
from arlkit.policies import make_policy
from arlkit.policies.protocol import Reply, Request
from arlkit.policies.scripted import format_reply
from arlkit.rollout import make_jobs, run_rollouts
from arlkit.sandbox import Sandbox

_LOCK = threading.Lock()
_SANDBOX_S = [0.0]
_original_run = Sandbox.run


def _timed_run(self: Sandbox, *args: object, **kwargs: object):  # noqa: ANN202
    start = time.perf_counter()
    try:
        return _original_run(self, *args, **kwargs)  # type: ignore[arg-type]
    finally:
        with _LOCK:
            _SANDBOX_S[0] += time.perf_counter() - start


Sandbox.run = _timed_run  # type: ignore[method-assign]  # benchmark only: count time in the sandbox


def _measure(body: Callable[[], int]) -> tuple[float, float]:
    """(steps/s, sandbox share) of ``body``, which returns its number of steps."""
    _SANDBOX_S[0] = 0.0
    start = time.perf_counter()
    steps = body()
    wall = time.perf_counter() - start
    return steps / wall, _SANDBOX_S[0] / wall


def terminal_loop() -> int:
    env = make("terminal")
    assert isinstance(env, TerminalEnv)
    steps = 0
    for task in env.tasks("test", 21):
        env.reset(task, 0)
        while not env.step(env.optimal_actions(env.t_max)[0]).done:
            steps += 1
        steps += 1
    return steps


def engine(name: str, config: dict[str, object], policy: object, n: int, budget: int) -> Callable[[], int]:
    env = make(name, **config)
    tasks = env.tasks("test", n)

    def body() -> int:
        trajectories = run_rollouts(lambda: make(name, **config), make_jobs(tasks, 2, budget, 0), policy)  # type: ignore[arg-type]
        assert all(t.success for t in trajectories)
        return sum(len(t.turns) for t in trajectories)

    return body


class Demonstration:
    """The math-tir tool-use path: code that prints the answer, then the boxed answer."""

    name = "demonstration"
    context_length = None

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        out = []
        for request in requests:
            env = request.env
            assert isinstance(env, MathTirEnv)
            out.append(Reply(format_reply("use the tool", env.demonstration()[min(request.turn, 1)])))
        return out


def main() -> None:
    rows = {
        "terminal, one env in a loop (reference path + checker)": _measure(terminal_loop),
        "terminal, engine + oracle (21 tasks x 2)": _measure(engine("terminal", {}, make_policy("oracle"), 21, 16)),
        "math-tir, engine + code-then-answer (60 tasks x 2)": _measure(engine("math-tir", {}, Demonstration(), 60, 8)),
        "math-tir, engine + oracle answer only (60 tasks x 2)": _measure(engine("math-tir", {}, make_policy("oracle"), 60, 8)),
    }
    width = max(len(k) for k in rows)
    print(f"{'':<{width}}  {'steps/s':>9}  {'sandbox s / wall s':>18}")
    for key, (rate, share) in rows.items():
        print(f"{key:<{width}}  {rate:>9.1f}  {share:>18.2f}")


if __name__ == "__main__":
    main()
