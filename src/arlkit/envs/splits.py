"""Train/test splits decided by task *content*, so the two can never share a task.

A task's split is a pure function of a canonical string of its content (a hash), so the same map
or question always lands in the same split whatever seed produced it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = ["SPLITS", "collect_split", "content_id", "split_of"]

SPLITS = ("train", "test")
TEST_FRACTION_PERCENT = 25

T = TypeVar("T")


def content_id(content: str) -> str:
    """A short stable id of ``content`` (first 12 hex digits of its SHA-256)."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:12]


def split_of(content: str) -> str:
    """``"test"`` for about a quarter of all contents, ``"train"`` for the rest; deterministic."""
    bucket = int(hashlib.sha256(("split:" + content).encode("utf-8")).hexdigest()[:8], 16) % 100
    return "test" if bucket < TEST_FRACTION_PERCENT else "train"


def collect_split(
    candidates: Iterator[T | None], key: Callable[[T], str], split: str, n: int, max_draws: int
) -> list[T]:
    """The first ``n`` distinct candidates (by ``key``) that fall in ``split``.

    Draws at most ``max_draws`` candidates so that a small task space (a 4x4 map family has few
    distinct maps) ends in a clear ``ValueError`` instead of a hang. A stream may yield ``None`` for
    a failed attempt: it counts as a draw.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid choices: {', '.join(SPLITS)}")
    if n < 0:
        raise ValueError(f"the number of tasks must be >= 0, got {n}")
    seen: set[str] = set()
    out: list[T] = []
    for draws, candidate in enumerate(candidates):
        if len(out) >= n:
            break
        if draws >= max_draws:
            raise ValueError(
                f"only {len(out)} distinct {split} tasks found in {max_draws} draws (asked for {n}); "
                "ask for fewer tasks or a larger task space"
            )
        if candidate is None:
            continue
        k = key(candidate)
        if k in seen or split_of(k) != split:
            continue
        seen.add(k)
        out.append(candidate)
    if len(out) < n:
        raise ValueError(f"only {len(out)} distinct {split} tasks exist (asked for {n})")
    return out
