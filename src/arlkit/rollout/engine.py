"""The rollout engine: every trajectory advances on its own, as soon as what it waits for is ready.

Each trajectory is its own asyncio task: it resets its environment, sends its request, steps the
environment on the reply and sends the next request, until it ends (success, terminal state, budget
spent, the policy's context window full, or a backend error; each records why in ``ended_by``).
Two resources are bounded (:class:`EngineConfig`): policy requests in flight and environment steps
in flight. A served model (:class:`~arlkit.policies.protocol.AsyncPolicy`) gets each request the
moment it is ready; a local batched policy (Hugging Face, scripted) is fed by a micro-batcher
(:mod:`arlkit.rollout.dispatch`). Environments whose steps wait on something slow (sandboxed program
runs: ``blocking_steps``) step in a worker pool; the others step inline, which costs less.

Each trajectory carries its own environment and policy seeds, and a reply depends only on its
request, so outcomes depend neither on which trajectories share a batch nor on the order they
finish: results are those of the lockstep schedule (``EngineConfig(schedule="lockstep")``, one
batch per tick and environments stepped one by one, kept for comparison) at any concurrency.

Every turn records the remaining budget its prompt announced (``TurnRecord.remaining``) and, when
the caller asks (``keep_prompts``), the exact messages the policy was shown and the prompt token ids
the backend reports (``TurnRecord.prompt``), so callers read what the policy saw from the trajectory.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from arlkit.envs.capabilities import Closable, close_env, session_cap, steps_block
from arlkit.envs.protocol import Env, Task
from arlkit.policies.protocol import Policy, Reply, Request
from arlkit.rollout.dispatch import EngineStats, policy_caller
from arlkit.rollout.prompts import PromptConfig
from arlkit.rollout.records import Trajectory
from arlkit.rollout.seeds import derive_seed
from arlkit.rollout.turns import LiveTrajectory, next_request, record_reply, start_trajectory

__all__ = [
    "EngineConfig", "EngineStats", "Job", "Start", "aanswer", "answer", "arun_rollouts", "arun_starts",
    "default_env_workers", "make_jobs", "run_rollouts", "run_starts",
]

_R = TypeVar("_R")


@dataclass(frozen=True)
class Job:
    """One trajectory to run.

    Attributes:
        task: the task.
        sample: index of the sample for this task.
        budget: the turn budget T.
        env_seed: seed of the environment's randomness.
        policy_seed: seed of the policy's sampling.
        group: optional group label copied to the trajectory.
    """

    task: Task
    sample: int
    budget: int
    env_seed: int
    policy_seed: int
    group: str | None = None


def make_jobs(tasks: Sequence[Task], samples: int, budget: int, seed: int, group: str | None = None) -> list[Job]:
    """``samples`` jobs per task; seeds depend on (seed, task, sample) only, never on the budget,
    so runs at different budgets share their random numbers."""
    return [
        Job(
            task,
            j,
            budget,
            derive_seed(seed, "env", task.task_id, j),
            derive_seed(seed, "policy", task.task_id, j),
            group,
        )
        for task in tasks
        for j in range(samples)
    ]


def default_env_workers() -> int:
    """Environment steps in flight by default: 4 per CPU core, at most 64. Sandboxed runs spend most of
    their wall time starting processes and waiting on them; on a 2-core machine 8 in flight sustain
    26-29 sandbox runs/s (``benchmarks/bench_sandbox.py``), against ~10 one at a time."""
    return max(1, min(64, 4 * (os.cpu_count() or 1)))


@dataclass(frozen=True)
class EngineConfig:
    """How the engine schedules trajectories (none of it changes results).

    Attributes:
        max_active: most trajectories alive at once (bounds memory, e.g. KV caches); an
            environment's ``max_sessions`` (a server's session limit) caps it further.
        max_concurrency: most policy requests in flight (for a batched policy: the largest batch).
        env_workers: most environment steps in flight, for environments with ``blocking_steps``
            (``None``: :func:`default_env_workers`).
        batch_wait_s: how long a batched policy's micro-batcher waits for more requests once one
            is ready, while some trajectories are still stepping their environments.
        schedule: ``async`` (each trajectory on its own) or ``lockstep`` (one ``generate`` call per
            tick for every running trajectory, environment steps one at a time: every trajectory
            waits for the slowest, for comparisons; ``max_concurrency`` and ``env_workers`` unused).
    """

    max_active: int = 256
    max_concurrency: int = 256
    env_workers: int | None = None
    batch_wait_s: float = 0.005
    schedule: Literal["async", "lockstep"] = "async"

    def __post_init__(self) -> None:
        for name in ("max_active", "max_concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.env_workers is not None and self.env_workers < 1:
            raise ValueError(f"env_workers must be >= 1 (or null for the default), got {self.env_workers}")
        if not self.batch_wait_s >= 0:
            raise ValueError(f"batch_wait_s must be >= 0, got {self.batch_wait_s}")
        if self.schedule not in ("async", "lockstep"):
            raise ValueError(f"unknown schedule {self.schedule!r}; valid choices: async, lockstep")


@dataclass(frozen=True)
class Start:
    """How one trajectory begins: a fresh environment, then its first state and record (``begin``
    runs where the environment's steps run: inline, or in the worker pool when they block)."""

    make_env: Callable[[], Env]
    begin: Callable[[Env], LiveTrajectory]


async def arun_rollouts(
    make_env: Callable[[], Env],
    jobs: Sequence[Job],
    policy: Policy,
    prompt: PromptConfig | None = None,
    *,
    engine: EngineConfig | None = None,
    on_finish: Callable[[Trajectory], None] | None = None,
    policy_name: str | None = None,
    keep_prompts: bool = False,
    stats: EngineStats | None = None,
) -> list[Trajectory]:
    """:func:`run_rollouts` inside a running event loop (e.g. an async agent loop)."""
    prompt = prompt or PromptConfig()
    for job in jobs:
        if job.budget < 1:
            raise ValueError(f"a budget must be >= 1 turn, got {job.budget}")
    name = policy_name or str(getattr(policy, "name", type(policy).__name__))

    def begin(job: Job) -> Callable[[Env], LiveTrajectory]:
        return lambda env: start_trajectory(
            env, job.task, sample=job.sample, budget=job.budget, env_seed=job.env_seed, policy_seed=job.policy_seed,
            group=job.group, policy_name=name, prompt=prompt,
        )

    starts = [Start(make_env, begin(job)) for job in jobs]
    played = await arun_starts(starts, policy, engine=engine, on_finish=on_finish, keep_prompts=keep_prompts,
                               stats=stats)
    return [live.trajectory for live in played]


async def arun_starts(
    starts: Sequence[Start],
    policy: Policy,
    *,
    engine: EngineConfig | None = None,
    on_finish: Callable[[Trajectory], None] | None = None,
    keep_prompts: bool = False,
    stats: EngineStats | None = None,
) -> list[LiveTrajectory]:
    """Play every start to its end; the played trajectories in start order. The engine's core:
    :func:`arun_rollouts` starts from jobs, the step-level analyses from restored states."""
    engine = engine or EngineConfig()
    stats = stats if stats is not None else EngineStats()
    stats.total += len(starts)
    lockstep = engine.schedule == "lockstep"
    caller = policy_caller(  # lockstep: every running trajectory's request in one generate call per tick
        policy, max_concurrency=engine.max_active if lockstep else engine.max_concurrency,
        wait_s=math.inf if lockstep else engine.batch_wait_s, stats=stats, prefer_batches=lockstep,
    )
    workers = 1 if lockstep else (engine.env_workers or default_env_workers())
    pool: list[ThreadPoolExecutor] = []
    env_slots = asyncio.Semaphore(workers)
    loop = asyncio.get_running_loop()

    async def on_env(blocking: bool, fn: Callable[..., _R], *args: Any) -> _R:
        if not blocking:
            return fn(*args)
        if not pool:
            pool.append(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="arlkit-env"))
        async with env_slots:  # counted while running, not while queued for a worker
            stats.env_step_started()
            try:
                return await loop.run_in_executor(pool[0], fn, *args)
            finally:
                stats.env_steps_in_flight -= 1

    built: dict[int, Env] = {}  # the first start's environment, built early to read its session cap

    async def play(index: int) -> LiveTrajectory:
        start = starts[index]
        env = built.pop(index) if index in built else start.make_env()
        blocking = steps_block(env)
        try:
            live = await on_env(blocking, start.begin, env)
            while live.trajectory.ended_by is None:
                request = next_request(live)
                reply = await caller.submit(index, request)
                before = len(live.trajectory.turns)
                await on_env(blocking, record_reply, live, request, reply, keep_prompts)
                stats.count_turns(live.trajectory.policy, live.trajectory.turns[before:])
        finally:  # what the environment holds for the trajectory (a shell session), however it ended
            if isinstance(env, Closable):
                await asyncio.shield(on_env(blocking, close_env, env))
        return live

    results: list[LiveTrajectory | None] = [None] * len(starts)
    order = iter(range(len(starts)))

    async def worker() -> None:
        caller.join()
        try:
            for index in order:  # shared: each worker takes the next start
                live = await play(index)
                results[index] = live
                stats.done += 1
                if on_finish is not None:
                    on_finish(live.trajectory)
        finally:
            caller.leave()

    tasks: list[asyncio.Future[None]] = []
    try:
        active = min(engine.max_active, len(starts))
        if starts:  # every trajectory holds one environment: at most max_sessions of them alive at once
            built[0] = starts[0].make_env()
            active = min(active, session_cap(built[0]) or active)
        tasks = [asyncio.ensure_future(worker()) for _ in range(active)]
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for env in built.values():  # built but never played (the run failed first)
            close_env(env)
        caller.close()
        for executor in pool:
            executor.shutdown(wait=True, cancel_futures=True)
        await _release(policy)
    return [live for live in results if live is not None]


