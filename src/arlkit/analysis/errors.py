"""Error states and error recovery (docs/metrics.md#error-states; RT §3.3, App. B.5 and E.4).

**Error states.** At a random intermediate state of a recorded trajectory one harmful action is
injected (FrozenLake, Sokoban: a random action, kept only when it increased the shortest distance
to success and the episode goes on; code: the environment's own mutation injector). The state
after it, with the injected turn in the history and one turn fewer left, is an error state. Error
states are drawn in equal numbers from both policies' trajectories. At each one both policies
propose G actions (the share where RL's are better), and both are **continued** from the identical
restored state to the end of the budget (continuation success, paired bootstrap over tasks).

**Error correction after failed calls** (tool calling). A failed call is a step the environment's
:class:`~arlkit.envs.capabilities.FailureDetector` flags (default: an invalid step). From
prefixes that end in a failed call, drawn equally from both policies' trajectories, both policies
take their next action, which is executed on a restored copy; it is *corrected* when that action
does not fail. The rate observed in the records themselves (how often a policy's own next step
after a failure succeeded) is reported too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from arlkit.envs.capabilities import call_failed, can_inject_errors, has_snapshots, has_step_quality, inject_error
from arlkit.analysis.process import ProcessReward
from arlkit.analysis.sampling import continue_from, execute_reply, judge_note, sample_actions, unusable_note
from arlkit.analysis.states import StatePoint, candidate_turns, extend_point, points_at, replay_states, restore_point
from arlkit.analysis.steps import QualityComparison, StateRow, compare_qualities, quality_rows
from arlkit.envs import Env, Task
from arlkit.metrics.bootstrap import Estimate, bootstrap_mean, paired_bootstrap_difference
from arlkit.policies.protocol import Policy
from arlkit.rollout.records import Trajectory

__all__ = [
    "CorrectionSummary",
    "ErrorState",
    "ErrorsConfig",
    "ErrorsResult",
    "PairedRates",
    "build_error_states",
    "error_states_analysis",
    "failed_call_states",
    "observed_correction_rate",
]

Group = tuple[str, Sequence[Trajectory], "int | None"]


@dataclass(frozen=True)
class ErrorsConfig:
    """Options of the error-state analysis.

    Attributes:
        states: error states asked for (half from each policy's trajectories).
        actions: G, next actions per policy per error state (share where RL is better).
        continuations: continuations per policy per error state (to the end of the budget).
        correction_states: failed-call prefixes asked for (error-correction rate).
        correction_actions: next actions per policy per failed-call prefix.
        max_attempts: cap on injection attempts, as a multiple of ``states``.
        seed: seed of every random choice.
        bootstrap: bootstrap resamples.
        batch_size: requests per ``policy.generate`` call.
    """

    states: int = 100
    actions: int = 16
    continuations: int = 4
    correction_states: int = 100
    correction_actions: int = 4
    max_attempts: int = 20
    seed: int = 0
    bootstrap: int = 2000
    batch_size: int = 256

    def __post_init__(self) -> None:
        for name in ("states", "actions", "continuations", "correction_states", "correction_actions", "max_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.bootstrap < 100:
            raise ValueError(f"bootstrap must be >= 100, got {self.bootstrap}")


@dataclass(frozen=True)
class ErrorState:
    """An error state and how it was made.

    Attributes:
        point: the error state (the injected turn is the last one of its history).
        origin: the state the error was injected at.
        source: ``base`` or ``rl``: whose trajectory the origin comes from.
        action: the injected action.
        detail: what the injection did (``"distance 3 -> 5"``).
    """

    point: StatePoint
    origin: StatePoint
    source: str
    action: str
    detail: str


def build_error_states(
    make_env: Callable[[], Env],
    tasks: Mapping[str, Task],
    groups: Sequence[Group],
    n_states: int,
    rng: np.random.Generator,
    *,
    max_attempts: int | None = None,
    counters: str = "system", profile: str = "rt",
) -> tuple[list[ErrorState], list[str]]:
    """Error states in equal numbers from each group's trajectories (one injection attempt per
    drawn state; only states with at least two turns left qualify, so one remains after the
    error). Returns the states (group by group) and notes."""
    notes: list[str] = []
    per = n_states // len(groups)
    cap = max_attempts if max_attempts is not None else 20 * n_states
    made: list[list[ErrorState]] = []
    env = make_env()
    for name, trajs, history in groups:
        cands = candidate_turns(trajs, min_remaining=2)
        order = rng.permutation(len(cands)) if cands else np.array([], dtype=int)
        replayed: dict[int, list[StatePoint]] = {}
        found: list[ErrorState] = []
        attempts = 0
        for k in order:
            if len(found) >= per or attempts >= cap:
                break
            attempts += 1
            i, t = cands[int(k)]
            if i not in replayed:
                replayed[i] = replay_states(env, tasks[trajs[i].task_id], trajs[i], history=history, counters=counters,
                                            profile=profile)
            origin = replayed[i][t]
            live = restore_point(make_env, origin)
            injected = inject_error(live, rng, origin.remaining)
            if injected is None:
                continue
            point = extend_point(origin, live, injected.reply, injected.result.observation)
            found.append(ErrorState(point, origin, name, injected.action, injected.detail))
        made.append(found)
    take = min(len(f) for f in made)
    if take < per:
        counts = ", ".join(f"{name}: {len(f)}" for (name, _, _), f in zip(groups, made, strict=True))
        notes.append(f"asked for {n_states} error states; injection produced {counts}; using {take} from each")
    return [e for f in made for e in f[:take]], notes


def failed_call_states(
    make_env: Callable[[], Env],
    tasks: Mapping[str, Task],
    groups: Sequence[Group],
    n_states: int,
    rng: np.random.Generator,
    *,
    counters: str = "system", profile: str = "rt",
) -> tuple[list[tuple[str, StatePoint]], list[str]]:
    """States right after a failed call (the trajectory went on), equally from each group."""
    probe = make_env()
    per = n_states // len(groups)
    cands_by_group = []
    for _, trajs, _ in groups:
        cands = [
            (i, t)
            for i, traj in enumerate(trajs)
            for t in range(1, len(traj.turns))
            if call_failed(probe, traj.turns[t - 1].valid, traj.turns[t - 1].observation)
        ]
        cands_by_group.append(cands)
    take = min(per, *(len(c) for c in cands_by_group))
    notes = []
    if 0 < take < per:
        counts = ", ".join(f"{name}: {len(c)}" for (name, _, _), c in zip(groups, cands_by_group, strict=True))
        notes.append(f"asked for {n_states} failed-call prefixes; the trajectories hold {counts}; using {take} from each")
    out: list[tuple[str, StatePoint]] = []
    for (name, trajs, history), cands in zip(groups, cands_by_group, strict=True):
        if take == 0:
            continue
        picks = [cands[int(j)] for j in sorted(rng.choice(len(cands), size=take, replace=False))]
        points = points_at(make_env, tasks, trajs, picks, history=history, counters=counters, profile=profile)
        out += [(name, p) for p in points]
    return out, notes


def observed_correction_rate(trajectories: Sequence[Trajectory], env: Env | None = None) -> tuple[int, float]:
    """From records only: ``(n, rate)`` — of the steps that follow a failed call, the share that
    did not fail themselves (NaN when no failed call was followed by another step)."""
    followed = corrected = 0
    for traj in trajectories:
        for prev, nxt in zip(traj.turns, traj.turns[1:], strict=False):
            if call_failed(env, prev.valid, prev.observation):
                followed += 1
                corrected += not call_failed(env, nxt.valid, nxt.observation)
    return followed, (corrected / followed if followed else math.nan)


@dataclass(frozen=True)
class PairedRates:
    """Two policies' rates over the same states, and their paired difference.

    Attributes:
        n_states: states compared.
        base: the base policy's mean rate.
        rl: the RL policy's mean rate.
        difference: RL − base, paired bootstrap over tasks.
        samples: continuations (or actions) per policy per state.
    """

    n_states: int
    base: Estimate
    rl: Estimate
    difference: Estimate
    samples: int


def _paired(base: np.ndarray, rl: np.ndarray, tasks: Sequence[str], samples: int, resamples: int, seed: int) -> PairedRates:
    kw = {"resamples": resamples, "seed": seed, "clusters": list(tasks)}
    return PairedRates(
        len(base),
        bootstrap_mean(base, **kw),  # type: ignore[arg-type]
        bootstrap_mean(rl, **kw),  # type: ignore[arg-type]
        paired_bootstrap_difference(rl, base, **kw),  # type: ignore[arg-type]
        samples,
    )


@dataclass(frozen=True)
class CorrectionSummary:
    """Error correction after failed calls.

    Attributes:
        controlled: both policies from the same failed-call prefixes (``None`` when there were none).
        observed: ``{"base": (n, rate), "rl": (n, rate)}`` from the records: steps that follow a
            failed call, and the share of them that did not fail.
    """

    controlled: PairedRates | None
    observed: dict[str, tuple[int, float]]


@dataclass
class ErrorsResult:
    """What :func:`error_states_analysis` found.

    Attributes:
        states: the error states.
        rows: both policies' action quality at each error state (empty without step quality).
        comparison: share where RL's actions are better, means (``None`` without step quality).
        base_success: per error state, the base policy's continuation success rate.
        rl_success: per error state, the RL policy's continuation success rate.
        continuation: the paired continuation comparison (``None`` without error states).
        correction: error correction after failed calls.
        notes: remarks (skipped parts, smaller pools).
    """

    states: list[ErrorState]
    rows: list[StateRow]
    comparison: QualityComparison | None
    base_success: list[float]
    rl_success: list[float]
    continuation: PairedRates | None
    correction: CorrectionSummary
    notes: list[str] = field(default_factory=list)


def _correction(
    base_policy: Policy, rl_policy: Policy, make_env: Callable[[], Env], tasks: Mapping[str, Task],
    groups: Sequence[Group], config: ErrorsConfig, rng: np.random.Generator, notes: list[str], counters: str = "system",
    profile: str = "rt",
) -> PairedRates | None:  # fmt: skip
    prefixes, more = failed_call_states(make_env, tasks, groups, config.correction_states, rng, counters=counters,
                                        profile=profile)
    notes += more
    if not prefixes:
        notes.append("error correction: no failed call is followed by another step in the trajectories; skipped")
        return None
    points = [p for _, p in prefixes]
    rates = []
    for side, policy in (("base", base_policy), ("rl", rl_policy)):
        samples = sample_actions(policy, make_env, points, config.correction_actions, seed=config.seed,
                                 tag=f"correction:{side}", score=False, batch_size=config.batch_size)  # fmt: skip
        per_state = []
        for point, row in zip(points, samples, strict=True):
            ok = []
            for s in row:
                if s.error is not None:
                    continue
                env = restore_point(make_env, point)
                _, result = execute_reply(env, s.reply)
                ok.append(0.0 if call_failed(env, result.valid, result.observation) else 1.0)
            per_state.append(float(np.mean(ok)) if ok else 0.0)
        rates.append(np.array(per_state))
    task_ids = [p.task.task_id for p in points]
    return _paired(rates[0], rates[1], task_ids, config.correction_actions, config.bootstrap, config.seed)


def error_states_analysis(
    base_policy: Policy,
    rl_policy: Policy,
    make_env: Callable[[], Env],
    tasks: Mapping[str, Task],
    base_trajectories: Sequence[Trajectory],
    rl_trajectories: Sequence[Trajectory],
    config: ErrorsConfig | None = None,
    *,
    base_history: int | None = None,
    rl_history: int | None = None,
    counters: str = "system", profile: str = "rt",
    judge: ProcessReward | None = None,
) -> ErrorsResult:
    """Error states, action quality there, continuation success, and error correction (docs/metrics.md#error-states).
    A ``judge`` scores the actions at error states where the environment cannot. Parts the environment
    cannot support are skipped with a note."""
    config = config or ErrorsConfig()
    notes: list[str] = []
    rng = np.random.default_rng([config.seed, 4202])
    groups: list[Group] = [("base", base_trajectories, base_history), ("rl", rl_trajectories, rl_history)]
    probe = make_env()
    states: list[ErrorState] = []
    rows: list[StateRow] = []
    comparison = continuation = None
    base_success: list[float] = []
    rl_success: list[float] = []
    rebuild = has_snapshots(probe)
    if not rebuild:
        notes.append(
            f"error states and error correction: environment {probe.name!r} has no state_key with snapshot/restore "
            "(recorded states cannot be rebuilt); skipped"
        )
    elif not can_inject_errors(probe):
        notes.append(
            f"error states: environment {probe.name!r} has no error injector (inject_error, error_mutation, or an oracle "
            "with a finite action set); skipped"
        )
    else:
        states, more = build_error_states(make_env, tasks, groups, config.states, rng,
                                          max_attempts=config.max_attempts * config.states, counters=counters,
                                          profile=profile)  # fmt: skip
        notes += more
    if states:
        points = [s.point for s in states]
        task_ids = [p.task.task_id for p in points]
        if has_step_quality(probe) or judge is not None:
            kw = {"seed": config.seed, "score": True, "batch_size": config.batch_size,
                  "judge": None if has_step_quality(probe) else judge}
            b = sample_actions(base_policy, make_env, points, config.actions, tag="errors:base", **kw)  # type: ignore[arg-type]
            r = sample_actions(rl_policy, make_env, points, config.actions, tag="errors:rl", **kw)  # type: ignore[arg-type]
            rows = quality_rows(points, [s.source for s in states], b, r)
            notes += [n for n in (unusable_note("base", b), unusable_note("rl", r), judge_note(b, r)) if n]
            comparison = compare_qualities([x.base_quality for x in rows], [x.rl_quality for x in rows], task_ids,
                                           resamples=config.bootstrap, seed=config.seed)  # fmt: skip
        else:
            notes.append("action quality at error states: no step-quality capability and no judge; skipped")
        for side, policy, out in (("base", base_policy, base_success), ("rl", rl_policy, rl_success)):
            runs = continue_from(policy, make_env, points, config.continuations, seed=config.seed, tag=f"continue:{side}",
                                 batch_size=config.batch_size)  # fmt: skip
            out += [float(np.mean([c.success for c in row])) for row in runs]
        continuation = _paired(np.array(base_success), np.array(rl_success), task_ids, config.continuations,
                               config.bootstrap, config.seed)  # fmt: skip
    controlled = (_correction(base_policy, rl_policy, make_env, tasks, groups, config, rng, notes, counters, profile)
                  if rebuild else None)
    observed = {"base": observed_correction_rate(base_trajectories, probe), "rl": observed_correction_rate(rl_trajectories, probe)}
    return ErrorsResult(states, rows, comparison, base_success, rl_success, continuation,
                        CorrectionSummary(controlled, observed), notes)  # fmt: skip
