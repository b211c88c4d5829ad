"""The sampling side of ``arlkit serve`` (:mod:`arlkit.policies.serve`): validated chat requests become
jobs on a queue, and one worker thread answers them with the policy, batching the jobs that arrive
together (jobs with equal sampling options share a forward pass)."""

from __future__ import annotations

import asyncio
import queue
import time
from dataclasses import dataclass

from arlkit.policies.hf import HFPolicy
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, Reply, Request
from arlkit.policies.registry import SamplingConfig
from arlkit.policies.serve_wire import BadRequest, ChatRequest

__all__ = ["ChatSampler"]

_REPLY_TIMEOUT = 600.0


@dataclass
class _Job:
    request: Request
    sampling: SamplingConfig
    stop: tuple[str, ...]
    top_logprobs: int = 0
    future: asyncio.Future[None] | None = None  # resolved on the server's event loop when the reply is in
    loop: asyncio.AbstractEventLoop | None = None
    reply: Reply | None = None
    status: int = 400  # HTTP status if the reply carries an error: the request's fault unless set


class ChatSampler:
    """Answers chat requests with ``policy``: :meth:`sample` queues them, :meth:`run` (on a thread of
    its own) generates; a batch gathers the jobs that arrive within ``batch_wait`` seconds."""

    def __init__(self, policy: HFPolicy, batch_wait: float) -> None:
        self.policy, self.batch_wait = policy, batch_wait
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self.closing = False

    def close(self) -> None:
        """Refuse new requests and answer the queued ones with 503; the batch in progress finishes."""
        if not self.closing:
            self.closing = True
            self._jobs.put(None)

    async def sample(self, chat: ChatRequest) -> list[Reply]:
        """The ``n`` replies of ``chat`` (raises ``BadRequest`` when they cannot be given)."""
        if self.closing:
            raise BadRequest(503, "the server is shutting down", "server_error")
        request, sampling = chat.request, chat.sampling
        loop = asyncio.get_running_loop()
        # choice i samples turn i of the request's seed: n choices are n different samples, and
        # choice 0 is what the same request with n = 1 returns
        jobs = [_Job(Request(request.messages, request.seed, i), sampling, chat.stop, chat.top_logprobs,
                     loop.create_future(), loop) for i in range(chat.n)]
        for job in jobs:
            self._jobs.put(job)
        try:
            await asyncio.wait_for(asyncio.gather(*(j.future for j in jobs if j.future is not None)), _REPLY_TIMEOUT)
        except asyncio.TimeoutError:
            raise BadRequest(503, "the model did not answer in time", "server_error") from None
        replies = [job.reply or Reply("", error="no reply") for job in jobs]
        for job, reply in zip(jobs, replies, strict=True):
            if reply.error is not None:
                raise BadRequest(job.status, reply.error, "server_error" if job.status >= 500 else "invalid_request_error")
            if reply.finish_reason == CONTEXT_LENGTH_EXCEEDED:
                prompt, new = len(reply.prompt_ids or ()), sampling.max_new_tokens or 0
                raise BadRequest(
                    400,
                    f"This model's maximum context length is {self.policy.context_length} tokens. However, you "
                    f"requested {prompt + new} tokens ({prompt} in the messages, {new} in the completion). "
                    "Please reduce the length of the messages or completion.",
                    CONTEXT_LENGTH_EXCEEDED,
                )
        return replies

    @staticmethod
    def _wake(job: _Job) -> None:
        """Resolve ``job``'s future on its event loop (from the worker thread)."""
        if job.loop is None or job.future is None:
            return
        future = job.future
        try:
            job.loop.call_soon_threadsafe(lambda: future.done() or future.set_result(None))
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more

    def _fail_pending(self) -> None:
        """Answer every queued job with an error (the server is shutting down), so no handler waits."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job.status, job.reply = 503, Reply("", error="the server is shutting down")
                self._wake(job)

    def run(self) -> None:
        """Answer queued jobs batch by batch until :meth:`close`."""
        while True:
            first = self._jobs.get()
            if first is None or self.closing:  # shutting down: what is still queued gets a 503 at once
                if first is not None:
                    self._jobs.put(first)
                self._fail_pending()
                return
            jobs = [first]
            deadline = time.monotonic() + self.batch_wait
            while len(jobs) < self.policy.max_batch_size:
                try:
                    job = self._jobs.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if job is None:
                    self._jobs.put(None)
                    break
                jobs.append(job)
            groups: dict[tuple[SamplingConfig, tuple[str, ...], int], list[_Job]] = {}
            for job in jobs:
                groups.setdefault((job.sampling, job.stop, job.top_logprobs), []).append(job)
            for (sampling, stop, top), members in groups.items():
                try:
                    replies = self.policy.generate_with([j.request for j in members], sampling=sampling, stop=stop,
                                                        top_logprobs=top)
                except Exception as exc:  # noqa: BLE001 - report to the callers, keep serving
                    replies = [Reply("", error=f"{type(exc).__name__}: {exc}") for _ in members]
                    for job in members:
                        job.status = 500
                for job, reply in zip(members, replies, strict=True):
                    job.reply = reply
                    self._wake(job)
