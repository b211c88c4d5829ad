"""Which cached keys/values each row of an ``hf`` batch starts from (:mod:`arlkit.policies.hf_generate`).

A multi-turn episode re-sends its growing history every turn. After each reply the backend keeps
the trajectory's keys/values (keyed by :func:`~arlkit.policies.hf_ops.conversation_key`) together
with the token ids they encode; the next turn prefills only the tokens after the longest common
prefix of the new prompt and the cached ids. Rows of one batch that share a long prefix (the system
prompt, identical for all trajectories of one turn and budget) get it computed once and copied.
Reuse is exact: a reused key/value is the one a full re-encoding would compute (up to float
rounding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from arlkit.policies.kv_cache import CachedBatch, CacheStore, PrefillRow, common_prefix_length

__all__ = ["MIN_SHARED_PREFIX", "plan_rows"]

MIN_SHARED_PREFIX = 32
"""Shortest common prefix worth computing once for several rows."""

Prefill = Callable[[list[PrefillRow]], CachedBatch]
"""Encodes rows into one cache (no room for more tokens): how shared prefixes are computed."""


def plan_rows(
    prompts: Sequence[np.ndarray], keys: Sequence[int], store: CacheStore | None, prefill: Prefill
) -> list[PrefillRow]:
    """Each prompt's reuse source: its own cached trajectory (by its key), or a prefix shared with
    other rows of the batch, computed here with ``prefill`` and kept in ``store`` when worthwhile.
    ``store=None``: no reuse, every row is prefilled whole."""
    rows = []
    for tokens, key in zip(prompts, keys, strict=True):
        own = store.rows.get(key) if store is not None else None
        n = min(common_prefix_length(own.tokens, tokens), len(tokens) - 1) if own is not None else 0
        rows.append(PrefillRow(tokens, own if n > 0 else None, n))
    if store is None:
        return rows
    _share_prefixes(rows, store, prefill)
    for row in rows:
        entry, n = store.best_shared(row.tokens)
        n = min(n, len(row.tokens) - 1)
        if entry is not None and n > row.reuse:
            row.source, row.reuse = entry, n
    return rows


def _share_prefixes(rows: list[PrefillRow], store: CacheStore, prefill: Prefill) -> None:
    """Compute once, and keep in ``store``, the long prefixes that at least two rows share and would
    otherwise encode themselves (the store may hold a shorter part of one already)."""
    order = sorted(range(len(rows)), key=lambda i: tuple(rows[i].tokens))
    groups: list[list[int]] = []
    lengths: list[int] = []
    for a, b in zip(order, order[1:]):
        n = min(common_prefix_length(rows[a].tokens, rows[b].tokens), len(rows[a].tokens) - 1, len(rows[b].tokens) - 1)
        if n >= MIN_SHARED_PREFIX and groups and groups[-1][-1] == a:
            groups[-1].append(b)
            lengths[-1] = min(lengths[-1], n)
        elif n >= MIN_SHARED_PREFIX:
            groups.append([a, b])
            lengths.append(n)
    todo = []
    for members, n in zip(groups, lengths, strict=True):
        prefix = rows[members[0]].tokens[:n]
        gain = sum(1 for m in members if rows[m].reuse < n - MIN_SHARED_PREFIX)
        entry, have = store.best_shared(prefix)
        if gain >= 2 and have < n:
            todo.append(PrefillRow(prefix, entry if have > 0 else None, min(have, n - 1)))
    if todo:
        batch = prefill(todo)
        for i, row in enumerate(todo):
            store.add_shared(batch.row_entry(i, row.tokens))
