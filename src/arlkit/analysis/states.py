"""Intermediate states of recorded trajectories, rebuilt exactly by replay.

A trajectory record holds the actions, not the environment states. Because every trajectory's
environment randomness is seeded by its own ``env_seed``, replaying ``env.reset(task, env_seed)``
followed by ``env.step(action)`` for every *valid* turn (invalid turns never touch the environment)
reproduces each intermediate state exactly, RNG included; :func:`replay_states` checks the replayed
state keys against the recorded ones. A :class:`StatePoint` is such a state together with what the
agent had seen there (its observations and replies) and its remaining budget, which is all the
matched-state, error-state and judge analyses need to put a policy back in the same situation.
Rebuilding states needs the environment's :class:`~arlkit.envs.StateKey` and
:class:`~arlkit.envs.Snapshot` capabilities; without them these functions raise
:class:`~arlkit.envs.MissingCapability`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arlkit.envs import Env, Task
from arlkit.envs.capabilities import require_snapshots
from arlkit.policies.protocol import Message, Request
from arlkit.rollout.prompts import PromptConfig, turn_messages
from arlkit.rollout.records import Trajectory

__all__ = [
    "ReplayError",
    "StatePoint",
    "candidate_turns",
    "equal_pool",
    "extend_point",
    "point_messages",
    "point_request",
    "points_at",
    "replay",
    "replay_states",
    "restore_point",
    "sample_points",
]


class ReplayError(RuntimeError):
    """Replaying a trajectory did not reproduce its recorded states (different env config, or an
    environment whose randomness is not fully seeded by ``reset``)."""


@dataclass(frozen=True)
class StatePoint:
    """A state an agent was in, with its history and remaining budget.

    Attributes:
        task: the task.
        source: label of the policy whose trajectory reached this state.
        task_sample: ``(task_id, sample)`` of that trajectory.
        t: turns already completed (0 = before the first action).
        budget: the trajectory's budget T.
        budget_mode: ``announced`` or ``hidden`` (how the prompt is built).
        history: the prompt's history window (``None``: full chat).
        observations: the ``t + 1`` observations seen so far, the first one included.
        replies: the ``t`` replies given so far.
        snapshot: ``env.snapshot()`` in this state.
        state_key: ``str(env.state_key())`` in this state.
        policy_seed: the source trajectory's policy seed.
        counters: where the announced prompt puts the turn counters (``system`` or ``observation``).
        profile: the prompt profile (``rt`` or ``compact``).
    """

    task: Task
    source: str
    task_sample: tuple[str, int]
    t: int
    budget: int
    budget_mode: str
    history: int | None
    observations: tuple[str, ...]
    replies: tuple[str, ...]
    snapshot: Any
    state_key: str
    policy_seed: int = 0
    counters: str = "system"
    profile: str = "rt"

    @property
    def remaining(self) -> int:
        """Turns left, including the next one."""
        return self.budget - self.t

    @property
    def depth(self) -> float:
        """Normalised depth t / T."""
        return self.t / self.budget


def replay(env: Env, task: Task, trajectory: Trajectory, *, check: bool = True) -> Iterator[int]:
    """Put ``env`` in the pre-action state of every turn of ``trajectory`` in turn: yields ``t = 0..``
    with ``env`` in the state before turn t (the caller reads it and must not step it).

    Raises :class:`ReplayError` when ``check`` is on and a replayed state key differs from the
    recorded one, and :class:`~arlkit.envs.MissingCapability` when ``env`` has no state keys or
    snapshots.
    """
    require_snapshots(env)
    if task.task_id != trajectory.task_id:
        raise ValueError(f"task {task.task_id} does not match trajectory task {trajectory.task_id}")
    env.reset(task, trajectory.env_seed)
    for t, turn in enumerate(trajectory.turns):
        key = str(env.state_key())  # type: ignore[attr-defined]
        if check and turn.state and key != turn.state:
            raise ReplayError(
                f"replaying {trajectory.task_id} sample {trajectory.sample} gave state {key!r} before turn {t + 1}, "
                f"the record says {turn.state!r}"
            )
        yield t
        if turn.valid and turn.action is not None:
            env.step(turn.action)


def replay_states(
    env: Env, task: Task, trajectory: Trajectory, *, history: int | None = None, check: bool = True,
    counters: str = "system", profile: str = "rt",
) -> list[StatePoint]:
    """The pre-action state of every turn of ``trajectory`` (``len(turns)`` points, ``t = 0..``),
    replayed by :func:`replay` (which raises :class:`ReplayError` on a state that differs from the
    record when ``check`` is on)."""
    points = []
    for t in replay(env, task, trajectory, check=check):
        points.append(
            StatePoint(
                task=task,
                source=trajectory.policy,
                task_sample=(trajectory.task_id, trajectory.sample),
                t=t,
                budget=trajectory.budget,
                budget_mode=trajectory.budget_mode,
                history=history,
                observations=(trajectory.initial_observation, *(turn.observation for turn in trajectory.turns[:t])),
                replies=tuple(turn.reply for turn in trajectory.turns[:t]),
                snapshot=env.snapshot(),
                state_key=str(env.state_key()),
                policy_seed=trajectory.policy_seed,
                counters=counters, profile=profile,
            )
        )
    return points


def restore_point(make_env: Callable[[], Env], point: StatePoint) -> Env:
    """A fresh environment put back in ``point``'s state (reset on its task, then restored)."""
    env = make_env()
    require_snapshots(env)
    env.reset(point.task, 0)
    env.restore(point.snapshot)  # type: ignore[attr-defined]
    return env


