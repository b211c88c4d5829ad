"""How the rollout engine reaches a policy: one request at a time, or gathered into batches.

- :class:`DirectCaller` serves an :class:`~arlkit.policies.protocol.AsyncPolicy` (a served model):
  every request goes out the moment its trajectory is ready, at most ``max_concurrency`` in flight.
- :class:`MicroBatcher` serves a batched policy (``generate``: Hugging Face, scripted): requests
  that become ready are gathered and sent as one ``generate`` call, on the policy's own thread, one
  batch at a time. A batch goes out once every trajectory still running has a request waiting (the
  lockstep batch, when environments step inline), or ``wait_s`` after the first request waited,
  or when ``max_batch`` requests wait. Each batch is ordered by job index, so with inline
  environments the batches are exactly those of a lockstep loop.

:class:`EngineStats` counts what a progress line shows (trajectories done, turns/s, requests and
environment steps in flight, each policy's turns and invalid turns) and the peaks, which tests check
against the bounds.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from arlkit.policies.protocol import AsyncPolicy, Policy, Reply, Request

__all__ = ["DirectCaller", "EngineStats", "MicroBatcher", "PolicyCaller", "policy_caller"]


@dataclass
class EngineStats:
    """Live counters of one or more engine runs (share one object to follow several)."""

    total: int = 0
    """Trajectories asked for."""
    done: int = 0
    """Trajectories finished (written by ``on_finish``)."""
    turns: int = 0
    """Turns played (finished: the policy replied and the environment stepped)."""
    invalid: int = 0
    """Turns played whose reply had no admitted action."""
    by_policy: dict[str, list[int]] = field(default_factory=dict)
    """``policy name -> [turns, invalid turns]`` (for the note on a policy that keeps playing invalid turns)."""
    requests_in_flight: int = 0
    """Policy requests sent and not yet answered."""
    peak_requests: int = 0
    env_steps_in_flight: int = 0
    """Environment steps (and resets) running in the worker pool."""
    peak_env_steps: int = 0
    batches: int = 0
    """``generate`` calls of a batched policy."""
    started: float = field(default_factory=time.monotonic)
    first_request: float | None = None
    """When the first policy request went out (turns/s counts from there, not from model loading)."""

    def request_started(self, n: int = 1) -> None:
        if self.first_request is None:
            self.first_request = time.monotonic()
        self.requests_in_flight += n
        self.peak_requests = max(self.peak_requests, self.requests_in_flight)

    def env_step_started(self) -> None:
        self.env_steps_in_flight += 1
        self.peak_env_steps = max(self.peak_env_steps, self.env_steps_in_flight)

    def count_turns(self, policy: str, turns: Sequence[Any]) -> None:
        """Count finished turns (records with ``valid``) of ``policy``."""
        bad = sum(1 for turn in turns if not turn.valid)
        self.turns += len(turns)
        self.invalid += bad
        counts = self.by_policy.setdefault(policy, [0, 0])
        counts[0] += len(turns)
        counts[1] += bad

    def turns_per_s(self) -> float:
        """Finished turns per second since the first request went out (0 before any)."""
        elapsed = time.monotonic() - (self.first_request if self.first_request is not None else self.started)
        return self.turns / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        """``"41.2 turns/s, 37 requests in flight"`` (and environment steps, when any run in the pool)."""
        text = f"{self.turns_per_s():.1f} turns/s, {self.requests_in_flight} requests in flight"
        return text + (f", {self.env_steps_in_flight} env steps" if self.peak_env_steps else "")


class PolicyCaller:
    """What the engine's trajectories await: ``submit(key, request) -> Reply``; ``key`` orders batches."""

    async def submit(self, key: int, request: Request) -> Reply:
        raise NotImplementedError

    def join(self) -> None:
        """A trajectory worker started (it will submit until it leaves)."""

    def leave(self) -> None:
        """A trajectory worker has no more jobs."""

    def close(self) -> None:
        """Release threads."""


