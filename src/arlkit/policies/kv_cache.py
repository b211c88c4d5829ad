"""KV caches for the ``hf`` backend: per-trajectory entries kept across turns, shared prefixes, and a
cache layer over preallocated buffers so that decoding appends in place.

An :class:`CacheEntry` holds the keys/values of a token sequence; :class:`CacheStore` keeps one per trajectory
(LRU by bytes) plus a few prefixes shared by many rows; :class:`CachedBatch` is one left-padded batch whose
rows may start from a reused prefix (column layout ``[pad][reused prefix][pad][new tokens][generated]``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from arlkit.policies.protocol import PolicyError

__all__ = ["CacheEntry", "CacheStore", "CachedBatch", "PrefillRow", "buffer_layer_class", "common_prefix_length",
           "require_cache_layers"]

# -- the KV store ------------------------------------------------------------------------------


@dataclass
class CacheEntry:
    """Keys/values of ``tokens``: one ``(key, value)`` pair per layer, each (heads, len, head_dim)."""

    tokens: np.ndarray
    kv: list[tuple[torch.Tensor, torch.Tensor]]

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.kv)


def common_prefix_length(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


class CacheStore:
    """Per-trajectory entries (LRU, keyed by the trajectory seed) and shared prefixes."""

    def __init__(self, max_bytes: int, max_shared: int = 16) -> None:
        self.max_bytes = max_bytes
        self.max_shared = max_shared
        self.rows: OrderedDict[int, CacheEntry] = OrderedDict()
        self.shared: list[CacheEntry] = []

    def clear(self) -> None:
        self.rows.clear()
        self.shared.clear()

    def best_shared(self, tokens: np.ndarray) -> tuple[CacheEntry | None, int]:
        best, length = None, 0
        for entry in self.shared:
            n = common_prefix_length(entry.tokens, tokens)
            if n > length:
                best, length = entry, n
        return best, length

    def add_shared(self, entry: CacheEntry) -> None:
        self.shared.append(entry)
        del self.shared[: -self.max_shared]

    def put(self, key: int, entry: CacheEntry) -> None:
        self.rows[key] = entry
        self.rows.move_to_end(key)

    def evict(self) -> None:
        total = sum(e.nbytes for e in self.rows.values()) + sum(e.nbytes for e in self.shared)
        while total > self.max_bytes and self.rows:
            _, entry = self.rows.popitem(last=False)
            total -= entry.nbytes
        while total > self.max_bytes and self.shared:
            total -= self.shared.pop(0).nbytes


# -- batched forward with a preallocated cache -------------------------------------------------


def buffer_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class _BufferLayer(DynamicLayer):  # type: ignore[misc, valid-type]
        """A cache layer over preallocated (B, heads, capacity, head_dim) buffers: appending writes in
        place instead of concatenating, and each row's reused prefix is copied in right-aligned."""

        def __init__(self, prefixes: list[tuple[torch.Tensor, torch.Tensor] | None], start: int, capacity: int) -> None:
            super().__init__()
            self.prefixes, self.n, self.capacity = prefixes, start, capacity
            self.is_initialized = True
            self.kb: torch.Tensor | None = None
            self.vb: torch.Tensor | None = None

        def _allocate(self, k: torch.Tensor, v: torch.Tensor) -> None:
            b, h = k.shape[:2]
            # Columns past the current length are never read, so only the reused block (padding
            # included) needs defined values.
            self.kb = k.new_empty(b, h, self.capacity, k.shape[-1])
            self.vb = v.new_empty(b, h, self.capacity, v.shape[-1])
            self.kb[:, :, : self.n] = 0
            self.vb[:, :, : self.n] = 0
            for row, prefix in enumerate(self.prefixes):
                if prefix is not None:
                    n = prefix[0].shape[1]
                    self.kb[row, :, self.n - n : self.n] = prefix[0]
                    self.vb[row, :, self.n - n : self.n] = prefix[1]
            self.prefixes = []

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self.kb is None:
                self._allocate(key_states, value_states)
            q = key_states.shape[-2]
            self.kb[:, :, self.n : self.n + q] = key_states
            self.vb[:, :, self.n : self.n + q] = value_states
            self.n += q
            self.keys, self.values = self.kb[:, :, : self.n], self.vb[:, :, : self.n]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.n

        def select(self, index: torch.Tensor) -> None:
            if self.kb is not None:
                self.kb, self.vb = self.kb[index], self.vb[index]
                self.keys, self.values = self.kb[:, :, : self.n], self.vb[:, :, : self.n]

    return _BufferLayer


@dataclass
class PrefillRow:
    """One sequence to prefill: ``tokens``, of which the first ``reuse`` come from ``source``."""

    tokens: np.ndarray
    source: CacheEntry | None = None
    reuse: int = 0


class CachedBatch:
    """Left-padded rows sharing one cache: column layout per row is
    ``[pad][reused prefix][pad][new tokens][generated...]``, with a 0/1 mask over columns.

    ``layers`` are the preallocated buffer layers, or empty when the model keeps its own cache
    (models whose cache is not plain attention layers: no reuse, no scrubbing)."""

    def __init__(self, layers: list[Any], cache: Any, mask: torch.Tensor, next_pos: torch.Tensor, width: int) -> None:
        self.layers, self.cache, self.mask, self.next_pos, self.width = layers, cache, mask, next_pos, width

    def row_entry(self, row: int, tokens: np.ndarray) -> CacheEntry:
        """A copy of the cached keys/values of ``row`` (its unmasked columns) for ``tokens``."""
        cols = torch.nonzero(self.mask[row, : self.width]).squeeze(1)
        if len(cols) != len(tokens):
            raise AssertionError(f"cache holds {len(cols)} columns for {len(tokens)} tokens")
        kv = [(layer.kb[row][:, cols].clone(), layer.vb[row][:, cols].clone()) for layer in self.layers]
        return CacheEntry(tokens, kv)

    def select(self, index: torch.Tensor) -> None:
        if self.layers:
            for layer in self.layers:
                layer.select(index)
        else:
            self.cache.batch_select_indices(index)
        self.mask, self.next_pos = self.mask[index], self.next_pos[index]


def require_cache_layers() -> None:
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        raise PolicyError(
            f"the hf backend needs transformers >= 5 (per-layer KV cache objects); found {transformers.__version__}"
        )
