"""RL − base action quality by normalised depth t / T (docs/metrics.md#depth-profile; RT §3.3 Figure 6).

States are grouped by ``t / T`` (t = turns completed before the state, T = the budget of the
trajectory that reached it) into equal-width bins; per bin the mean of RL − base quality gets a
95% percentile-bootstrap interval over tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arlkit.metrics.bootstrap import Estimate, bootstrap_mean

__all__ = ["DepthBin", "depth_profile"]


@dataclass(frozen=True)
class DepthBin:
    """One depth bin.

    Attributes:
        low: lower edge of t / T (inclusive).
        high: upper edge (exclusive, except the last bin).
        n_states: states in the bin.
        difference: mean RL − base quality with its interval; ``None`` for an empty bin.
        base_mean: mean base quality in the bin (NaN when empty).
        rl_mean: mean RL quality in the bin (NaN when empty).
    """

    low: float
    high: float
    n_states: int
    difference: Estimate | None
    base_mean: float
    rl_mean: float

    @property
    def center(self) -> float:
        """Middle of the bin."""
        return (self.low + self.high) / 2


def depth_profile(
    depths: Sequence[float],
    base: Sequence[float],
    rl: Sequence[float],
    tasks: Sequence[str],
    *,
    bins: int = 5,
    resamples: int = 2000,
    seed: int = 0,
) -> list[DepthBin]:
    """Mean RL − base quality per depth bin. States with a NaN quality are left out; a bin with
    one state gets a degenerate interval (its value)."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    d = np.asarray(depths, dtype=float)
    b = np.asarray(base, dtype=float)
    r = np.asarray(rl, dtype=float)
    ok = ~(np.isnan(b) | np.isnan(r))
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.clip(np.floor(d * bins).astype(int), 0, bins - 1)
    out = []
    for k in range(bins):
        mask = ok & (index == k)
        if not mask.any():
            out.append(DepthBin(float(edges[k]), float(edges[k + 1]), 0, None, float("nan"), float("nan")))
            continue
        clusters = [tasks[int(i)] for i in np.flatnonzero(mask)]
        est = bootstrap_mean(r[mask] - b[mask], resamples=resamples, seed=seed + k, clusters=clusters)
        out.append(DepthBin(float(edges[k]), float(edges[k + 1]), int(mask.sum()), est, float(b[mask].mean()), float(r[mask].mean())))
    return out
