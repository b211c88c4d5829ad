"""The ``hf`` backend: a local Hugging Face causal LM, batched, with KV caches reused across turns.

``hf:PATH`` loads any local causal-LM directory offline, renders each conversation with the
tokenizer's chat template and samples all replies of a turn as one left-padded batch. The parts:

- :mod:`arlkit.policies.hf_generate`: batched sampling (per-row seeds, stop strings, log-probs);
- :mod:`arlkit.policies.prefix_plan`: which cached keys/values each row starts from (its own
  trajectory's from earlier turns, or a prefix shared with other rows of the batch);
- :mod:`arlkit.policies.kv_cache`: the caches and the batched forward passes over them;
- :mod:`arlkit.policies.hf_ops`: loading, logits processing and sampling, teacher-forced scoring;
- :func:`arlkit.policies.attention.choose_attention`: the attention implementation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from arlkit.policies.attention import choose_attention, register_attention
from arlkit.policies.chat import ChatTokens
from arlkit.policies.hf_generate import BatchGenerator, ReplyEnd
from arlkit.policies.hf_ops import (
    continuation_logprobs, conversation_key, end_token_ids, load_hf_model, model_context_length, process_logits,
    sampling_seed, score_conversations,
)
from arlkit.policies.kv_cache import CachedForward, CacheStore, require_cache_layers
from arlkit.policies.protocol import Message, PolicyError, Reply, Request
from arlkit.policies.registry import BackendOptions, SamplingConfig, register_policy

__all__ = [
    "DEFAULT_STOP", "HFPolicy", "continuation_logprobs", "conversation_key", "load_hf_model", "model_context_length",
    "process_logits", "sampling_seed",
]

DEFAULT_STOP = ("</action>",)
"""Generation stops once the reply contains one of these strings (the closing action tag)."""


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
        self.eos_ids = end_token_ids(self.chat, model)
        self.pad_id = self.chat.pad_id
        if context_length is not None and context_length < 2:
            raise ValueError(f"context_length must be >= 2 tokens, got {context_length}")
        limits = [n for n in (model_context_length(model, tokenizer), context_length) if n is not None]
        self.context_length = min(limits) if limits else None
        """Tokens of prompt plus reply a request may use (``None``: unknown, unchecked)."""
        self._store = CacheStore(kv_cache_bytes)
        forward = CachedForward(model, self.pad_id)
        self.reuse_kv = reuse_kv and forward.buffered
        register_attention()
        with torch.inference_mode():
            self.attn_implementation = choose_attention(forward, len(tokenizer), attn_implementation)
        self.stats = {"prompt_tokens": 0, "prefilled_tokens": 0, "generated_tokens": 0}
        """Counters since construction: prompt tokens requested, tokens actually encoded (the rest
        came from reused caches; shared prefixes count once), tokens generated."""
        self._generator = BatchGenerator(forward, self.chat, ReplyEnd(tokenizer, self.eos_ids), self._store,
                                         reuse_kv=self.reuse_kv, stats=self.stats)

    @classmethod
    def from_pretrained(cls, path: str | Path, sampling: SamplingConfig | None = None, **kwargs: Any) -> HFPolicy:
        """Load ``path`` offline (see :func:`load_hf_model`) and wrap it; ``kwargs`` go to the constructor."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        model, tokenizer = load_hf_model(path, device=device, dtype=dtype)
        kwargs.setdefault("name", f"hf:{path}")
        return cls(model, tokenizer, sampling, **kwargs)

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of ``messages`` rendered by the chat template, ready for the assistant's reply."""
        return self.chat.prompt_ids(messages)

    def continuation_ids(self, text: str) -> list[int]:
        """Token ids of a reply text as it would follow the prompt."""
        return self.chat.ids(text)

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
        keys = list(cache_keys) if cache_keys is not None else [conversation_key(r) for r in requests]
        if len(keys) != len(requests):
            raise ValueError(f"{len(keys)} cache keys for {len(requests)} requests")
        return self._generator.generate(
            requests, keys, sampling, tuple(self.stop if stop is None else stop), top_logprobs=top_logprobs,
            context_length=self.context_length, max_batch_size=self.max_batch_size,
        )

    def clear_cache(self) -> None:
        """Forget every reused key/value (done automatically when the weights change)."""
        self._store.clear()

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
        return score_conversations(self.model, self.chat, messages, continuations, sampling,
                                   batch_size=self.max_batch_size)


@register_policy("hf", needs_arg=True)
def _make_hf(arg: str | None, sampling: SamplingConfig, backend: BackendOptions) -> HFPolicy:
    return HFPolicy.from_pretrained(
        arg or "", sampling, attn_implementation=os.environ.get("ARLKIT_HF_ATTN", "auto"),
        context_length=backend.context_length,
    )
