"""The sampling side of ``arlkit serve`` (:mod:`arlkit.policies.serve`): validated requests become jobs
on a queue, and one worker thread answers them with the policy's model, batching the jobs that arrive
together (jobs with equal sampling options share a forward pass).

Prompts arrive as token ids, rendered by :class:`~arlkit.policies.serve_tools.PromptRenderer` (chat
conversations with their tools, or raw completion prompts); the worker samples from them with a
:class:`~arlkit.policies.hf_generate.BatchGenerator` of its own over the policy's model, and scores
prompts (the log-probabilities a completion's ``echo`` returns) by one teacher-forced forward pass."""

from __future__ import annotations

import asyncio
import queue
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from arlkit.policies.chat import ChatTokens
from arlkit.policies.hf import HFPolicy
from arlkit.policies.hf_generate import BatchGenerator, ReplyEnd
from arlkit.policies.hf_ops import evaluating
from arlkit.policies.kv_cache import CachedForward, CacheStore, forward_parameters
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, Reply, Request
from arlkit.policies.registry import SamplingConfig
from arlkit.policies.serve_wire import BadRequest

__all__ = ["ChatSampler", "PromptIds", "PromptScores"]

_REPLY_TIMEOUT = 600.0
_KV_CACHE_BYTES = 2**28
_SCORE_CHUNK = 256
"""Prompt positions whose logits are computed together when a prompt is scored."""

PromptScores = list[tuple[float | None, list[tuple[int, float]]]]
"""Per prompt token: its log-probability given the tokens before it (``None`` for the first) and the
``k`` most likely tokens there as ``(token, logprob)``."""


class PromptIds(tuple):  # type: ignore[type-arg]
    """A prompt already rendered into token ids, carried as a :class:`Request`'s ``messages``."""


class _RenderedChat(ChatTokens):
    """:class:`ChatTokens` that take a :class:`PromptIds` as they are."""

    def prompt_ids(self, messages: Any) -> list[int]:
        if isinstance(messages, PromptIds):
            return list(messages)
        return super().prompt_ids(messages)


@dataclass
class _Job:
    request: Request
    sampling: SamplingConfig
    stop: tuple[str, ...]
    top_logprobs: int = 0
    score: bool = False  # score the prompt (teacher forcing) instead of sampling a reply
    future: asyncio.Future[None] | None = None  # resolved on the server's event loop when the reply is in
    loop: asyncio.AbstractEventLoop | None = None
    reply: Reply | None = None
    scores: PromptScores = field(default_factory=list)
    status: int = 400  # HTTP status if the reply carries an error: the request's fault unless set


