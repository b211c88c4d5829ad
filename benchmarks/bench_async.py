"""The asynchronous engine against the lockstep schedule, in one run (issue #14's figures).

A scripted OpenAI-compatible server (:class:`arlkit.policies.loopback.ScriptedServer`) runs in a
separate process. Its latency is log-normal (median 300 ms, sigma 0.5), and 5% of requests wait
3 s instead. Each trajectory-turn's latency is drawn from the request's seed, so both schedules
meet the same waits, and the benchmark can compute an ideal schedule (zero engine overhead: each
trajectory takes the sum of its own waits). Four measurements:

1. ``code``: tasks × samples against the server, which replies a new wrong program every turn, so
   every turn is a sandboxed run. Lockstep vs async turns/s, and the bound set by the sandbox itself: code-env
   steps/s with ``env_workers`` steps in flight, measured here the same minute.
2. ``frozenlake``: 256 trajectories × 20 turns against the server (the reply keeps the agent in
   place, so every trajectory plays all 20 turns). Async turns/s vs ``concurrency / mean latency``
   and vs the ideal schedule.
3. Engine CPU per turn with a zero-latency server (process CPU time of this process: engine plus
   ``openai`` client), and with an in-process zero-latency async policy (the engine alone).
4. The ``hf`` nano policy in process: async (micro-batcher) vs lockstep turns/s, interleaved rounds.

Run: .venv/bin/python benchmarks/bench_async.py [--quick]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from arlkit.envs import make
from arlkit.policies import Reply, Request, SamplingConfig
from arlkit.policies.loopback import Latency, ScriptedServer
from arlkit.policies.openai_backend import OpenAIConfig, OpenAIPolicy, request_seed
from arlkit.rollout import EngineConfig, EngineStats, PromptConfig, make_jobs, run_rollouts
from arlkit.rollout.engine import default_env_workers

LATENCY = Latency(median_s=0.3, sigma=0.5, tail_share=0.05, tail_s=3.0)
WRONG_PROGRAM = "<think>try</think><action>def f():\n    return {}\n</action>"  # a new program each turn
STAY = "<think>wait</think><action>Up</action>"


def _reply_code(body: dict[str, Any]) -> str:
    # a program no turn has sent before (the code environment caches the results of programs it ran)
    return WRONG_PROGRAM.format(body["seed"])


def _reply_stay(body: dict[str, Any]) -> str:
    return STAY


def _serve(reply: Callable[[dict[str, Any]], str], latency: Latency, conn: Any) -> None:
    with ScriptedServer(reply, latency) as server:
        conn.send(server.base_url)
        conn.recv()  # until the parent says stop
        conn.send((server.requests, server.peak_in_flight))


class Server:
    """A :class:`ScriptedServer` in a child process (its CPU is not this process's)."""

    def __init__(self, reply: Callable[[dict[str, Any]], str], latency: Latency) -> None:
        self._conn, child = mp.Pipe()
        self._proc = mp.get_context("spawn").Process(target=_serve, args=(reply, latency, child), daemon=True)
        self._proc.start()
        self.base_url: str = self._conn.recv()
        self.requests = self.peak = 0

    def close(self) -> None:
        self._conn.send("stop")
        self.requests, self.peak = self._conn.recv()
        self._proc.join(timeout=30)


def _policy(url: str) -> OpenAIPolicy:
    config = OpenAIConfig(timeout=60.0, max_retries=2, max_concurrency=256, logprobs=False)
    return OpenAIPolicy("scripted", url, SamplingConfig(temperature=1.0, max_new_tokens=64), config)


def _timed(fn: Callable[[], list[Any]]) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _ideal_s(trajectories: Sequence[Any], latency: Latency, concurrency: int) -> float:
    """Wall time of an engine with no overhead: each trajectory takes the sum of its own waits
    (``concurrency`` >= trajectories here, so none waits for a slot)."""
    assert concurrency >= len(trajectories)
    return max(sum(latency.draw(request_seed(t.policy_seed, k)) for k in range(len(t.turns))) for t in trajectories)


def sandbox_bound(tasks: Sequence[Any], workers: int, steps: int) -> float:
    """``code`` steps/s with ``workers`` steps in flight (the wrong program, like the benchmark's)."""
    envs = [make("code") for _ in range(workers)]

    def run(i: int) -> None:
        env = envs[i % workers]
        env.reset(tasks[i % len(tasks)], i)
        env.step(env.parse_action(WRONG_PROGRAM.format(10**9 + i)).action)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(run, range(workers)))  # warm up
        start = time.perf_counter()
        list(pool.map(run, range(workers, workers + steps)))
    return steps / (time.perf_counter() - start)