class DirectCaller(PolicyCaller):
    """Each request to ``policy.agenerate`` as soon as it is ready, at most ``max_concurrency`` at once."""

    def __init__(self, policy: AsyncPolicy, max_concurrency: int, stats: EngineStats) -> None:
        self._policy, self._stats = policy, stats
        self._slots = asyncio.Semaphore(max_concurrency)

    async def submit(self, key: int, request: Request) -> Reply:
        async with self._slots:
            self._stats.request_started()
            try:
                return await self._policy.agenerate(request)
            finally:
                self._stats.requests_in_flight -= 1


@dataclass
class _Waiting:
    key: int
    request: Request
    reply: asyncio.Future[Reply]


class MicroBatcher(PolicyCaller):
    """Gathers ready requests into ``policy.generate`` batches (see the module docstring).

    Args:
        policy: a batched policy.
        max_batch: most requests in one batch (the engine's ``max_concurrency``).
        wait_s: longest wait for more requests once one waits (``math.inf``: wait until every
            running trajectory has one, the lockstep schedule).
        stats: counters to update.
    """

    def __init__(self, policy: Policy, *, max_batch: int, wait_s: float, stats: EngineStats) -> None:
        self._policy, self._max_batch, self._wait_s, self._stats = policy, max_batch, wait_s, stats
        self._waiting: list[_Waiting] = []
        self._running = 0  # workers that will submit again
        self._wake = asyncio.Event()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arlkit-policy")
        self._task: asyncio.Task[None] | None = None

    def join(self) -> None:
        self._running += 1

    def leave(self) -> None:
        self._running -= 1
        self._wake.set()

    async def submit(self, key: int, request: Request) -> Reply:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._serve())
        waiting = _Waiting(key, request, asyncio.get_running_loop().create_future())
        self._waiting.append(waiting)
        self._wake.set()
        return await waiting.reply

    def _ready(self) -> bool:
        return len(self._waiting) >= min(self._running, self._max_batch)

    async def _gathered(self) -> None:
        """Until a batch should go: every running worker waits, ``max_batch`` wait, or the wait ran out."""
        deadline = None if math.isinf(self._wait_s) else time.monotonic() + self._wait_s
        while not self._ready():
            self._wake.clear()
            if deadline is None:
                await self._wake.wait()
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except TimeoutError:
                return

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._waiting:
                self._wake.clear()
                await self._wake.wait()
            await self._gathered()
            self._waiting.sort(key=lambda w: w.key)
            batch, self._waiting = self._waiting[: self._max_batch], self._waiting[self._max_batch :]
            requests = [w.request for w in batch]
            self._stats.request_started(len(batch))
            self._stats.batches += 1
            try:
                replies = await loop.run_in_executor(self._thread, self._policy.generate, requests)
                if len(replies) != len(batch):
                    name = getattr(self._policy, "name", type(self._policy).__name__)
                    raise RuntimeError(f"policy {name!r} returned {len(replies)} replies for {len(batch)} requests")
            except BaseException as exc:  # noqa: BLE001 - handed to the trajectories that asked
                for w in batch:
                    if not w.reply.done():
                        w.reply.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            finally:
                self._stats.requests_in_flight -= len(batch)
            for w, reply in zip(batch, replies, strict=True):
                if not w.reply.done():
                    w.reply.set_result(reply)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        # A batch still running (the run failed or was interrupted) ends before the next run can
        # call the policy: a local backend's caches are not made for two batches at once.
        self._thread.shutdown(wait=True, cancel_futures=True)


def policy_caller(policy: Policy, *, max_concurrency: int, wait_s: float, stats: EngineStats,
                  prefer_batches: bool = False) -> PolicyCaller:
    """:class:`DirectCaller` for an async policy (unless ``prefer_batches``), else :class:`MicroBatcher`."""
    if isinstance(policy, AsyncPolicy) and not prefer_batches:
        return DirectCaller(policy, max_concurrency, stats)
    return MicroBatcher(policy, max_batch=max_concurrency, wait_s=wait_s, stats=stats)