def point_messages(point: StatePoint, env: Env) -> list[Message]:
    """The chat a policy sees in ``point`` (the same prompt the rollout engine builds); ``env`` is
    the restored environment (its instruction and action format go into the system prompt)."""
    text = env.prompt_text()
    return turn_messages(
        env.name,
        text.instruction,
        text.action_format,
        budget=point.budget,
        observations=point.observations,
        replies=point.replies,
        prompt=PromptConfig(point.budget_mode, point.history, point.counters, point.profile),  # type: ignore[arg-type]
    )


def point_request(point: StatePoint, env: Env, seed: int) -> Request:
    """The request for the next reply in ``point``."""
    remaining = point.remaining if point.budget_mode == "announced" else None
    return Request(messages=point_messages(point, env), seed=seed, turn=point.t, env=env, remaining=remaining)


def extend_point(point: StatePoint, env: Env, reply: str, observation: str) -> StatePoint:
    """The point one turn later, after ``reply`` produced ``observation`` (``env`` is already there)."""
    require_snapshots(env)
    return StatePoint(
        task=point.task,
        source=point.source,
        task_sample=point.task_sample,
        t=point.t + 1,
        budget=point.budget,
        budget_mode=point.budget_mode,
        history=point.history,
        observations=(*point.observations, observation),
        replies=(*point.replies, reply),
        snapshot=env.snapshot(),  # type: ignore[attr-defined]
        state_key=str(env.state_key()),  # type: ignore[attr-defined]
        policy_seed=point.policy_seed,
        counters=point.counters, profile=point.profile,
    )


def sample_points(candidates: Sequence[tuple[int, int]], n: int, rng: Any) -> list[tuple[int, int]]:
    """``n`` distinct ``(trajectory index, t)`` pairs drawn uniformly without replacement (all of
    them when there are fewer)."""
    if n >= len(candidates):
        return list(candidates)
    picks = rng.choice(len(candidates), size=n, replace=False)
    return [candidates[int(i)] for i in sorted(picks)]


def candidate_turns(trajectories: Sequence[Trajectory], min_remaining: int = 1) -> list[tuple[int, int]]:
    """Every ``(trajectory index, t)`` whose pre-action state has at least ``min_remaining`` turns
    left (``t`` ranges over the turns actually taken)."""
    return [
        (i, t) for i, traj in enumerate(trajectories) for t in range(len(traj.turns)) if traj.budget - t >= min_remaining
    ]


def points_at(
    make_env: Callable[[], Env],
    tasks: Mapping[str, Task],
    trajectories: Sequence[Trajectory],
    picks: Sequence[tuple[int, int]],
    *,
    history: int | None = None,
    check: bool = True,
    counters: str = "system", profile: str = "rt",
) -> list[StatePoint]:
    """The state points ``picks`` (``(trajectory index, t)``), replaying each trajectory once."""
    replayed: dict[int, list[StatePoint]] = {}
    env = make_env()
    out = []
    for i, t in picks:
        if i not in replayed:
            traj = trajectories[i]
            replayed[i] = replay_states(env, tasks[traj.task_id], traj, history=history, check=check, counters=counters,
                                        profile=profile)
        out.append(replayed[i][t])
    return out


def equal_pool(
    make_env: Callable[[], Env],
    tasks: Mapping[str, Task],
    groups: Sequence[tuple[str, Sequence[Trajectory], int | None]],
    n_states: int,
    rng: Any,
    *,
    min_remaining: int = 1,
    counters: str = "system", profile: str = "rt",
) -> tuple[list[list[StatePoint]], list[str]]:
    """A state pool with equal numbers of states from each group's trajectories (docs/metrics.md#matched-states: this
    avoids favouring the states one policy tends to visit).

    Args:
        groups: ``(name, trajectories, history window)`` per group.
        n_states: the pool size asked for; each group gives ``n_states // len(groups)``, or fewer
            when some group has fewer candidate states (then every group gives that many, and a
            note says so).
        rng: a ``numpy.random.Generator``.
        min_remaining: only states with at least this many turns left.
        counters: where the runs' announced prompts put the turn counters.
        profile: the runs' prompt profile.

    Returns:
        The points of each group, and notes for the summary.
    """
    notes = []
    per = n_states // len(groups)
    candidates = [candidate_turns(trajs, min_remaining) for _, trajs, _ in groups]
    available = min(len(c) for c in candidates)
    if available < per:
        counts = ", ".join(f"{name}: {len(c)}" for (name, _, _), c in zip(groups, candidates, strict=True))
        notes.append(
            f"asked for {n_states} states but the trajectories offer only {available} from one policy ({counts}); "
            f"using {available} from each"
        )
        per = available
    if per * len(groups) != n_states and available >= n_states // len(groups):
        notes.append(f"pool of {per * len(groups)} states ({per} from each of {len(groups)} policies)")
    pools = []
    for (_, trajs, history), cands in zip(groups, candidates, strict=True):
        picks = sample_points(cands, per, rng)
        pools.append(points_at(make_env, tasks, trajs, picks, history=history, counters=counters, profile=profile))
    return pools, notes
