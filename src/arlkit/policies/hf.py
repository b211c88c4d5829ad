"""The ``hf`` backend: a local Hugging Face causal LM, batched, with KV caches reused across turns.

``hf:PATH`` loads any local causal-LM directory offline, renders each conversation with the
tokenizer's chat template and samples all replies of a turn as one left-padded batch.

**Reuse across turns.** A multi-turn episode re-sends its growing history every turn. After each
reply the backend keeps the trajectory's keys/values (keyed by :func:`conversation_key`) together with the
token ids they encode; the next turn prefills only the tokens after the longest common prefix of
the new prompt and the cached ids. Rows of one batch that share a long prefix (the system prompt,
identical for all trajectories of one turn and budget) get it computed once and copied. Reuse is
exact: a reused key/value is the one a full re-encoding would compute (up to float rounding), and
a cache is dropped whenever the model's weights change (parameter version counters).

**Sampling.** Temperature, top-k and top-p are applied by :func:`process_logits`; each row draws its
uniforms from its own ``torch.Generator`` seeded from ``(seed, turn)``, so a reply does not depend on
the other requests of the batch. ``Reply.logprobs`` are log-probabilities under the distribution
actually sampled from; for greedy decoding (temperature 0) they are the model's own (T = 1)
log-probabilities. :meth:`HFPolicy.score` computes the same quantities by teacher forcing.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arlkit.policies.attention import ATTENTION_NAME, register_attention
from arlkit.policies.chat import ChatTokens
from arlkit.policies.hf_ops import (
    continuation_logprobs, conversation_key, load_hf_model, model_context_length, process_logits, sample_tokens,
    sampling_seed,
)
from arlkit.policies.kv_cache import (
    CacheEntry, CacheStore, CachedBatch, PrefillRow, buffer_layer_class, common_prefix_length, require_cache_layers,
)
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, Message, PolicyError, Reply, Request
from arlkit.policies.registry import BackendOptions, SamplingConfig, register_policy

__all__ = [
    "DEFAULT_STOP", "HFPolicy", "continuation_logprobs", "conversation_key", "load_hf_model", "model_context_length",
    "process_logits", "sampling_seed",
]

DEFAULT_STOP = ("</action>",)
"""Generation stops once the reply contains one of these strings (the closing action tag)."""

_MIN_SHARED_PREFIX = 32  # shortest common prefix worth computing once for several rows
_ATTENTION_BYTES = 256 * 2**20  # cap on one prefill chunk's attention-score tensor
_PROBE_MAX_PARAMS = 500_000_000  # above this, CPU attention is not probed (matmuls dominate anyway)


class HFPolicy:
    """A Hugging Face causal LM as an arlkit policy, with scoring (teacher forcing).

    Args:
        model: a causal LM (``AutoModelForCausalLM``), on its device; it is put in eval mode while
            generating and restored afterwards.
        tokenizer: its tokenizer, with a chat template.
        sampling: temperature, top-p, top-k and the cap on new tokens (unset: the model's
            generation config ``max_new_tokens``, else
            :data:`~arlkit.policies.registry.DEFAULT_MAX_NEW_TOKENS`).
        name: the policy's name in records (``hf:PATH`` when built from a spec).
        stop: strings that end a reply (kept in the reply).
        attn_implementation: ``"auto"`` (on CPU, time eager attention and arlkit's kernel
            (:mod:`arlkit.policies.attention`) on a small batch and keep the faster; elsewhere keep
            the model's), or an implementation name to force (``"arlkit"``, ``"sdpa"``, ``"eager"``).
        max_batch_size: most rows generated together (larger requests are split; results do not
            depend on the split).
        kv_cache_bytes: memory for reused keys/values; least recently used trajectories go first.
        reuse_kv: keep caches across turns (set False to re-encode every prompt, e.g. to compare).
        context_length: the context window in tokens, at most the model's own
            (:func:`model_context_length`, the default). A request whose prompt plus
            ``max_new_tokens`` exceeds it is answered with ``finish_reason="context_length_exceeded"``.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        sampling: SamplingConfig | None = None,
        *,
        name: str = "hf",
        stop: Sequence[str] = DEFAULT_STOP,
        attn_implementation: str = "auto",
        max_batch_size: int = 64,
        kv_cache_bytes: int = 2**30,
        reuse_kv: bool = True,
        context_length: int | None = None,
    ) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise PolicyError("the tokenizer has no chat template; arlkit renders every prompt with it")
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        require_cache_layers()
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.chat = ChatTokens(tokenizer)
        default_reply = getattr(getattr(model, "generation_config", None), "max_new_tokens", None)
        self.sampling = (sampling or SamplingConfig()).with_default_reply_tokens(default_reply)
        self.stop = tuple(stop)
        self.max_batch_size = max_batch_size
        self.device = next(model.parameters()).device
        self.eos_ids = self._eos_ids()
        self.pad_id = self.chat.pad_id
        if context_length is not None and context_length < 2:
            raise ValueError(f"context_length must be >= 2 tokens, got {context_length}")
        limits = [n for n in (model_context_length(model, tokenizer), context_length) if n is not None]
        self.context_length = min(limits) if limits else None
        """Tokens of prompt plus reply a request may use (``None``: unknown, unchecked)."""
        self._store = CacheStore(kv_cache_bytes)
        self._weights_version: tuple[int, ...] = ()
        self._pieces: dict[int, str] = {}
        # A wrapper (e.g. a peft model) forwards keyword arguments: read the wrapped model's signature.
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        params = inspect.signature(base.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = "logits_to_keep" if "logits_to_keep" in params else None
        self._layer_cls = buffer_layer_class()
        self._buffered = self._plain_layers()
        self.reuse_kv = reuse_kv and self._buffered
        register_attention()
        with torch.inference_mode():
            self.attn_implementation = self._choose_attention(attn_implementation)
        self.stats = {"prompt_tokens": 0, "prefilled_tokens": 0, "generated_tokens": 0}
        """Counters since construction: prompt tokens requested, tokens actually encoded (the rest
        came from reused caches; shared prefixes count once), tokens generated."""

    @classmethod
    def from_pretrained(cls, path: str | Path, sampling: SamplingConfig | None = None, **kwargs: Any) -> HFPolicy:
        """Load ``path`` offline (see :func:`load_hf_model`) and wrap it; ``kwargs`` go to the constructor."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        model, tokenizer = load_hf_model(path, device=device, dtype=dtype)
        kwargs.setdefault("name", f"hf:{path}")
        return cls(model, tokenizer, sampling, **kwargs)

    # -- setup helpers -------------------------------------------------------------------------

    def _eos_ids(self) -> frozenset[int]:
        """The tokenizer's end-of-turn tokens plus the model's generation-config end tokens."""
        ids = set(self.chat.eos_ids)
        source = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, (list, tuple)):
            ids.update(int(i) for i in source)
        return frozenset(ids)

    def _plain_layers(self) -> bool:
        """KV reuse needs standard attention layers (no sliding window, no recurrent state)."""
        from transformers.cache_utils import DynamicCache, DynamicLayer

        layers = DynamicCache(config=self.model.config).layers
        return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)

    def _choose_attention(self, requested: str) -> str:
        config = self.model.config
        current = getattr(config, "_attn_implementation", None) or "eager"
        setter = getattr(self.model, "set_attn_implementation", None)
        if requested != "auto":
            if setter is None:
                raise PolicyError("this transformers version cannot switch the attention implementation")
            try:
                setter(requested)
            except Exception as exc:  # noqa: BLE001 - an implementation this model does not support
                raise PolicyError(f"attention implementation {requested!r} is not available: {exc}") from None
            return requested
        params = sum(p.numel() for p in self.model.parameters())
        if self.device.type != "cpu" or setter is None or params > _PROBE_MAX_PARAMS:
            return current
        timings: dict[str, float] = {}
        for _ in range(2):  # alternate so that a burst of load on a shared CPU hits both
            for impl in (ATTENTION_NAME, "eager"):
                try:
                    setter(impl)
                    timings[impl] = min(timings.get(impl, float("inf")), self._time_probe())
                except Exception:  # noqa: BLE001 - an implementation this model does not support
                    timings[impl] = float("inf")
            low, high = sorted(timings.values())
            if high > 1.5 * low:  # decisive after one round
                break
        timings = {k: v for k, v in timings.items() if v < float("inf")}
        # arlkit's kernel unless eager is clearly faster: a stable choice keeps float results reproducible.
        fast = timings.get(ATTENTION_NAME, float("inf"))
        best = "eager" if timings.get("eager", float("inf")) < 0.8 * fast else ATTENTION_NAME
        if best not in timings:
            best = current
        setter(best)
        return best

    def _time_probe(self) -> float:
        """Seconds for work shaped like a rollout turn: a small prefill, then decode steps of 16 rows
        over a 384-token cache (random keys/values: no prefill needed to build it)."""
        gen = torch.Generator().manual_seed(0)
        config = self.model.config
        vocab = min(int(config.vocab_size), len(self.tokenizer))
        heads = int(config.num_attention_heads)
        kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
        dtype = next(self.model.parameters()).dtype

        def randn(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=gen).to(self.device, dtype)

        context = 384
        fake = CacheEntry(
            np.zeros(context, dtype=np.int64),
            [(randn(kv_heads, context, head_dim), randn(kv_heads, context, head_dim)) for _ in range(config.num_hidden_layers)],
        )
        tokens = torch.randint(0, vocab, (context + 1,), generator=gen).numpy()
        start = time.perf_counter()
        self._prefill([PrefillRow(tokens[:96]) for _ in range(4)], extra=0)
        batch, logits = self._prefill([PrefillRow(tokens, fake, context) for _ in range(16)], extra=8)
        for _ in range(8):
            logits = self._step(batch, logits.argmax(-1), torch.ones(16, dtype=torch.bool))
        return time.perf_counter() - start

    # -- prompts -------------------------------------------------------------------------------

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of ``messages`` rendered by the chat template, ready for the assistant's reply."""
        return self.chat.prompt_ids(messages)

    def continuation_ids(self, text: str) -> list[int]:
        """Token ids of a reply text as it would follow the prompt."""
        return self.chat.ids(text)

    # -- forward passes ------------------------------------------------------------------------

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: Any, keep: int) -> torch.Tensor:
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True}
        if self._keep_kw:
            kwargs[self._keep_kw] = keep
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, **kwargs)
        return out.logits[:, -keep:].float()

    def _prefill(self, rows: Sequence[PrefillRow], extra: int) -> tuple[CachedBatch, torch.Tensor]:
        """Encode every row's new tokens (after its reused prefix) into one cache with room for
        ``extra`` more columns; returns the batch and the logits at each row's last token.

        Layout: the new tokens of all rows are right-aligned in the block of columns
        ``[base, base + width)``; row ``i``'s reused prefix sits immediately before its new tokens,
        so each row is one contiguous run of columns ending at ``base + width``."""
        from transformers.cache_utils import DynamicCache

        dev = self.device
        new = [len(r.tokens) - r.reuse for r in rows]
        if hasattr(self, "stats"):
            self.stats["prefilled_tokens"] += sum(new)
        width = max(new)
        base = max(0, max(len(r.tokens) for r in rows) - width)
        b = len(rows)
        first_new = torch.as_tensor([base + width - n for n in new], dtype=torch.long, device=dev)
        start = first_new - torch.as_tensor([r.reuse for r in rows], dtype=torch.long, device=dev)
        layers = []
        if self._buffered:
            for layer_index in range(self.model.config.num_hidden_layers):
                prefixes = [
                    None if r.source is None or r.reuse == 0 else
                    (r.source.kv[layer_index][0][:, : r.reuse], r.source.kv[layer_index][1][:, : r.reuse])
                    for r in rows
                ]
                layers.append(self._layer_cls(prefixes, first_new, base, base + width + extra))
            cache = DynamicCache()
            cache.layers = layers
        else:
            assert base == 0, "reuse needs plain attention layers"
            cache = DynamicCache(config=self.model.config)
        columns = torch.arange(base + width + extra, device=dev)
        mask = ((columns >= start[:, None]) & (columns < base + width)).long()
        ids = torch.full((b, width), self.pad_id, dtype=torch.long, device=dev)
        pos = torch.zeros(b, width, dtype=torch.long, device=dev)
        for i, r in enumerate(rows):
            ids[i, width - new[i] :] = torch.as_tensor(r.tokens[r.reuse :], device=dev)
            pos[i, width - new[i] :] = torch.arange(r.reuse, len(r.tokens), device=dev)
        heads = int(getattr(self.model.config, "num_attention_heads", 1))
        chunk = max(1, _ATTENTION_BYTES // (4 * b * heads * (base + width)))
        logits = None
        for first in range(0, width, chunk):
            stop = min(width, first + chunk)
            logits = self._forward(ids[:, first:stop], mask[:, : base + stop], pos[:, first:stop], cache, 1)
        batch = CachedBatch(
            layers, cache, mask, torch.as_tensor([len(r.tokens) for r in rows], device=dev), base + width, start
        )
        assert logits is not None
        return batch, logits[:, -1]

    def _step(self, batch: CachedBatch, tokens: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (rows not ``live`` feed padding, masked out); next logits."""
        col = batch.width
        batch.mask[:, col] = live.long()
        ids = torch.where(live, tokens, torch.full_like(tokens, self.pad_id))[:, None]
        logits = self._forward(ids, batch.mask[:, : col + 1], batch.next_pos[:, None], batch.cache, 1)
        batch.next_pos = batch.next_pos + 1
        batch.width += 1
        return logits[:, -1]

    # -- generation ----------------------------------------------------------------------------

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        """One reply per request; a request that cannot be served gets ``Reply(error=...)``."""
        return self.generate_with(requests)

    def generate_with(
        self,
        requests: Sequence[Request],
        *,
        sampling: SamplingConfig | None = None,
        stop: Sequence[str] | None = None,
        cache_keys: Sequence[int] | None = None,
        top_logprobs: int = 0,
    ) -> list[Reply]:
        """:meth:`generate` with this call's own sampling options and stop strings (the policy's by
        default) and cache keys (default: each request's seed and announced budget, see
        :func:`conversation_key`; e.g. a server keys by conversation). ``top_logprobs`` k > 0 adds
        ``Reply.details["top_logprobs"]``: per generated token, the k most likely ``[token, logprob]``
        under the same distribution the token was sampled from."""
        sampling = (sampling or self.sampling).with_default_reply_tokens(self.sampling.max_new_tokens)
        stop = tuple(self.stop if stop is None else stop)
        keys = list(cache_keys) if cache_keys is not None else [conversation_key(r) for r in requests]
        if len(keys) != len(requests):
            raise ValueError(f"{len(keys)} cache keys for {len(requests)} requests")
        replies: list[Reply | None] = [None] * len(requests)
        todo: list[tuple[int, Request, np.ndarray, int]] = []
        limit = sampling.max_new_tokens
        assert limit is not None  # with_default_reply_tokens sets it
        for i, request in enumerate(requests):
            try:
                ids = self.prompt_ids(request.messages)
            except Exception as exc:  # noqa: BLE001 - a malformed conversation fails alone
                replies[i] = Reply("", error=f"chat template failed: {type(exc).__name__}: {exc}")
                continue
            if not ids:
                replies[i] = Reply("", error="the chat template rendered an empty prompt")
            elif self.context_length is not None and len(ids) + limit > self.context_length:
                replies[i] = Reply("", prompt_ids=tuple(ids), finish_reason=CONTEXT_LENGTH_EXCEEDED)
            else:
                todo.append((i, request, np.asarray(ids, dtype=np.int64), keys[i]))
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                self._check_weights()
                for start in range(0, len(todo), self.max_batch_size):
                    part = todo[start : start + self.max_batch_size]
                    for (i, *_), reply in zip(part, self._generate_batch(part, sampling, stop, top_logprobs), strict=True):
                        replies[i] = reply
                self._store.evict()
        finally:
            self.model.train(was_training)
        return [r if r is not None else Reply("", error="no reply") for r in replies]

    def clear_cache(self) -> None:
        """Forget every reused key/value (done automatically when the weights change)."""
        self._store.clear()

    def _check_weights(self) -> None:
        version = tuple(p._version for p in self.model.parameters())
        if version != self._weights_version:
            self._store.clear()
            self._weights_version = version

    def _plan_rows(self, prompts: list[np.ndarray], keys: list[int]) -> list[PrefillRow]:
        """Pick each row's reuse source: its own cached trajectory, or a prefix shared with other
        rows of the batch (computed once here when worthwhile)."""
        rows = []
        for tokens, key in zip(prompts, keys, strict=True):
            own = self._store.rows.get(key) if self.reuse_kv else None
            n = min(common_prefix_length(own.tokens, tokens), len(tokens) - 1) if own is not None else 0
            rows.append(PrefillRow(tokens, own if n > 0 else None, n))
        if not self.reuse_kv:
            return rows
        self._share_prefixes(rows)
        for row in rows:
            entry, n = self._store.best_shared(row.tokens)
            n = min(n, len(row.tokens) - 1)
            if entry is not None and n > row.reuse:
                row.source, row.reuse = entry, n
        return rows

    def _share_prefixes(self, rows: list[PrefillRow]) -> None:
        order = sorted(range(len(rows)), key=lambda i: tuple(rows[i].tokens))
        groups: list[list[int]] = []
        lengths: list[int] = []
        for a, b in zip(order, order[1:]):
            n = min(common_prefix_length(rows[a].tokens, rows[b].tokens), len(rows[a].tokens) - 1, len(rows[b].tokens) - 1)
            if n >= _MIN_SHARED_PREFIX and groups and groups[-1][-1] == a:
                groups[-1].append(b)
                lengths[-1] = min(lengths[-1], n)
            elif n >= _MIN_SHARED_PREFIX:
                groups.append([a, b])
                lengths.append(n)
        todo = []
        for members, n in zip(groups, lengths, strict=True):
            prefix = rows[members[0]].tokens[:n]
            gain = sum(1 for m in members if rows[m].reuse < n - _MIN_SHARED_PREFIX)
            entry, have = self._store.best_shared(prefix)
            if gain >= 2 and have < n:
                todo.append(PrefillRow(prefix, entry if have > 0 else None, min(have, n - 1)))
        if todo:
            batch, _ = self._prefill(todo, extra=0)
            for i, row in enumerate(todo):
                self._store.add_shared(batch.row_entry(i, row.tokens))

    def _generate_batch(
        self, part: list[tuple[int, Request, np.ndarray, int]], cfg: SamplingConfig, stop: tuple[str, ...],
        top_logprobs: int = 0,
    ) -> list[Reply]:
        prompts = [p for _, _, p, _ in part]
        keys = [k for *_, k in part]
        rows = self._plan_rows(prompts, keys)
        self.stats["prompt_tokens"] += sum(len(p) for p in prompts)
        max_new = cfg.max_new_tokens
        assert max_new is not None  # generate_with resolved it
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
                if self._finished(tokens[row], stop) or step == max_new - 1:
                    done[row] = True
                    live[pos] = False
                    if self.reuse_kv:
                        kept = np.concatenate([prompts[row], np.asarray(tokens[row][:-1], dtype=np.int64)])
                        self._store.put(keys[row], batch.row_entry(pos, kept))
            if all(done):
                break
            if (~live).sum() * 4 >= len(where):  # drop finished rows once they are a quarter
                index = torch.nonzero(live).squeeze(1)
                batch.select(index.to(self.device))
                where = [where[i] for i in index.tolist()]
                live = torch.ones(len(where), dtype=torch.bool)
                logits, chosen = logits[index], chosen[index]
            logits = self._step(batch, chosen.to(self.device), live.to(self.device))
        self.stats["generated_tokens"] += sum(len(t) for t in tokens)
        return [
            Reply(
                self.tokenizer.decode(tokens[i], skip_special_tokens=True),
                token_ids=tuple(tokens[i]),
                logprobs=tuple(logprobs[i]),
                prompt_ids=tuple(prompts[i].tolist()),
                usage={"prompt_tokens": len(prompts[i]), "completion_tokens": len(tokens[i])},
                details={"top_logprobs": tops[i]} if top_logprobs else None,
            )
            for i in range(b)
        ]

    def _piece(self, token: int) -> str:
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self.tokenizer.decode([token])
        return piece

    def _finished(self, tokens: list[int], stop: tuple[str, ...]) -> bool:
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

    # -- scoring -------------------------------------------------------------------------------

    def score(
        self,
        messages: Sequence[Sequence[Message]],
        continuations: Sequence[str],
        *,
        sampling: SamplingConfig | None = None,
    ) -> list[list[float]]:
        """Per-token log-probs of each continuation (tokenized as :meth:`continuation_ids`) as the
        assistant's reply to its conversation.

        With ``sampling=None`` these are the model's own log-probs (T = 1), which equal the
        sampling-time log-probs of greedy and T = 1 replies; pass the sampling config used at
        generation time to score under the same (tempered, truncated) distribution.
        """
        conts = [self.continuation_ids(c) for c in continuations]
        return self.score_ids(messages, conts, sampling=sampling)

    def score_ids(
        self,
        messages: Sequence[Sequence[Message]],
        continuations: Sequence[Sequence[int]],
        *,
        sampling: SamplingConfig | None = None,
    ) -> list[list[float]]:
        """Like :meth:`score` for continuations given as token ids (e.g. ``Reply.token_ids``)."""
        if len(messages) != len(continuations):
            raise ValueError(f"{len(messages)} conversations but {len(continuations)} continuations")
        prompts = [self.prompt_ids(m) for m in messages]
        s = sampling or SamplingConfig(temperature=0.0)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                out = continuation_logprobs(
                    self.model, prompts, [list(c) for c in continuations],
                    temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                    batch_size=self.max_batch_size, pad_id=self.pad_id,
                )
        finally:
            self.model.train(was_training)
        return [t.tolist() for t in out]


@register_policy("hf", needs_arg=True)
def _make_hf(arg: str | None, sampling: SamplingConfig, backend: BackendOptions) -> HFPolicy:
    return HFPolicy.from_pretrained(
        arg or "", sampling, attn_implementation=os.environ.get("ARLKIT_HF_ATTN", "auto"),
        context_length=backend.context_length,
    )