async def _release(policy: Policy) -> None:
    """Let an async policy close what it opened on this event loop (``release_loop()``, optional)."""
    release = getattr(policy, "release_loop", None)
    if callable(release):
        await release()


async def aanswer(policy: Policy, requests: Sequence[Request], *, max_concurrency: int = 256) -> list[Reply]:
    """One reply per request (no environment steps), sent through the engine's policy path: at
    once for an async policy, in batches of at most ``max_concurrency`` for a batched one."""
    caller = policy_caller(policy, max_concurrency=max_concurrency, wait_s=0.0, stats=EngineStats())

    async def one(index: int, request: Request) -> Reply:
        caller.join()
        try:
            return await caller.submit(index, request)
        finally:
            caller.leave()

    try:
        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(requests))))
    finally:
        caller.close()
        await _release(policy)


def answer(policy: Policy, requests: Sequence[Request], *, max_concurrency: int = 256) -> list[Reply]:
    """:func:`aanswer` from synchronous code."""
    return _run_sync(lambda: aanswer(policy, requests, max_concurrency=max_concurrency))


def run_starts(starts: Sequence[Start], policy: Policy, **kwargs: Any) -> list[LiveTrajectory]:
    """:func:`arun_starts` from synchronous code."""
    return _run_sync(lambda: arun_starts(starts, policy, **kwargs))