def bench_code(n_tasks: int, samples: int, budget: int) -> dict[str, float]:
    tasks = _code_tasks(n_tasks)
    jobs = make_jobs(tasks, samples, budget, seed=1)
    server = Server(_reply_code, LATENCY)
    try:
        policy = _policy(server.base_url)
        workers = default_env_workers()
        t_async, got = _timed(lambda: run_rollouts(make_code, jobs, policy, engine=EngineConfig()))
        bound = sandbox_bound(tasks, workers, steps=max(64, len(jobs)))
        t_lock, ref = _timed(lambda: run_rollouts(make_code, jobs, policy, engine=EngineConfig(schedule="lockstep")))
        policy.close()
    finally:
        server.close()
    assert [t.to_json() for t in got] == [t.to_json() for t in ref]
    turns = sum(len(t.turns) for t in got)
    return {"turns": turns, "async_tps": turns / t_async, "lockstep_tps": turns / t_lock,
            "sandbox_bound_tps": bound, "workers": workers}


def make_code() -> Any:
    return make("code")


def _code_tasks(n: int) -> list[Any]:
    """Up to ``n`` distinct problems (train then test), cycled when fewer exist."""
    env = make("code")
    found: list[Any] = []
    for split in ("train", "test"):
        for k in range(200, 0, -1):
            try:
                found += env.tasks(split, k)
                break
            except ValueError:
                continue
    return [found[i % len(found)] for i in range(n)] if len(found) < n else found[:n]


def make_still_lake() -> Any:
    return make("frozenlake", size=4, slippery=False, t_max=20)


def bench_frozenlake(n: int, turns: int) -> dict[str, float]:
    tasks = make_still_lake().tasks("test", n)
    jobs = make_jobs(tasks, 1, turns, seed=2)
    server = Server(_reply_stay, LATENCY)
    try:
        policy = _policy(server.base_url)
        engine = EngineConfig(max_concurrency=256)
        t_async, got = _timed(lambda: run_rollouts(make_still_lake, jobs, policy, engine=engine))
        policy.close()
    finally:
        server.close()
    played = sum(len(t.turns) for t in got)
    assert played == n * turns, played
    concurrency = min(engine.max_concurrency, n)
    return {"turns": played, "async_tps": played / t_async, "issue_bound_tps": concurrency / LATENCY.mean_s(),
            "ideal_tps": played / _ideal_s(got, LATENCY, concurrency), "server_peak": server.peak}


class _Instant:
    """A zero-latency in-process async policy (the engine alone)."""

    name = "instant"

    async def agenerate(self, request: Request) -> Reply:
        return Reply(STAY)


def bench_cpu(n: int, turns: int) -> dict[str, float]:
    jobs = make_jobs(make_still_lake().tasks("test", n), 1, turns, seed=3)
    out: dict[str, float] = {}
    cpu = time.process_time()
    run_rollouts(make_still_lake, jobs, _Instant())
    out["engine_ms_per_turn"] = 1000 * (time.process_time() - cpu) / (n * turns)
    server = Server(_reply_stay, Latency())
    try:
        policy = _policy(server.base_url)
        cpu = time.process_time()
        run_rollouts(make_still_lake, jobs, policy)
        out["engine_client_ms_per_turn"] = 1000 * (time.process_time() - cpu) / (n * turns)
        policy.close()
    finally:
        server.close()
    return out


