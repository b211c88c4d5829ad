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
    """Keys/values of ``tokens``: one ``(key, value)`` pair per layer, each (heads, len, head_dim).

    The tensors are usually views into the buffer of the batch that computed them (no copy is made
    when a row finishes); :meth:`CacheStore.evict` counts the buffers' real size."""

    tokens: np.ndarray
    kv: list[tuple[torch.Tensor, torch.Tensor]]

    def storages(self) -> dict[int, int]:
        """``{storage address: bytes}`` of the memory this entry keeps alive."""
        held = {}
        for pair in self.kv:
            for t in pair:
                storage = t.untyped_storage()
                held[storage.data_ptr()] = storage.nbytes()
        return held


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

    def held_bytes(self) -> int:
        """Bytes of the buffers the entries keep alive (several entries may share one buffer)."""
        held: dict[int, int] = {}
        for entry in [*self.rows.values(), *self.shared]:
            held.update(entry.storages())
        return sum(held.values())

    def evict(self) -> None:
        """Drop least recently used trajectories, then the oldest shared prefixes, until the
        buffers still referenced fit in ``max_bytes``."""
        entries = [*self.rows.values(), *self.shared]
        users: dict[int, int] = {}
        size: dict[int, int] = {}
        for entry in entries:
            for ptr, nbytes in entry.storages().items():
                users[ptr] = users.get(ptr, 0) + 1
                size[ptr] = nbytes
        total = sum(size.values())

        def release(entry: CacheEntry) -> int:
            freed = 0
            for ptr in entry.storages():
                users[ptr] -= 1
                if users[ptr] == 0:
                    freed += size[ptr]
            return freed

        while total > self.max_bytes and self.rows:
            _, entry = self.rows.popitem(last=False)
            total -= release(entry)
        while total > self.max_bytes and self.shared:
            total -= release(self.shared.pop(0))


# -- batched forward with a preallocated cache -------------------------------------------------


def buffer_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class _BufferLayer(DynamicLayer):  # type: ignore[misc, valid-type]
        """A cache layer over preallocated (B, heads, capacity, head_dim) buffers: appending writes in
        place instead of concatenating. Row ``i``'s reused prefix is copied in so that it ends at
        column ``first_new[i]``, where its new tokens start; a prefill write never overwrites a column
        before ``first_new[i]`` (those hold the prefix, or zeros for padding)."""

        def __init__(
            self, prefixes: list[tuple[torch.Tensor, torch.Tensor] | None], first_new: torch.Tensor, start: int, capacity: int
        ) -> None:
            super().__init__()
            self.prefixes, self.first_new, self.n, self.capacity = prefixes, first_new, start, capacity
            self.prefill_end = int(first_new.max()) if len(first_new) else 0
            self.is_initialized = True
            self.kb: torch.Tensor | None = None
            self.vb: torch.Tensor | None = None

        def _allocate(self, k: torch.Tensor, v: torch.Tensor) -> None:
            b, h = k.shape[:2]
            # Columns past the current length are never read; every column before it must hold
            # finite values (a masked column still meets a zero weight: 0 * nan would be nan).
            self.kb = k.new_empty(b, h, self.capacity, k.shape[-1])
            self.vb = v.new_empty(b, h, self.capacity, v.shape[-1])
            # Row i's padding is [0, first_new[i] - len(prefix)); one write zeroes every row's (the
            # prefixes copied next overwrite what it covers of theirs; new tokens are written later).
            lengths = [0 if p is None else p[0].shape[1] for p in self.prefixes] or [0]
            pad_end = max(int(first) - n for first, n in zip(self.first_new.tolist(), lengths))
            self.kb[:, :, :pad_end] = 0
            self.vb[:, :, :pad_end] = 0
            for row, prefix in enumerate(self.prefixes):
                if prefix is not None:
                    end = int(self.first_new[row])
                    n = prefix[0].shape[1]
                    self.kb[row, :, end - n : end] = prefix[0]
                    self.vb[row, :, end - n : end] = prefix[1]
            self.prefixes = []

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self.kb is None:
                self._allocate(key_states, value_states)
            assert self.kb is not None and self.vb is not None
            q = key_states.shape[-2]
            cols = slice(self.n, self.n + q)
            if self.n < self.prefill_end:  # padding columns of this chunk keep their prefix / zeros
                keep = (torch.arange(self.n, self.n + q, device=self.first_new.device) < self.first_new[:, None])[:, None, :, None]
                key_states = torch.where(keep, self.kb[:, :, cols], key_states)
                value_states = torch.where(keep, self.vb[:, :, cols], value_states)
            self.kb[:, :, cols] = key_states
            self.vb[:, :, cols] = value_states
            self.n += q
            self.keys, self.values = self.kb[:, :, : self.n], self.vb[:, :, : self.n]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.n

        def select(self, index: torch.Tensor) -> None:
            self.first_new = self.first_new[index]
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
    """Left-padded rows sharing one cache: row ``i`` occupies the contiguous columns from
    ``start[i]`` on (``[pad][reused prefix][new tokens][generated...]``), with a 0/1 mask over
    columns (generated columns of rows that already finished are masked out).

    ``layers`` are the preallocated buffer layers, or empty when the model keeps its own cache
    (models whose cache is not plain attention layers: no reuse)."""

    def __init__(
        self, layers: list[Any], cache: Any, mask: torch.Tensor, next_pos: torch.Tensor, width: int, start: torch.Tensor
    ) -> None:
        self.layers, self.cache, self.mask, self.next_pos, self.width = layers, cache, mask, next_pos, width
        self.start = start

    def row_entry(self, row: int, tokens: np.ndarray) -> CacheEntry:
        """The cached keys/values of ``row``'s first ``len(tokens)`` columns, as views (no copy)."""
        first = int(self.start[row])
        last = first + len(tokens)
        if last > self.width or int(self.mask[row, first:last].sum()) != len(tokens):
            raise AssertionError(f"row {row} has no {len(tokens)} contiguous cached columns from {first}")
        kv = [(layer.kb[row, :, first:last], layer.vb[row, :, first:last]) for layer in self.layers]
        return CacheEntry(tokens, kv)

    def select(self, index: torch.Tensor) -> None:
        if self.layers:
            for layer in self.layers:
                layer.select(index)
        else:
            self.cache.batch_select_indices(index)
        self.mask, self.next_pos, self.start = self.mask[index], self.next_pos[index], self.start[index]


def require_cache_layers() -> None:
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        raise PolicyError(
            f"the hf backend needs transformers >= 5 (per-layer KV cache objects); found {transformers.__version__}"
        )