def _run_sync(make: Callable[[], Coroutine[Any, Any, _R]]) -> _R:
    """Run a coroutine to its end from synchronous code; inside a running event loop (a notebook)
    on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="arlkit-engine") as thread:
        return thread.submit(lambda: asyncio.run(make())).result()


def run_rollouts(
    make_env: Callable[[], Env],
    jobs: Sequence[Job],
    policy: Policy,
    prompt: PromptConfig | None = None,
    *,
    engine: EngineConfig | None = None,
    on_finish: Callable[[Trajectory], None] | None = None,
    policy_name: str | None = None,
    keep_prompts: bool = False,
    stats: EngineStats | None = None,
) -> list[Trajectory]:
    """Run every job to completion and return the trajectories in job order.

    Args:
        make_env: builds a fresh environment (one per trajectory).
        jobs: the trajectories to run; each carries its budget and seeds.
        policy: an :class:`~arlkit.policies.protocol.AsyncPolicy` gets one request at a time; any
            other policy gets batches of ready requests (``generate``).
        prompt: budget mode and history window.
        engine: concurrency bounds and schedule (:class:`EngineConfig`).
        on_finish: called with each trajectory as soon as it ends, in the order they end (e.g. to
            write it), including those ended by a backend failure (``ended_by == "policy_error"``).
        policy_name: the name recorded in each trajectory (default: ``policy.name``).
        keep_prompts: keep on every turn what the policy was shown (``TurnRecord.prompt``: the
            messages, and the prompt token ids where the backend reports them), for callers that
            train on or replay the prompts. Off by default: with the full chat a trajectory's
            prompts grow quadratically with its length.
        stats: live counters to update (progress lines, peaks).

    Inside a running event loop (a notebook) the engine runs on a thread of its own; async callers
    can await :func:`arun_rollouts` instead.
    """
    engine = engine or EngineConfig()
    return _run_sync(lambda: arun_rollouts(make_env, jobs, policy, prompt, engine=engine, on_finish=on_finish,
                                           policy_name=policy_name, keep_prompts=keep_prompts, stats=stats))
