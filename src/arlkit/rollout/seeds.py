"""Stable seeds derived from a base seed and names (independent of Python's hash salt)."""

from __future__ import annotations

import hashlib

__all__ = ["derive_seed"]


def derive_seed(base: int, *parts: object) -> int:
    """A 63-bit seed that depends only on ``base`` and ``parts`` (their ``str``)."""
    text = "\x1f".join([str(base), *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1
