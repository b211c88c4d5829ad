"""Unbiased pass@k (Chen et al. 2021) and Pass@(K,T) (docs/metrics.md#pass-at-k, #pass-at-kt; RT §2.2)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["pass_at_k", "pass_at_k_per_task", "successes_within"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` samples drawn without replacement from ``n``
    samples, ``c`` of them correct, is correct: ``1 - C(n - c, k) / C(n, k)``.

    Computed in the stable product form ``1 - prod_{i = n-c+1..n} (1 - k / i)``; 1.0 when
    ``n - c < k``; exactly 0.0 when ``c = 0``. Requires ``1 <= k <= n`` and ``0 <= c <= n``.
    """
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got c={c}, n={n}")
    if c == 0:
        return 0.0
    if n - c < k:
        return 1.0
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)
    return float(1.0 - np.prod(1.0 - k / i))


def successes_within(success_turns: Sequence[int | None], budget: int) -> int:
    """``c(T)``: how many trajectories succeeded at turn ``<= budget`` (docs/metrics.md#pass-at-kt, hidden mode)."""
    return sum(1 for turn in success_turns if turn is not None and turn <= budget)


def pass_at_k_per_task(counts: Sequence[tuple[int, int]], k: int) -> np.ndarray:
    """pass@k of each task from its ``(n, c)``; the Pass@(K,T) estimate is their mean."""
    return np.array([pass_at_k(n, c, k) for n, c in counts], dtype=np.float64)
