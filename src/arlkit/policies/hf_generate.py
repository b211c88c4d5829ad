"""Batched sampling for the ``hf`` backend (:class:`~arlkit.policies.hf.HFPolicy`).

Each request's prompt is rendered by the chat template; the replies of one call are sampled as
left-padded batches whose rows start from reused keys/values where they can
(:mod:`arlkit.policies.prefix_plan`). Cached keys/values are dropped whenever the model's weights
change (parameter version counters).

**Sampling.** Temperature, top-k and top-p are applied by :func:`~arlkit.policies.hf_ops.process_logits`;
each row draws its uniforms from its own ``torch.Generator`` seeded from ``(seed, turn)``, so a reply
does not depend on the other requests of the batch. ``Reply.logprobs`` are log-probabilities under the
distribution actually sampled from; for greedy decoding (temperature 0) they are the model's own
(T = 1) log-probabilities. :meth:`HFPolicy.score <arlkit.policies.hf.HFPolicy.score>` computes the
same quantities by teacher forcing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from arlkit.policies.chat import ChatTokens
from arlkit.policies.hf_ops import evaluating, process_logits, sample_tokens, sampling_seed
from arlkit.policies.kv_cache import CachedBatch, CachedForward, CacheStore, PrefillRow
from arlkit.policies.prefix_plan import plan_rows
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, Reply, Request
from arlkit.policies.registry import SamplingConfig

__all__ = ["BatchGenerator", "ReplyEnd"]

_Row = tuple[int, Request, np.ndarray, int]
"""``(index in the call, request, prompt ids, cache key)``."""


class ReplyEnd:
    """Whether a reply ends with its last token: an end-of-reply token, or a stop string it completes."""

    def __init__(self, tokenizer: Any, eos_ids: frozenset[int]) -> None:
        self.tokenizer, self.eos_ids = tokenizer, eos_ids
        self._pieces: dict[int, str] = {}

    def _piece(self, token: int) -> str:
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self.tokenizer.decode([token])
        return piece

    def __call__(self, tokens: list[int], stop: tuple[str, ...]) -> bool:
        last = tokens[-1]
        if last in self.eos_ids:
            return True
        if not stop:
            return False
        piece = self._piece(last)
        if not any(s[-1] in piece for s in stop if s):
            return False
        tail = self.tokenizer.decode(tokens[-(max(len(s) for s in stop) + 8) :], skip_special_tokens=True)
        return any(s and s in tail for s in stop)


class BatchGenerator:
    """Replies of one model to batches of requests, with keys/values kept in ``store`` across calls.

    Args:
        forward: the model's batched forward passes.
        chat: renders prompts.
        ended: tells when a reply ends.
        store: reused keys/values; cleared whenever the model's weights change.
        reuse_kv: start rows from cached keys/values (False: every prompt is encoded whole).
        stats: counters updated in place: ``prompt_tokens``, ``prefilled_tokens``, ``generated_tokens``.
    """

    def __init__(
        self, forward: CachedForward, chat: ChatTokens, ended: ReplyEnd, store: CacheStore, *, reuse_kv: bool,
        stats: dict[str, int],
    ) -> None:
        self.forward, self.chat, self.ended, self.store = forward, chat, ended, store
        self.reuse_kv, self.stats = reuse_kv, stats
        self._weights_version: tuple[int, ...] = ()

    def generate(
        self, requests: Sequence[Request], keys: Sequence[int], sampling: SamplingConfig, stop: tuple[str, ...], *,
        top_logprobs: int, context_length: int | None, max_batch_size: int,
    ) -> list[Reply]:
        """One reply per request (``sampling.max_new_tokens`` set); a request that cannot be served gets
        ``Reply(error=...)``, one whose prompt plus reply exceeds ``context_length`` a reply with
        ``finish_reason="context_length_exceeded"``. Every sampled reply says why it ended:
        ``finish_reason="stop"`` (an end-of-reply token or a stop string) or ``"length"`` (cut at
        ``max_new_tokens``)."""
        replies: list[Reply | None] = [None] * len(requests)
        todo: list[_Row] = []
        limit = sampling.max_new_tokens
        assert limit is not None
        for i, request in enumerate(requests):
            try:
                ids = self.chat.prompt_ids(request.messages)
            except Exception as exc:  # noqa: BLE001 - a malformed conversation fails alone
                replies[i] = Reply("", error=f"chat template failed: {type(exc).__name__}: {exc}")
                continue
            if not ids:
                replies[i] = Reply("", error="the chat template rendered an empty prompt")
            elif context_length is not None and len(ids) + limit > context_length:
                replies[i] = Reply("", prompt_ids=tuple(ids), finish_reason=CONTEXT_LENGTH_EXCEEDED)
            else:
                todo.append((i, request, np.asarray(ids, dtype=np.int64), keys[i]))
        with evaluating(self.forward.model):
            self._check_weights()
            for start in range(0, len(todo), max_batch_size):
                part = todo[start : start + max_batch_size]
                for (i, *_), reply in zip(part, self._generate_batch(part, sampling, stop, top_logprobs), strict=True):
                    replies[i] = reply
            self.store.evict()
        return [r if r is not None else Reply("", error="no reply") for r in replies]

    def _check_weights(self) -> None:
        version = tuple(p._version for p in self.forward.model.parameters())
        if version != self._weights_version:
            self.store.clear()
            self._weights_version = version

    def _prefill(self, rows: list[PrefillRow], extra: int) -> tuple[CachedBatch, torch.Tensor]:
        self.stats["prefilled_tokens"] += sum(len(r.tokens) - r.reuse for r in rows)
        return self.forward.prefill(rows, extra)

    def _generate_batch(
        self, part: list[_Row], cfg: SamplingConfig, stop: tuple[str, ...], top_logprobs: int
    ) -> list[Reply]:
        prompts = [p for _, _, p, _ in part]
        keys = [k for *_, k in part]
        rows = plan_rows(prompts, keys, self.store if self.reuse_kv else None, lambda todo: self._prefill(todo, 0)[0])
        self.stats["prompt_tokens"] += sum(len(p) for p in prompts)
        max_new = cfg.max_new_tokens
        assert max_new is not None
        batch, logits = self._prefill(rows, extra=max_new)
        generators = None
        if cfg.temperature > 0:
            generators = [torch.Generator().manual_seed(sampling_seed(r.seed, r.turn)) for _, r, _, _ in part]
        b = len(part)
        tokens: list[list[int]] = [[] for _ in range(b)]
        logprobs: list[list[float]] = [[] for _ in range(b)]
        tops: list[list[list[list[float]]]] = [[] for _ in range(b)]
        where = list(range(b))  # batch position -> row
        live = torch.ones(b, dtype=torch.bool)
        done = [False] * b
        stopped = [False] * b  # ended by an end-of-reply token or a stop string, not by the token cap
        for step in range(max_new):
            logp = process_logits(logits, cfg.temperature, cfg.top_k, cfg.top_p)
            gens = None if generators is None else [generators[r] for r in where]
            chosen = sample_tokens(logp, gens)
            chosen_lp = logp.gather(1, chosen[:, None]).squeeze(1).tolist()
            chosen_ids = chosen.tolist()
            best = logp.topk(min(top_logprobs, logp.shape[-1]), dim=-1) if top_logprobs else None
            for pos, row in enumerate(where):
                if done[row]:
                    continue
                tokens[row].append(chosen_ids[pos])
                logprobs[row].append(chosen_lp[pos])
                if best is not None:
                    tops[row].append([[int(t), float(v)] for t, v in zip(best.indices[pos].tolist(), best.values[pos].tolist())])
                stopped[row] = self.ended(tokens[row], stop)
                if stopped[row] or step == max_new - 1:
                    done[row] = True
                    live[pos] = False
                    if self.reuse_kv:
                        kept = np.concatenate([prompts[row], np.asarray(tokens[row][:-1], dtype=np.int64)])
                        self.store.put(keys[row], batch.row_entry(pos, kept))
            if all(done):
                break
            if (~live).sum() * 4 >= len(where):  # drop finished rows once they are a quarter
                index = torch.nonzero(live).squeeze(1)
                batch.select(index.to(self.forward.device))
                where = [where[i] for i in index.tolist()]
                live = torch.ones(len(where), dtype=torch.bool)
                logits, chosen = logits[index], chosen[index]
            logits = self.forward.step(batch, chosen.to(self.forward.device), live.to(self.forward.device))
        self.stats["generated_tokens"] += sum(len(t) for t in tokens)
        return [
            Reply(
                self.chat.tokenizer.decode(tokens[i], skip_special_tokens=True),
                token_ids=tuple(tokens[i]),
                logprobs=tuple(logprobs[i]),
                prompt_ids=tuple(prompts[i].tolist()),
                finish_reason="stop" if stopped[i] else "length",
                usage={"prompt_tokens": len(prompts[i]), "completion_tokens": len(tokens[i])},
                details={"top_logprobs": tops[i]} if top_logprobs else None,
            )
            for i in range(b)
        ]
