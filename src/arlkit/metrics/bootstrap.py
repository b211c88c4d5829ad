"""Percentile bootstrap over tasks (docs/metrics.md#bootstrap): plain, paired, and clustered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Estimate", "bootstrap_mean", "paired_bootstrap_difference"]


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its percentile-bootstrap interval.

    Attributes:
        value: the statistic on the original sample.
        low: lower end of the interval.
        high: upper end of the interval.
    """

    value: float
    low: float
    high: float


def _cluster_indices(n: int, clusters: Sequence[object], resamples: int, seed: int) -> list[np.ndarray]:
    """Resampled task-index sets drawing whole clusters with replacement."""
    rng = np.random.default_rng(seed)
    if len(clusters) != n:
        raise ValueError("clusters must give one label per task")
    labels = sorted(set(clusters), key=str)
    members = [np.flatnonzero(np.array([c == lab for c in clusters])) for lab in labels]
    picks = rng.integers(0, len(labels), size=(resamples, len(labels)))
    return [np.concatenate([members[j] for j in row]) for row in picks]


def _interval(stats: np.ndarray, value: float, level: float) -> Estimate:
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return Estimate(float(value), float(low), float(high))


def bootstrap_mean(
    values: Sequence[float] | np.ndarray,
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    clusters: Sequence[object] | None = None,
) -> Estimate:
    """Mean of per-task ``values`` with a percentile-bootstrap interval over tasks (or clusters)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("cannot bootstrap an empty set of tasks")
    if clusters is None:
        draws = np.random.default_rng(seed).integers(0, x.size, size=(resamples, x.size))
        stats = x[draws].mean(axis=1)
    else:
        stats = np.array([x[idx].mean() for idx in _cluster_indices(x.size, clusters, resamples, seed)])
    return _interval(stats, float(x.mean()), level)


def paired_bootstrap_difference(
    values_a: Sequence[float] | np.ndarray,
    values_b: Sequence[float] | np.ndarray,
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    clusters: Sequence[object] | None = None,
) -> Estimate:
    """Mean of ``a - b`` over the same tasks, resampling task indices jointly for both."""
    a = np.asarray(values_a, dtype=np.float64)
    b = np.asarray(values_b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("a paired comparison needs the same tasks in both runs")
    return bootstrap_mean(a - b, resamples=resamples, level=level, seed=seed, clusters=clusters)