class ChatSampler:
    """Answers requests with ``policy``'s model: :meth:`sample` and :meth:`score` queue them, :meth:`run`
    (on a thread of its own) computes; a batch gathers the jobs that arrive within ``batch_wait`` seconds."""

    def __init__(self, policy: HFPolicy, batch_wait: float) -> None:
        self.policy, self.batch_wait = policy, batch_wait
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self.closing = False
        forward = CachedForward(policy.model, policy.pad_id)
        self._generator = BatchGenerator(forward, _RenderedChat(policy.tokenizer), ReplyEnd(policy.tokenizer, policy.eos_ids),
                                         CacheStore(_KV_CACHE_BYTES), reuse_kv=forward.buffered, stats=policy.stats)

    def close(self) -> None:
        """Refuse new requests and answer the queued ones with 503; the batch in progress finishes."""
        if not self.closing:
            self.closing = True
            self._jobs.put(None)

    def _context_error(self, prompt: int, new: int) -> BadRequest:
        return BadRequest(
            400,
            f"This model's maximum context length is {self.policy.context_length} tokens. However, you requested "
            f"{prompt + new} tokens ({prompt} in the messages, {new} in the completion). Please reduce the length "
            "of the messages or completion.",
            CONTEXT_LENGTH_EXCEEDED,
        )

    async def _run_jobs(self, jobs: list[_Job]) -> None:
        if self.closing:
            raise BadRequest(503, "the server is shutting down", "server_error")
        for job in jobs:
            self._jobs.put(job)
        try:
            await asyncio.wait_for(asyncio.gather(*(j.future for j in jobs if j.future is not None)), _REPLY_TIMEOUT)
        except asyncio.TimeoutError:
            raise BadRequest(503, "the model did not answer in time", "server_error") from None
        for job in jobs:
            error = job.reply.error if job.reply is not None else "no reply"
            if error is not None:
                raise BadRequest(job.status, error, "server_error" if job.status >= 500 else "invalid_request_error")

    async def sample(self, prompt: list[int], seed: int, n: int, sampling: SamplingConfig, stop: tuple[str, ...],
                     top_logprobs: int) -> list[Reply]:
        """The ``n`` replies to ``prompt`` (token ids): choice ``i`` samples turn ``i`` of ``seed``, so ``n``
        choices are ``n`` different samples and choice 0 is what ``n = 1`` returns (raises ``BadRequest``)."""
        limit = sampling.max_new_tokens or 0
        if self.policy.context_length is not None and len(prompt) + limit > self.policy.context_length:
            raise self._context_error(len(prompt), limit)
        loop = asyncio.get_running_loop()
        messages: Any = PromptIds(prompt)
        jobs = [_Job(Request(messages, seed, i), sampling, stop, top_logprobs, future=loop.create_future(), loop=loop)
                for i in range(n)]
        await self._run_jobs(jobs)
        replies = [job.reply or Reply("", error="no reply") for job in jobs]
        for reply in replies:
            if reply.finish_reason == CONTEXT_LENGTH_EXCEEDED:
                raise self._context_error(len(reply.prompt_ids or ()), limit)
        return replies

    async def score(self, prompt: list[int], top_logprobs: int) -> PromptScores:
        """Log-probabilities of ``prompt``'s tokens under the model (temperature 1) with the
        ``top_logprobs`` most likely tokens at each position (raises ``BadRequest``)."""
        if self.policy.context_length is not None and len(prompt) > self.policy.context_length:
            raise self._context_error(len(prompt), 0)
        loop = asyncio.get_running_loop()
        messages: Any = PromptIds(prompt)
        job = _Job(Request(messages, 0, 0), SamplingConfig(), (), top_logprobs, score=True,
                   future=loop.create_future(), loop=loop)
        await self._run_jobs([job])
        return job.scores

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

    def _prompt_logprobs(self, ids: list[int]) -> torch.Tensor:
        """Log-softmax of the model's logits at each position of ``ids`` (shape ``(len(ids), vocab)``)
        as one forward pass; for a model that takes ``logits_to_keep``, the output head runs on the
        last hidden states :data:`_SCORE_CHUNK` positions at a time, so a long prompt never holds all
        its float32 logits at once."""
        model = self.policy.model
        tokens = torch.tensor([ids], device=self.policy.device)
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if "logits_to_keep" not in forward_parameters(model) or head is None:
            return torch.log_softmax(model(input_ids=tokens).logits[0].float(), dim=-1)
        out = model(input_ids=tokens, output_hidden_states=True, logits_to_keep=1)
        hidden = out.hidden_states[-1][0]
        rows = []
        for start in range(0, hidden.shape[0], _SCORE_CHUNK):
            logits = head(hidden[start : start + _SCORE_CHUNK]).float()
            rows.append(torch.log_softmax(logits, dim=-1).cpu())
        return torch.cat(rows)

    def _score(self, job: _Job) -> None:
        ids = list(job.request.messages)
        with evaluating(self.policy.model):
            logp = self._prompt_logprobs(ids[:-1]) if len(ids) > 1 else torch.zeros(0, 1)
        scores: PromptScores = [(None, [])]
        k = min(job.top_logprobs, logp.shape[-1])
        for pos in range(1, len(ids)):
            row = logp[pos - 1]
            tops: list[tuple[int, float]] = []
            if k:
                best = row.topk(k)
                tops = [(int(t), float(v)) for t, v in zip(best.indices.tolist(), best.values.tolist(), strict=True)]
            scores.append((float(row[ids[pos]]), tops))
        job.scores, job.reply = scores, Reply("")

    def _answer(self, jobs: list[_Job]) -> None:
        """Compute ``jobs`` (one batch) and wake their handlers."""
        groups: dict[tuple[SamplingConfig, tuple[str, ...], int, bool], list[_Job]] = {}
        for job in jobs:
            groups.setdefault((job.sampling, job.stop, job.top_logprobs, job.score), []).append(job)
        for (sampling, stop, top, score), members in groups.items():
            try:
                if score:
                    for job in members:
                        self._score(job)
                else:
                    requests = [j.request for j in members]
                    keys = [hash((j.request.seed, j.request.turn)) for j in members]
                    replies = self._generator.generate(
                        requests, keys, sampling, stop, top_logprobs=top, context_length=self.policy.context_length,
                        max_batch_size=self.policy.max_batch_size)
                    for job, reply in zip(members, replies, strict=True):
                        job.reply = reply
            except Exception as exc:  # noqa: BLE001 - report to the callers, keep serving
                for job in members:
                    job.status, job.reply = 500, Reply("", error=f"{type(exc).__name__}: {exc}")
            for job in members:
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
            self._answer(jobs)