def bench_hf(n: int, budget: int, rounds: int) -> dict[str, float]:
    import torch

    from arlkit.policies.hf import HFPolicy, load_hf_model
    from arlkit.rollout.corpus import init_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        path = init_tiny_model("nano", Path(tmp) / "nano", seed=0)
        model, tokenizer = load_hf_model(path)
    torch.manual_seed(0)
    env = lambda: make("frozenlake", size=4, t_max=budget)  # noqa: E731
    jobs = make_jobs(env().tasks("test", n), 4, budget, seed=4)
    prompt = PromptConfig("announced", history=0, profile="compact")
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=24)
    rates: dict[str, list[float]] = {"async": [], "lockstep": []}
    for r in range(rounds):
        for name in (("async", "lockstep") if r % 2 == 0 else ("lockstep", "async")):
            policy = HFPolicy(model, tokenizer, sampling, attn_implementation="arlkit")
            stats = EngineStats()
            seconds, trajs = _timed(lambda: run_rollouts(env, jobs, policy, prompt, stats=stats,
                                                         engine=EngineConfig(schedule=name)))  # type: ignore[arg-type]
            rates[name].append(sum(len(t.turns) for t in trajs) / seconds)
    return {f"{k}_tps": statistics.median(v) for k, v in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller workloads (a smoke run)")
    parser.add_argument("--only", default="code,frozenlake,cpu,hf", help="comma-separated parts to run")
    args = parser.parse_args()
    q, parts = args.quick, set(args.only.split(","))
    if "code" in parts:
        _print_code(bench_code(16 if q else 64, 2 if q else 4, 2 if q else 3))
    if "frozenlake" in parts:
        _print_lake(bench_frozenlake(64 if q else 256, 10 if q else 20))
    if "cpu" in parts:
        cpu = bench_cpu(64 if q else 256, 10 if q else 20)
        print(f"engine CPU per turn, zero latency: engine alone {cpu['engine_ms_per_turn']:.3f} ms, "
              f"engine + openai client {cpu['engine_client_ms_per_turn']:.3f} ms", flush=True)
    if "hf" in parts:
        hf = bench_hf(4 if q else 16, 8, 2 if q else 4)
        print(f"hf nano in process: async {hf['async_tps']:.1f} turns/s, lockstep {hf['lockstep_tps']:.1f} turns/s, "
              f"ratio {hf['async_tps'] / hf['lockstep_tps']:.2f}", flush=True)


def _print_code(code: dict[str, float]) -> None:
    print(f"code ({code['turns']:.0f} turns, env_workers {code['workers']:.0f}): async {code['async_tps']:.1f} turns/s, "
          f"lockstep {code['lockstep_tps']:.1f} turns/s, ratio {code['async_tps'] / code['lockstep_tps']:.1f}x; "
          f"sandbox bound {code['sandbox_bound_tps']:.1f} steps/s, async at "
          f"{100 * code['async_tps'] / code['sandbox_bound_tps']:.0f}% of it", flush=True)


def _print_lake(lake: dict[str, float]) -> None:
    print(f"frozenlake ({lake['turns']:.0f} turns): async {lake['async_tps']:.0f} turns/s; concurrency/mean latency "
          f"{lake['issue_bound_tps']:.0f} turns/s (ratio {lake['async_tps'] / lake['issue_bound_tps']:.2f}); ideal "
          f"schedule {lake['ideal_tps']:.0f} turns/s (ratio {lake['async_tps'] / lake['ideal_tps']:.2f}); "
          f"server peak in flight {lake['server_peak']:.0f}", flush=True)


if __name__ == "__main__":
    main()
