"""SplitMix64: a tiny random generator whose stream is the same on every platform and Python
version, for the generator of the shipped SQL databases (``make_sql_databases.py``), whose output
is pinned by hashes."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

__all__ = ["SplitMix64"]

_MASK = (1 << 64) - 1


class SplitMix64:
    """SplitMix64 with a few sampling helpers."""

    def __init__(self, seed: int) -> None:
        self.state = seed & _MASK

    @classmethod
    def from_seeds(cls, *seeds: int) -> SplitMix64:
        """A generator mixed from several integers (each folded in, then one draw)."""
        rng = cls(0)
        for s in seeds:
            rng.state = (rng.state * 0x100000001B3 + s + 1) & _MASK
            rng.next64()
        return rng

    def next64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def randint(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi]."""
        return lo + self.next64() % (hi - lo + 1)

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.randint(0, len(seq) - 1)]

    def chance(self, p: float) -> bool:
        return self.next64() < int(p * (1 << 64))

    def sample(self, seq: Sequence[Any], k: int) -> list[Any]:
        """``k`` distinct items, without replacement."""
        pool, out = list(seq), []
        for _ in range(k):
            out.append(pool.pop(self.randint(0, len(pool) - 1)))
        return out

    def weighted(self, items: Sequence[Any], weights: Sequence[int]) -> Any:
        """One item with probability proportional to its integer weight."""
        r = self.randint(1, sum(weights))
        for item, w in zip(items, weights, strict=True):
            r -= w
            if r <= 0:
                return item
        return items[-1]  # pragma: no cover

    def date(self, start: str, end: str) -> str:
        """A uniform ISO date between ``start`` and ``end`` inclusive."""
        a, b = _dt.date.fromisoformat(start).toordinal(), _dt.date.fromisoformat(end).toordinal()
        return _dt.date.fromordinal(self.randint(a, b)).isoformat()
