"""``attn_implementation="arlkit"``: SDPA without key/value copies, and a decode kernel for the CPU.

transformers' own ``sdpa`` path expands grouped-query keys/values to every query head
(``repeat_kv``: a copy of the whole cache per layer) whenever a mask is given, and runs one-query
decode steps through the fused kernel, which on this project's CPU took as long as two plain matmuls
with ~100 cached tokens and twice as long with ~900 (32 rows, micro's head shapes).
This implementation computes the same attention (same mask semantics, same scale) as follows:

- **one-query steps without gradients on the CPU** (decoding): the query heads of each key/value
  head are grouped, scores are one batched matmul against the cache as stored (no copy), masked,
  soft-maxed and multiplied with the values;
- **everything else on the CPU** (prefill, teacher forcing, training): ``scaled_dot_product_attention``
  with ``enable_gqa`` (no expanded copies);
- **other devices**, or features this function does not implement (soft-capping, attention
  sinks, position biases): transformers' ``sdpa`` function unchanged.

Masks are built exactly as for ``sdpa`` (the same mask function is registered under this name).
Its speed against ``sdpa`` and ``eager``: docs/policies.md, "Throughput".

:func:`choose_attention` sets a model's implementation for the ``hf`` backend: the one asked for,
or with ``"auto"`` on the CPU the faster of this one and ``eager`` on work shaped like a rollout turn.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from arlkit.policies.kv_cache import CacheEntry, CachedForward, PrefillRow
from arlkit.policies.protocol import PolicyError

__all__ = ["ATTENTION_NAME", "arlkit_attention", "choose_attention", "register_attention"]

ATTENTION_NAME = "arlkit"
_UNSUPPORTED = ("softcap", "s_aux", "sinks", "position_bias")
_PROBE_MAX_PARAMS = 500_000_000  # above this, CPU attention is not probed (matmuls dominate anyway)


def arlkit_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention-interface function: query (B, H, Lq, D), key/value (B, Hkv, Lk, D),
    a boolean mask (B, 1, Lq, Lk) where True means "attend" (or None); returns (B, Lq, H, D)."""
    if query.device.type != "cpu" or any(kwargs.get(name) is not None for name in _UNSUPPORTED):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    b, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    scale = dim**-0.5 if scaling is None else scaling
    if q_len == 1 and not (torch.is_grad_enabled() and (query.requires_grad or key.requires_grad)):
        grouped = query.reshape(b, kv_heads, heads // kv_heads, dim)
        scores = torch.matmul(grouped, key.transpose(-1, -2)).mul_(scale)
        if attention_mask is not None and attention_mask.dtype == torch.bool:
            scores.masked_fill_(~attention_mask, float("-inf"))
        elif attention_mask is not None:  # an additive mask
            scores.add_(attention_mask)
        out = torch.matmul(torch.softmax(scores, dim=-1), value)
        return out.reshape(b, 1, heads, dim), None
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout if module.training else 0.0,
        scale=scale,
        is_causal=bool(q_len > 1 and attention_mask is None and causal),
        enable_gqa=heads != kv_heads,
    )
    return out.transpose(1, 2).contiguous(), None


def register_attention() -> str:
    """Register the implementation (and its mask function, ``sdpa``'s) with transformers; returns its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION_NAME, arlkit_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
    return ATTENTION_NAME


def choose_attention(forward: CachedForward, vocab_size: int, requested: str) -> str:
    """Set the attention implementation of ``forward``'s model and return its name: ``requested``, or
    for ``"auto"`` on the CPU (models up to 500M parameters) this module's kernel unless ``eager`` is
    clearly faster on a timed probe (:func:`_time_probe`; ``vocab_size``: the token ids it may
    feed), elsewhere the model's own. Call it under ``torch.inference_mode()``."""
    model = forward.model
    current = getattr(model.config, "_attn_implementation", None) or "eager"
    setter = getattr(model, "set_attn_implementation", None)
    if requested != "auto":
        if setter is None:
            raise PolicyError("this transformers version cannot switch the attention implementation")
        try:
            setter(requested)
        except Exception as exc:  # noqa: BLE001 - an implementation this model does not support
            raise PolicyError(f"attention implementation {requested!r} is not available: {exc}") from None
        return requested
    params = sum(p.numel() for p in model.parameters())
    if forward.device.type != "cpu" or setter is None or params > _PROBE_MAX_PARAMS:
        return current
    timings: dict[str, float] = {}
    for _ in range(2):  # alternate so that a burst of load on a shared CPU hits both
        for impl in (ATTENTION_NAME, "eager"):
            try:
                setter(impl)
                timings[impl] = min(timings.get(impl, float("inf")), _time_probe(forward, vocab_size))
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


def _time_probe(forward: CachedForward, vocab_size: int) -> float:
    """Seconds for work shaped like a rollout turn: a small prefill, then decode steps of 16 rows
    over a 384-token cache (random keys/values: no prefill needed to build it)."""
    gen = torch.Generator().manual_seed(0)
    model = forward.model
    config = model.config
    vocab = min(int(config.vocab_size), vocab_size)
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    dtype = next(model.parameters()).dtype

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(forward.device, dtype)

    context = 384
    fake = CacheEntry(
        np.zeros(context, dtype=np.int64),
        [(randn(kv_heads, context, head_dim), randn(kv_heads, context, head_dim)) for _ in range(config.num_hidden_layers)],
    )
    tokens = torch.randint(0, vocab, (context + 1,), generator=gen).numpy()
    start = time.perf_counter()
    forward.prefill([PrefillRow(tokens[:96]) for _ in range(4)], extra=0)
    batch, logits = forward.prefill([PrefillRow(tokens, fake, context) for _ in range(16)], extra=8)
    for _ in range(8):
        logits = forward.step(batch, logits.argmax(-1), torch.ones(16, dtype=torch.bool))
    return time.perf_counter() - start
