"""KV caches for the ``hf`` backend: per-trajectory entries kept across turns, shared prefixes, a
cache layer over preallocated buffers so that decoding appends in place, and the batched forward
passes over it.

A :class:`CacheEntry` holds the keys/values of a token sequence; :class:`CacheStore` keeps one per trajectory
(LRU by bytes) plus a few prefixes shared by many rows; :class:`CachedBatch` is one left-padded batch whose
rows may start from a reused prefix (column layout ``[pad][reused prefix][pad][new tokens][generated]``);
:class:`CachedForward` prefills such a batch and decodes it one token per row at a time.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from arlkit.policies.protocol import PolicyError

__all__ = ["CacheEntry", "CacheStore", "CachedBatch", "CachedForward", "PrefillRow", "buffer_layer_class",
           "common_prefix_length", "forward_parameters", "plain_cache_layers", "require_cache_layers"]

_ATTENTION_BYTES = 256 * 2**20  # cap on one prefill chunk's attention-score tensor

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


def forward_parameters(model: Any) -> Mapping[str, inspect.Parameter]:
    """The keyword parameters of ``model``'s forward pass. A wrapper (e.g. a peft model) forwards
    keyword arguments, so the wrapped model's signature is read."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inspect.signature(base.forward).parameters


def plain_cache_layers(model: Any) -> bool:
    """KV reuse needs standard attention layers (no sliding window, no recurrent state)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    layers = DynamicCache(config=model.config).layers
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


class CachedForward:
    """Batched forward passes of a causal LM over one :class:`CachedBatch`: a prefill whose rows
    start from reused prefixes, then decode steps of one token per row.

    Models whose cache is not plain attention layers (:func:`plain_cache_layers`) keep their own
    cache; their rows cannot start from a reused prefix."""

    def __init__(self, model: Any, pad_id: int) -> None:
        self.model, self.pad_id = model, pad_id
        self.device = next(model.parameters()).device
        params = forward_parameters(model)
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = "logits_to_keep" if "logits_to_keep" in params else None
        self._layer_cls = buffer_layer_class()
        self.buffered = plain_cache_layers(model)
        """Whether the batches use preallocated buffer layers (so rows may reuse cached prefixes)."""

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: Any, keep: int) -> torch.Tensor:
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True}
        if self._keep_kw:
            kwargs[self._keep_kw] = keep
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, **kwargs)
        return out.logits[:, -keep:].float()

    def prefill(self, rows: Sequence[PrefillRow], extra: int) -> tuple[CachedBatch, torch.Tensor]:
        """Encode every row's new tokens (after its reused prefix) into one cache with room for
        ``extra`` more columns; returns the batch and the logits at each row's last token.

        Layout: the new tokens of all rows are right-aligned in the block of columns
        ``[base, base + width)``; row ``i``'s reused prefix sits immediately before its new tokens,
        so each row is one contiguous run of columns ending at ``base + width``."""
        from transformers.cache_utils import DynamicCache

        dev = self.device
        new = [len(r.tokens) - r.reuse for r in rows]
        width = max(new)
        base = max(0, max(len(r.tokens) for r in rows) - width)
        b = len(rows)
        first_new = torch.as_tensor([base + width - n for n in new], dtype=torch.long, device=dev)
        start = first_new - torch.as_tensor([r.reuse for r in rows], dtype=torch.long, device=dev)
        layers = []
        if self.buffered:
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

    def step(self, batch: CachedBatch, tokens: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (rows not ``live`` feed padding, masked out); next logits."""
        col = batch.width
        batch.mask[:, col] = live.long()
        ids = torch.where(live, tokens, torch.full_like(tokens, self.pad_id))[:, None]
        logits = self._forward(ids, batch.mask[:, : col + 1], batch.next_pos[:, None], batch.cache, 1)
        batch.next_pos = batch.next_pos + 1
        batch.width += 1
        return logits[:, -1]
