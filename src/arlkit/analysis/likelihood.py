"""Likelihood analysis (docs/metrics.md#likelihood; RT §4.1 and App. E.2).

Every turn of the base and the RL policy's trajectories is scored by teacher forcing
(:class:`~arlkit.policies.ScoringPolicy`) with exactly the prompt the generating policy saw:

- **ActionNLL** — mean per-token negative log-likelihood of the *action's* tokens under the
  **base** policy, with the history and the reply's own reasoning fixed. The scoring API scores
  whole replies, so the action's tokens are located by scoring three continuations of the same
  prompt — the full reply, the reply up to the action, and the reply up to the end of the action —
  and taking the positions where the full reply's log-probs agree with each prefix's (their common
  prefix). For a causal model with prefix-stable tokenisation this is exact; where a prefix's
  tokens disagree at the boundary, the span may gain a boundary token, and when no span is found
  the whole reply's mean is used (``action_exact`` is false in both cases; the summary counts them).
- **Cumulative LLR** — along a trajectory, the sum over turns of
  ``log pi_RL(reply) - log pi_base(reply)`` over complete replies (reasoning + action), plotted
  against the turn index for successful trajectories of each policy.
- **Length control** — base and RL trajectories of the same task whose scored reply token counts
  (under the base tokeniser) differ by at most 10% of the longer one are paired (greedily, closest
  lengths first, each trajectory used once); the mean of ``LLR(RL trajectory) - LLR(base
  trajectory)`` over pairs gets a 95% bootstrap interval over tasks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from arlkit.analysis.states import point_messages, replay_states
from arlkit.envs import Env, Task
from arlkit.metrics.bootstrap import Estimate, bootstrap_mean
from arlkit.policies.protocol import Message, ScoringPolicy
from arlkit.rollout.records import Trajectory

__all__ = [
    "LikelihoodConfig",
    "LikelihoodResult",
    "TrajectoryLLR",
    "TurnScore",
    "action_token_span",
    "length_matched_pairs",
    "likelihood_analysis",
    "score_turns",
]


@dataclass(frozen=True)
class LikelihoodConfig:
    """Options of the likelihood analysis.

    Attributes:
        max_trajectories: most trajectories scored per policy (drawn at random when there are
            more); ``None`` scores all.
        length_tolerance: pairs may differ in scored tokens by at most this share of the longer.
        successful_only: LLR curves and pairs use successful trajectories only (RT's protocol).
        seed: seed of the trajectory draw and the bootstrap.
        bootstrap: bootstrap resamples.
        batch_size: continuations per ``score`` call.
    """

    max_trajectories: int | None = 200
    length_tolerance: float = 0.10
    successful_only: bool = True
    seed: int = 0
    bootstrap: int = 2000
    batch_size: int = 16

    def __post_init__(self) -> None:
        if self.max_trajectories is not None and self.max_trajectories < 1:
            raise ValueError(f"max_trajectories must be >= 1, got {self.max_trajectories}")
        if not 0.0 <= self.length_tolerance < 1.0:
            raise ValueError(f"length_tolerance must be in [0, 1), got {self.length_tolerance}")


@dataclass(frozen=True)
class TurnScore:
    """One scored turn (one line of ``likelihood_turns.csv``).

    Attributes:
        side: ``base`` or ``rl``: which policy generated the reply.
        trajectory: index of the trajectory in :attr:`LikelihoodResult.trajectories`.
        turn: 1-based turn index.
        tokens: scored tokens of the reply under the base policy.
        logp_base: sum of the reply's token log-probs under the base policy.
        logp_rl: the same under the RL policy.
        action_nll: mean NLL of the action's tokens under the base policy (NaN: no action).
        action_tokens: tokens in the action span.
        action_exact: the action span was located exactly.
    """

    side: str
    trajectory: int
    turn: int
    tokens: int
    logp_base: float
    logp_rl: float
    action_nll: float
    action_tokens: int
    action_exact: bool


@dataclass(frozen=True)
class TrajectoryLLR:
    """Per-trajectory cumulative LLR.

    Attributes:
        side: ``base`` or ``rl``.
        task_id: the task.
        sample: the trajectory's sample index.
        success: whether it succeeded.
        tokens: scored reply tokens, all turns together (base tokenisation).
        cumulative: cumulative LLR after each turn (nats).
    """

    side: str
    task_id: str
    sample: int
    success: bool
    tokens: int
    cumulative: tuple[float, ...]

    @property
    def final(self) -> float:
        """The trajectory's total LLR (0 for an empty trajectory)."""
        return self.cumulative[-1] if self.cumulative else 0.0


def _common_prefix(a: Sequence[float], b: Sequence[float], tol: float = 1e-4) -> int:
    n = 0
    while n < len(a) and n < len(b) and abs(a[n] - b[n]) <= tol * max(1.0, abs(b[n])):
        n += 1
    return n


def action_token_span(full: Sequence[float], before: Sequence[float], through: Sequence[float]) -> tuple[int, int, bool]:
    """``(start, end, exact)``: the action's token positions in ``full`` (the whole reply's
    log-probs), given the log-probs of the reply cut before the action (``before``) and after it
    (``through``), all scored after the same prompt."""
    start = _common_prefix(before, full)
    end = _common_prefix(through, full)
    exact = start == len(before) and end == len(through)
    return start, end, exact and end > start


def _batched_score(policy: ScoringPolicy, items: Sequence[tuple[Sequence[Message], str]], batch: int) -> list[list[float]]:
    out: list[list[float]] = []
    for i in range(0, len(items), batch):
        chunk = items[i : i + batch]
        scored = policy.score([m for m, _ in chunk], [c for _, c in chunk])
        if len(scored) != len(chunk):
            raise RuntimeError(f"score returned {len(scored)} results for {len(chunk)} continuations")
        out.extend([list(map(float, s)) for s in scored])
    return out


def score_turns(
    base: ScoringPolicy,
    rl: ScoringPolicy,
    make_env: Callable[[], Env],
    tasks: Mapping[str, Task],
    sides: Sequence[tuple[str, Sequence[Trajectory], int | None]],
    *,
    batch_size: int = 16,
    counters: str = "system", profile: str = "rt",
) -> tuple[list[TrajectoryLLR], list[TurnScore]]:
    """Score every turn of the given trajectories under both policies (see the module docstring).

    Args:
        sides: ``(side name, trajectories, history window)`` per generating policy.
    """
    env = make_env()
    items: list[tuple[Sequence[Message], str]] = []
    spans: list[tuple[int, str, str] | None] = []  # per turn: (index of its 'before' item, ...)
    meta: list[tuple[int, int]] = []  # (trajectory index, turn)
    trajs: list[tuple[str, Trajectory]] = []
    for side, trajectories, history in sides:
        for traj in trajectories:
            index = len(trajs)
            trajs.append((side, traj))
            points = replay_states(env, tasks[traj.task_id], traj, history=history, counters=counters, profile=profile)
            for point, turn in zip(points, traj.turns, strict=True):
                env.restore(point.snapshot)
                messages = point_messages(point, env)
                items.append((messages, turn.reply))
                meta.append((index, point.t + 1))
                action = env.parse_action(turn.reply).action
                at = turn.reply.rfind(action) if action else -1
                spans.append(None if at < 0 else (len(items) - 1, turn.reply[:at], turn.reply[: at + len(action or "")]))
    extra = [(items[s[0]][0], text) for s in spans if s is not None for text in (s[1], s[2])]
    # the full replies go through both models in identical batches (identical models: identical numbers)
    full_base = _batched_score(base, items, batch_size)
    rl_scores = _batched_score(rl, items, batch_size)
    cut_base = _batched_score(base, extra, batch_size)
    turns: list[TurnScore] = []
    k = 0
    for n, ((index, turn_no), span) in enumerate(zip(meta, spans, strict=True)):
        full = full_base[n]
        nll, count, exact = math.nan, 0, False
        if span is not None:
            start, end, exact = action_token_span(full, cut_base[k], cut_base[k + 1])
            k += 2
            piece = full[start:end] if end > start else full
            if piece:
                nll, count = -float(np.mean(piece)), len(piece)
        side = trajs[index][0]
        turns.append(TurnScore(side, index, turn_no, len(full), float(sum(full)), float(sum(rl_scores[n])), nll, count, exact))
    by_traj: dict[int, list[TurnScore]] = defaultdict(list)
    for ts in turns:
        by_traj[ts.trajectory].append(ts)
    summaries = []
    for index, (side, traj) in enumerate(trajs):
        mine = by_traj.get(index, [])
        cumulative = tuple(np.cumsum([t.logp_rl - t.logp_base for t in mine]).tolist())
        summaries.append(TrajectoryLLR(side, traj.task_id, traj.sample, traj.success, sum(t.tokens for t in mine), cumulative))
    return summaries, turns


def length_matched_pairs(trajectories: Sequence[TrajectoryLLR], tolerance: float = 0.10) -> list[tuple[int, int]]:
    """``(base index, rl index)`` pairs of the same task whose token counts differ by at most
    ``tolerance`` of the longer; greedy by smallest difference, each trajectory used once."""
    by_task: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for i, t in enumerate(trajectories):
        by_task[t.task_id][0 if t.side == "base" else 1].append(i)
    pairs = []
    for task_id in sorted(by_task):
        bases, rls = by_task[task_id]
        options = []
        for b in bases:
            for r in rls:
                nb, nr = trajectories[b].tokens, trajectories[r].tokens
                longer = max(nb, nr)
                if longer > 0 and abs(nb - nr) <= tolerance * longer:
                    options.append((abs(nb - nr), b, r))
        used_b: set[int] = set()
        used_r: set[int] = set()
        for _, b, r in sorted(options):
            if b not in used_b and r not in used_r:
                used_b.add(b)
                used_r.add(r)
                pairs.append((b, r))
    return pairs


@dataclass
class LikelihoodResult:
    """What :func:`likelihood_analysis` found.

    Attributes:
        trajectories: every scored trajectory with its cumulative LLR.
        turns: every scored turn.
        action_nll: mean ActionNLL under the base policy of each side's actions (bootstrap over tasks).
        final_llr: mean total LLR of each side's (successful) trajectories.
        pairs: length-matched ``(base index, rl index)`` pairs.
        paired: mean LLR(RL) − LLR(base) over the pairs (``None`` without pairs).
        notes: remarks.
    """

    trajectories: list[TrajectoryLLR]
    turns: list[TurnScore]
    action_nll: dict[str, Estimate | None]
    final_llr: dict[str, Estimate | None]
    pairs: list[tuple[int, int]]
    paired: Estimate | None
    notes: list[str] = field(default_factory=list)


def _subsample(trajs: Sequence[Trajectory], n: int | None, rng: np.random.Generator) -> list[Trajectory]:
    if n is None or len(trajs) <= n:
        return list(trajs)
    return [trajs[int(i)] for i in sorted(rng.choice(len(trajs), size=n, replace=False))]


def likelihood_analysis(
    base: ScoringPolicy,
    rl: ScoringPolicy,
    make_env: Callable[[], Env],
    tasks: Mapping[str, Task],
    base_trajectories: Sequence[Trajectory],
    rl_trajectories: Sequence[Trajectory],
    config: LikelihoodConfig | None = None,
    *,
    base_history: int | None = None,
    rl_history: int | None = None,
    counters: str = "system", profile: str = "rt",
) -> LikelihoodResult:
    """ActionNLL, cumulative LLR and the length-matched comparison (docs/metrics.md#likelihood)."""
    config = config or LikelihoodConfig()
    for name, policy in (("base", base), ("rl", rl)):
        if not isinstance(policy, ScoringPolicy):
            raise TypeError(f"the {name} policy cannot score continuations (it needs score(); use a backend such as hf:PATH)")
    rng = np.random.default_rng([config.seed, 4303])
    notes = []
    chosen = []
    for side, trajs in (("base", base_trajectories), ("rl", rl_trajectories)):
        picked = _subsample(trajs, config.max_trajectories, rng)
        if len(picked) < len(trajs):
            notes.append(f"scored {len(picked)} of {len(trajs)} {side} trajectories (max_trajectories)")
        chosen.append(picked)
    sides = [("base", chosen[0], base_history), ("rl", chosen[1], rl_history)]
    summaries, turns = score_turns(base, rl, make_env, tasks, sides, batch_size=config.batch_size, counters=counters,
                                   profile=profile)
    inexact = sum(1 for t in turns if not t.action_exact and not math.isnan(t.action_nll))
    if inexact:
        notes.append(f"{inexact} of {len(turns)} action spans were located approximately (tokenisation at the boundary)")
    kw = {"resamples": config.bootstrap, "seed": config.seed}
    action_nll: dict[str, Estimate | None] = {}
    final_llr: dict[str, Estimate | None] = {}
    for side in ("base", "rl"):
        rows = [t for t in turns if t.side == side and not math.isnan(t.action_nll)]
        action_nll[side] = (
            bootstrap_mean([t.action_nll for t in rows], clusters=[summaries[t.trajectory].task_id for t in rows], **kw)  # type: ignore[arg-type]
            if rows else None
        )  # fmt: skip
        mine = [s for s in summaries if s.side == side and (s.success or not config.successful_only)]
        final_llr[side] = bootstrap_mean([s.final for s in mine], clusters=[s.task_id for s in mine], **kw) if mine else None  # type: ignore[arg-type]
    eligible = [i for i, s in enumerate(summaries) if s.success or not config.successful_only]
    sub = [summaries[i] for i in eligible]
    pairs = [(eligible[b], eligible[r]) for b, r in length_matched_pairs(sub, config.length_tolerance)]
    paired = None
    if pairs:
        diffs = [summaries[r].final - summaries[b].final for b, r in pairs]
        paired = bootstrap_mean(diffs, clusters=[summaries[b].task_id for b, _ in pairs], **kw)  # type: ignore[arg-type]
    else:
        notes.append("no length-matched pair of base and RL trajectories of the same task; paired comparison skipped")
    return LikelihoodResult(summaries, turns, action_nll, final_llr, pairs, paired, notes)
