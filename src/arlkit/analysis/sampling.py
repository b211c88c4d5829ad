"""Asking a policy for next actions at restored states, and continuing from them to the end.

Both go through the rollout engine (:mod:`arlkit.rollout.engine`): a served model gets every request
as soon as it is ready, a batched policy gets batches across states, and continuations are
trajectories that resume at the state. The randomness of every request depends only on
``(seed, tag, state index, sample index)``, never on the batch it travels in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from arlkit.envs.capabilities import action_quality, require_snapshots
from arlkit.analysis.process import ProcessReward, step_context
from arlkit.analysis.states import StatePoint, point_request, restore_point
from arlkit.envs import Env, StepResult
from arlkit.metrics.finish import CUT_OFF
from arlkit.policies.protocol import Policy, Reply, Request
from arlkit.rollout.engine import EngineConfig, Start, answer, run_starts
from arlkit.rollout.prompts import PromptConfig
from arlkit.rollout.records import Trajectory, TurnRecord
from arlkit.rollout.seeds import derive_seed
from arlkit.rollout.turns import LiveTrajectory

__all__ = [
    "JUDGE_FAILED", "ActionSample", "Continuation", "continue_from", "execute_reply", "generate_batched", "judge_note",
    "sample_actions", "unusable_note",
]


@dataclass(frozen=True)
class ActionSample:
    """One sampled next action.

    Attributes:
        reply: the policy's reply text.
        action: the parsed action (``None``: unparsable).
        quality: its quality (see :func:`~arlkit.envs.capabilities.action_quality`); NaN when
            the backend failed or quality was not asked for.
        error: the backend error, if any.
        cut_off: the token cap cut the reply (``finish_reason`` ``"length"``): a reply without an
            action is then counted as cut off, not as malformed (:func:`unusable_note`).
    """

    reply: str
    action: str | None
    quality: float
    error: str | None = None
    cut_off: bool = False


def unusable_note(who: str, samples: Sequence[Sequence[ActionSample]]) -> str | None:
    """A note on ``who``'s replies without a usable action: how many the token cap cut off and how
    many were malformed; ``None`` when none was cut off (the count of unusable replies is in the rows)."""
    flat = [s for row in samples for s in row if s.error is None]
    unusable = [s for s in flat if s.action is None]
    cut = sum(s.cut_off for s in unusable)
    if not cut:
        return None
    return (f"{who}: {len(unusable)} of {len(flat)} replies without a usable action: {cut} cut off at the token cap "
            f"(max_new_tokens), {len(unusable) - cut} malformed")


JUDGE_FAILED = "the judge gave no score"
"""The error of an :class:`ActionSample` whose action the judge did not score (a reply that is no score 0-10)."""


def judge_note(*samples: Sequence[Sequence[ActionSample]]) -> str | None:
    """A note on the actions the judge did not score, or ``None`` when it scored every one."""
    flat = [s for group in samples for row in group for s in row if s.action is not None]
    failed = sum(s.error == JUDGE_FAILED for s in flat)
    if not failed:
        return None
    return f"the judge gave no score to {failed} of {len(flat)} actions; they are left out of the means"


def generate_batched(policy: Policy, requests: Sequence[Request], batch_size: int) -> list[Reply]:
    """One reply per request through the rollout engine's policy path: an async policy gets them
    all at once, a batched one in batches of at most ``batch_size``."""
    return answer(policy, requests, max_concurrency=batch_size)


def sample_actions(
    policy: Policy,
    make_env: Callable[[], Env],
    points: Sequence[StatePoint],
    n_actions: int,
    *,
    seed: int,
    tag: str,
    score: bool = True,
    batch_size: int = 256,
    judge: ProcessReward | None = None,
) -> list[list[ActionSample]]:
    """``n_actions`` next actions of ``policy`` at every point, with their qualities when ``score``.

    The policy sees exactly the prompt of the trajectory that reached the point (history and
    remaining budget included); scripted policies also get the restored environment. With a
    ``judge`` (a process reward such as :class:`~arlkit.analysis.process.LLMJudge`) the qualities
    are its scores of the parsed actions instead of the environment's; an action it cannot score
    is left out of the means like a backend error.
    """
    if n_actions < 1:
        raise ValueError(f"n_actions must be >= 1, got {n_actions}")
    envs = [restore_point(make_env, p) for p in points]
    keys = [str(env.state_key()) for env in envs]
    requests = [
        point_request(p, envs[i], derive_seed(seed, tag, i, g)) for i, p in enumerate(points) for g in range(n_actions)
    ]
    replies = generate_batched(policy, requests, batch_size)
    out: list[list[ActionSample]] = []
    for i, (env, point) in enumerate(zip(envs, points, strict=True)):
        if str(env.state_key()) != keys[i]:
            raise RuntimeError(f"policy {getattr(policy, 'name', policy)!r} changed the environment while answering")
        row = []
        for reply in replies[i * n_actions : (i + 1) * n_actions]:
            if reply.error is not None:
                row.append(ActionSample("", None, math.nan, reply.error))
                continue
            action = env.parse_action(reply.text).action
            quality = action_quality(env, action, point.remaining) if score and judge is None else math.nan
            row.append(ActionSample(reply.text, action, quality, cut_off=reply.finish_reason == CUT_OFF))
        out.append(row)
    if score and judge is not None:
        out = _judged(judge, envs, points, out)
    return out


def _judged(judge: ProcessReward, envs: Sequence[Env], points: Sequence[StatePoint],
            samples: list[list[ActionSample]]) -> list[list[ActionSample]]:
    """``samples`` with the judge's qualities: one judge call over every usable reply; a reply
    without an action scores 0 as :func:`~arlkit.envs.capabilities.action_quality` has it."""
    asked = [(i, g) for i, row in enumerate(samples) for g, s in enumerate(row) if s.error is None and s.action is not None]
    values = judge([step_context(points[i], envs[i], samples[i][g].action) for i, g in asked]) if asked else []
    judged = [[replace(s, quality=0.0) if s.error is None else s for s in row] for row in samples]
    for (i, g), value in zip(asked, values, strict=True):
        sample = judged[i][g]
        judged[i][g] = (replace(sample, quality=float(value)) if value is not None
                        else replace(sample, quality=math.nan, error=JUDGE_FAILED))
    return judged


def execute_reply(env: Env, text: str) -> tuple[str | None, StepResult]:
    """Parse and execute one reply as the rollout engine does; never raises on model text."""
    parsed = env.parse_action(text)
    if parsed.action is None:
        return None, StepResult(f"Invalid action: {parsed.error}. Nothing happened.\n{env.render()}", 0.0, False, False, False)
    try:
        return parsed.action, env.step(parsed.action)
    except Exception as exc:  # an environment bug must not sink the analysis
        message = f"Invalid action: the environment could not execute it ({type(exc).__name__}).\n{env.render()}"
        return parsed.action, StepResult(message, 0.0, False, False, False)


@dataclass(frozen=True)
class Continuation:
    """One continuation from a state to the end of its budget.

    Attributes:
        success: the task was solved before the budget ran out.
        turns: turns taken in the continuation.
        actions: the parsed actions (``None`` for unparsable replies).
        error: a backend error that ended it early, if any.
    """

    success: bool
    turns: int
    actions: tuple[str | None, ...]
    error: str | None = None


def _from_point(point: StatePoint, seed: int, sample: int) -> Callable[[Env], LiveTrajectory]:
    """A trajectory that resumes at ``point``: the environment restored to its snapshot, its turns so
    far the point's replies and observations, so the next request is the point's own."""

    def begin(env: Env) -> LiveTrajectory:
        require_snapshots(env)
        env.reset(point.task, 0)
        env.restore(point.snapshot)  # type: ignore[attr-defined]
        prompt = PromptConfig(point.budget_mode, point.history, point.counters, point.profile)  # type: ignore[arg-type]
        turns = [TurnRecord(reply, None, True, 0.0, observation)
                 for reply, observation in zip(point.replies, point.observations[1:], strict=True)]
        record = Trajectory(env=env.name, policy="continuation", task_id=point.task.task_id, sample=sample,
                            budget=point.budget, budget_mode=point.budget_mode, env_seed=0, policy_seed=seed,
                            initial_observation=point.observations[0], turns=turns)
        return LiveTrajectory(point.task, point.budget, seed, env, record, list(point.observations), prompt)

    return begin


@dataclass
class _Running:
    index: int
    j: int
    env: Env
    point: StatePoint
    actions: list[str | None]


def continue_from(
    policy: Policy,
    make_env: Callable[[], Env],
    points: Sequence[StatePoint],
    n_continuations: int,
    *,
    seed: int,
    tag: str,
    batch_size: int = 256,
) -> list[list[Continuation]]:
    """Run ``policy`` from every point until success, a terminal state or the end of the budget,
    ``n_continuations`` times each.

    Every continuation starts from a fresh environment restored to exactly the point's snapshot
    (RNG state included), so two policies continued from the same points face the same environment
    randomness wherever they take the same actions. Policy seeds depend on ``(seed, tag, point,
    continuation)`` only.
    """
    if n_continuations < 1:
        raise ValueError(f"n_continuations must be >= 1, got {n_continuations}")
    results: list[list[Continuation]] = [[] for _ in points]
    todo = [(i, j) for i, p in enumerate(points) for j in range(n_continuations) if p.remaining >= 1]
    starts = [Start(make_env, _from_point(points[i], derive_seed(seed, tag, i, j), j)) for i, j in todo]
    # all alive at once, as before the engine served the analyses: the same batches for a batched policy
    engine = EngineConfig(max_active=max(1, len(starts)), max_concurrency=batch_size)
    played = run_starts(starts, policy, engine=engine)
    ended = {(i, j): live for (i, j), live in zip(todo, played, strict=True)}
    for i, point in enumerate(points):
        for j in range(n_continuations):
            if point.remaining < 1:
                results[i].append(Continuation(False, 0, ()))
                continue
            record = ended[i, j].trajectory
            actions = tuple(turn.action for turn in record.turns[point.t :])
            results[i].append(Continuation(record.success, len(actions), actions, record.error))
    return results
