"""Step-level action quality at matched states (docs/metrics.md#matched-states; RT §3.3 and App. B.4).

A pool of intermediate states is drawn in equal numbers from the base and the RL policy's
trajectories; each state keeps its history and remaining budget. At every state each policy
proposes G next actions (default 16); a policy's quality at the state is the mean quality of its
G actions (FrozenLake and Sokoban: ``Q*_h(s, a)``, gamma 0.95, h = remaining turns). Reported:
the share of states where RL's quality is higher (ties count as not higher), each policy's mean
quality, and RL − base, all with percentile-bootstrap intervals over tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from arlkit.envs.capabilities import MissingCapability, has_step_quality, require_snapshots
from arlkit.analysis.process import ProcessReward
from arlkit.analysis.sampling import ActionSample, judge_note, sample_actions, unusable_note
from arlkit.analysis.states import StatePoint, equal_pool
from arlkit.envs import Env, Task
from arlkit.metrics.bootstrap import Estimate, bootstrap_mean
from arlkit.policies.protocol import Policy
from arlkit.rollout.records import Trajectory

__all__ = [
    "QualityComparison",
    "StateRow",
    "StepsConfig",
    "StepsResult",
    "compare_qualities",
    "matched_states",
    "quality_rows",
]


@dataclass(frozen=True)
class StepsConfig:
    """Options of the matched-state analysis.

    Attributes:
        states: pool size asked for (half from each policy's trajectories).
        actions: G, next actions sampled per policy per state.
        seed: seed of the pool draw and of the policies' sampling.
        bootstrap: bootstrap resamples for the intervals.
        batch_size: requests per ``policy.generate`` call.
    """

    states: int = 200
    actions: int = 16
    seed: int = 0
    bootstrap: int = 2000
    batch_size: int = 256

    def __post_init__(self) -> None:
        if self.states < 2:
            raise ValueError(f"states must be >= 2, got {self.states}")
        if self.actions < 1:
            raise ValueError(f"actions must be >= 1, got {self.actions}")
        if self.bootstrap < 100:
            raise ValueError(f"bootstrap must be >= 100, got {self.bootstrap}")


@dataclass(frozen=True)
class StateRow:
    """One state of the pool and both policies' quality there (one line of ``steps.csv``).

    Attributes:
        index: position in the pool.
        source: ``base`` or ``rl``: whose trajectory reached the state.
        task_id: the task.
        sample: the source trajectory's sample index.
        t: turns completed before the state.
        budget: the source trajectory's budget T.
        depth: normalised depth t / T.
        state_key: the environment's state key.
        base_quality: mean quality of the base policy's actions (NaN when all failed).
        rl_quality: mean quality of the RL policy's actions.
        base_invalid: share of the base policy's replies without a usable action (cut off at the
            token cap or malformed; the result's notes say how many were cut off).
        rl_invalid: share of the RL policy's replies without a usable action.
    """

    index: int
    source: str
    task_id: str
    sample: int
    t: int
    budget: int
    depth: float
    state_key: str
    base_quality: float
    rl_quality: float
    base_invalid: float
    rl_invalid: float

    @property
    def remaining(self) -> int:
        """Turns left at the state."""
        return self.budget - self.t


CSV_HEADER = [
    "index", "source", "task_id", "sample", "t", "budget", "remaining", "depth", "state_key",
    "base_quality", "rl_quality", "rl_minus_base", "base_invalid", "rl_invalid",
]  # fmt: skip


def row_values(row: StateRow) -> list[object]:
    """``row`` in the order of :data:`CSV_HEADER`."""
    return [
        row.index, row.source, row.task_id, row.sample, row.t, row.budget, row.remaining, row.depth, row.state_key,
        row.base_quality, row.rl_quality, row.rl_quality - row.base_quality, row.base_invalid, row.rl_invalid,
    ]  # fmt: skip


def _mean_quality(samples: Sequence[ActionSample]) -> tuple[float, float]:
    qualities = [s.quality for s in samples if s.error is None]
    invalid = sum(1 for s in samples if s.error is None and s.action is None)
    if not qualities:
        return math.nan, math.nan
    return float(np.mean(qualities)), invalid / len(qualities)


def quality_rows(
    points: Sequence[StatePoint],
    sources: Sequence[str],
    base_samples: Sequence[Sequence[ActionSample]],
    rl_samples: Sequence[Sequence[ActionSample]],
) -> list[StateRow]:
    """One :class:`StateRow` per point from both policies' sampled actions."""
    rows = []
    for i, (point, source, b, r) in enumerate(zip(points, sources, base_samples, rl_samples, strict=True)):
        bq, binv = _mean_quality(b)
        rq, rinv = _mean_quality(r)
        task_id, sample = point.task_sample
        rows.append(StateRow(i, source, task_id, sample, point.t, point.budget, point.depth, point.state_key, bq, rq, binv, rinv))
    return rows


@dataclass(frozen=True)
class QualityComparison:
    """Headline numbers of a base-vs-RL quality comparison over a set of states.

    Attributes:
        n_states: states with a quality for both policies.
        n_tasks: distinct tasks among them (the bootstrap resamples tasks).
        share_rl_better: share of states where RL's quality is strictly higher.
        share_base_better: share where base's is strictly higher.
        share_tie: share of equal qualities (within 1e-12).
        base_mean: mean base quality.
        rl_mean: mean RL quality.
        difference: mean of RL − base (paired).
    """

    n_states: int
    n_tasks: int
    share_rl_better: Estimate
    share_base_better: Estimate
    share_tie: float
    base_mean: Estimate
    rl_mean: Estimate
    difference: Estimate


def compare_qualities(
    base: Sequence[float], rl: Sequence[float], tasks: Sequence[str], *, resamples: int = 2000, seed: int = 0
) -> QualityComparison:
    """Share-better, means and the paired difference, with bootstrap intervals clustered by task.
    States where either quality is NaN are left out."""
    b, r = np.asarray(base, dtype=float), np.asarray(rl, dtype=float)
    keep = ~(np.isnan(b) | np.isnan(r))
    b, r = b[keep], r[keep]
    clusters = [task for task, k in zip(tasks, keep, strict=True) if k]
    if b.size == 0:
        raise ValueError("no state has a quality for both policies")
    rl_better = (r > b + 1e-12).astype(float)
    base_better = (b > r + 1e-12).astype(float)

    def est(values: np.ndarray) -> Estimate:
        return bootstrap_mean(values, resamples=resamples, seed=seed, clusters=clusters)

    return QualityComparison(
        n_states=int(b.size),
        n_tasks=len(set(clusters)),
        share_rl_better=est(rl_better),
        share_base_better=est(base_better),
        share_tie=float(1.0 - rl_better.mean() - base_better.mean()),
        base_mean=est(b),
        rl_mean=est(r),
        difference=est(r - b),
    )


@dataclass
class StepsResult:
    """What :func:`matched_states` found.

    Attributes:
        rows: one row per state.
        comparison: the headline numbers.
        notes: remarks for the summary (pool smaller than asked, ...).
        actions: G.
    """

    rows: list[StateRow]
    comparison: QualityComparison
    notes: list[str] = field(default_factory=list)
    actions: int = 16


def matched_states(
    base_policy: Policy,
    rl_policy: Policy,
    make_env: Callable[[], Env],
    tasks: Mapping[str, Task],
    base_trajectories: Sequence[Trajectory],
    rl_trajectories: Sequence[Trajectory],
    config: StepsConfig | None = None,
    *,
    base_history: int | None = None,
    rl_history: int | None = None,
    counters: str = "system", profile: str = "rt",
    judge: ProcessReward | None = None,
) -> StepsResult:
    """Compare the two policies' next actions at a pool of states drawn equally from both
    policies' trajectories (docs/metrics.md#matched-states). A ``judge`` (an LLM judge) scores the actions
    where the environment cannot. Raises :class:`MissingCapability` when neither can score actions or the
    environment has no state keys and snapshots."""
    config = config or StepsConfig()
    probe = make_env()
    if has_step_quality(probe):
        judge = None  # the environment's own quality is exact
    elif judge is None:
        raise MissingCapability(
            f"environment {probe.name!r} cannot score actions (no action_quality, quality, or oracle with a finite action "
            "set) and no judge was given: matched states skipped"
        )
    require_snapshots(probe, "matched states (rebuilding the recorded states)")
    rng = np.random.default_rng([config.seed, 4101])
    groups = [("base", base_trajectories, base_history), ("rl", rl_trajectories, rl_history)]
    pools, notes = equal_pool(make_env, tasks, groups, config.states, rng, counters=counters, profile=profile)
    points = pools[0] + pools[1]
    sources = ["base"] * len(pools[0]) + ["rl"] * len(pools[1])
    if not points:
        raise ValueError("the trajectories hold no states to compare")
    kwargs = {"seed": config.seed, "score": True, "batch_size": config.batch_size, "judge": judge}
    base_samples = sample_actions(base_policy, make_env, points, config.actions, tag="steps:base", **kwargs)  # type: ignore[arg-type]
    rl_samples = sample_actions(rl_policy, make_env, points, config.actions, tag="steps:rl", **kwargs)  # type: ignore[arg-type]
    rows = quality_rows(points, sources, base_samples, rl_samples)
    notes += [n for n in (unusable_note("base", base_samples), unusable_note("rl", rl_samples),
                          judge_note(base_samples, rl_samples)) if n]
    dropped = sum(1 for r in rows if math.isnan(r.base_quality) or math.isnan(r.rl_quality))
    if dropped:
        notes.append(f"{dropped} state(s) left out: no reply of one policy got a quality (backend errors"
                     + (" or replies the judge did not score)" if judge is not None else ")"))
    comparison = compare_qualities(
        [r.base_quality for r in rows], [r.rl_quality for r in rows], [r.task_id for r in rows],
        resamples=config.bootstrap, seed=config.seed,
    )  # fmt: skip
    return StepsResult(rows, comparison, notes, config.actions)
