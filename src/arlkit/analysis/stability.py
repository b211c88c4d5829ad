"""Is a training run stable, and if it collapsed, when (docs/arena.md; AA §3.3, §4.2, Fig. 2).

**Stability verdict** (AA §3.3): a run is *stable* when the variance of its success rate over the
final ``final_share`` (20%) of training steps, at least two of them, is below ``threshold``. ARLArena does not publish its
threshold; arlkit's default, 0.01 (a standard deviation of 0.1), is a documented choice. Next to the
variance the verdict reports the binomial noise floor ``mean p(1 − p) / n`` of those steps (n =
trajectories per step), the variance a perfectly steady policy would still show, so a verdict can
be read against the sampling noise of small runs.

**Collapse** (AA §4.2: "exploding gradient norms and KL divergence, accompanied by a sharp drop in
the valid-format ratio"): with baselines the medians of the ``window`` steps before step t, step t
*explodes* the gradient norm when ``g_t > explode · median`` (and > ``floor``), likewise the KL, and
*drops* the format ratio when ``f_t < median − format_drop``. The collapse step is the first step
at which each of the three events has happened within the last ``within`` steps (with no format
series, the two others). No collapse is reported before ``window`` steps of history exist.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["StabilityConfig", "StabilityVerdict", "collapse_step", "series", "stability_verdict"]

SUCCESS_KEYS = ("reward/success", "val/success")
GRAD_KEYS = ("optim/grad_norm",)
KL_KEYS = ("actor/kl_loss", "actor/ppo_kl")
FORMAT_KEYS = ("rollout/valid_format_tokens",)


@dataclass(frozen=True)
class StabilityConfig:
    """The rules' parameters (module docstring)."""

    final_share: float = 0.2
    threshold: float = 0.01
    window: int = 10
    explode: float = 5.0
    floor: float = 1e-6
    format_drop: float = 0.2
    within: int = 3

    def __post_init__(self) -> None:
        if not 0 < self.final_share <= 1:
            raise ValueError(f"final_share must be in (0, 1], got {self.final_share}")
        if self.threshold <= 0 or self.explode <= 1 or self.format_drop <= 0:
            raise ValueError("threshold > 0, explode > 1 and format_drop > 0 are required")
        if self.window < 2 or self.within < 1:
            raise ValueError(f"window >= 2 and within >= 1 are required, got {self.window} and {self.within}")


@dataclass(frozen=True)
class StabilityVerdict:
    """One run's verdict.

    Attributes:
        run: the run's name.
        steps: logged training steps.
        success_key: the success series used.
        final_steps: how many final steps the variance is taken over.
        final_mean / final_var: mean and (population) variance of the success rate over them.
        noise_floor: the binomial variance of those steps, NaN when the trajectories per step are unknown.
        stable: ``final_var < threshold``.
        collapse: the step of the collapse, or None.
        kl_key: the KL series the collapse detector used ("" when none was logged).
    """

    run: str
    steps: int
    success_key: str
    final_steps: int
    final_mean: float
    final_var: float
    noise_floor: float
    stable: bool
    collapse: int | None
    kl_key: str


def series(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> tuple[str, list[int], list[float]]:
    """The first of ``keys`` that ``rows`` log: ``(key, steps, values)`` (finite values only)."""
    for key in keys:
        points = [(int(r["step"]), float(r[key])) for r in rows if _finite(r.get(key))]
        if points:
            return key, [s for s, _ in points], [v for _, v in points]
    return "", [], []


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _events(values: Sequence[float], window: int, test: Any) -> list[bool]:
    out = []
    for t, value in enumerate(values):
        out.append(t >= window and bool(test(value, float(np.median(values[t - window : t])))))
    return out


def collapse_step(
    steps: Sequence[int],
    grad_norm: Sequence[float],
    kl: Sequence[float],
    format_ratio: Sequence[float] | None,
    config: StabilityConfig = StabilityConfig(),
) -> int | None:
    """The collapse step by the module docstring's rule (series aligned on ``steps``), or None."""
    c = config
    explode = lambda v, m: v > c.explode * max(m, c.floor) and v > c.floor  # noqa: E731
    signals = [_events(list(grad_norm), c.window, explode), _events([abs(k) for k in kl], c.window, explode)]
    if format_ratio is not None:
        signals.append(_events(list(format_ratio), c.window, lambda v, m: v < m - c.format_drop))
    for t in range(len(steps)):
        lo = max(0, t - c.within + 1)
        if all(any(s[lo : t + 1]) for s in signals):
            return int(steps[t])
    return None


def stability_verdict(
    name: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    trajectories_per_step: int | None = None,
    config: StabilityConfig = StabilityConfig(),
) -> StabilityVerdict:
    """The verdict on one run's ``metrics.jsonl`` records (module docstring)."""
    key, steps, success = series(rows, SUCCESS_KEYS)
    if not success:
        raise ValueError(f"{name}: no success rate logged ({' or '.join(SUCCESS_KEYS)})")
    k = min(len(success), max(2, math.ceil(config.final_share * len(success))))
    final = np.asarray(success[-k:])
    floor = float(np.mean(final * (1 - final)) / trajectories_per_step) if trajectories_per_step else math.nan
    by_step = {int(r["step"]): r for r in rows}
    aligned = [by_step[s] for s in sorted(by_step)]
    kl_key, _, _ = series(aligned, KL_KEYS)
    collapse = None
    if kl_key:
        kept = [r for r in aligned if _finite(r.get("optim/grad_norm")) and _finite(r.get(kl_key))]
        formats = [r.get(FORMAT_KEYS[0]) for r in kept]
        fmt = [float(v) for v in formats] if all(_finite(v) for v in formats) and formats else None
        collapse = collapse_step([int(r["step"]) for r in kept], [float(r["optim/grad_norm"]) for r in kept],
                                 [float(r[kl_key]) for r in kept], fmt, config)  # fmt: skip
    var = float(np.var(final))
    return StabilityVerdict(name, len(success), key, k, float(final.mean()), var, floor, var < config.threshold,
                            collapse, kl_key)  # fmt: skip
