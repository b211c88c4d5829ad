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
Measured on the project's 2-core CPU with the micro model: see docs/policies.md (throughput).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["ATTENTION_NAME", "arlkit_attention", "register_attention"]

ATTENTION_NAME = "arlkit"
_UNSUPPORTED = ("softcap", "s_aux", "sinks", "position_bias")


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
