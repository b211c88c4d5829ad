"""Asking a policy for next actions at restored states, and continuing from them to the end.

Both helpers batch across states: one ``policy.generate`` call serves many states at once, and the
randomness of every request depends only on ``(seed, tag, state index, sample index)``, never on
the batch it travels in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from arlkit.envs.capabilities import action_quality
from arlkit.analysis.states import StatePoint, extend_point, point_request, restore_point
from arlkit.envs import Env, StepResult
from arlkit.policies.protocol import Policy, Reply, Request
from arlkit.rollout.seeds import derive_seed

__all__ = ["ActionSample", "Continuation", "continue_from", "execute_reply", "generate_batched", "sample_actions"]


@dataclass(frozen=True)
class ActionSample:
    """One sampled next action.

    Attributes:
        reply: the policy's reply text.
        action: the parsed action (``None``: unparsable).
        quality: its quality (see :func:`~arlkit.envs.capabilities.action_quality`); NaN when
            the backend failed or quality was not asked for.
        error: the backend error, if any.
    """

    reply: str
    action: str | None
    quality: float
    error: str | None = None


def generate_batched(policy: Policy, requests: Sequence[Request], batch_size: int) -> list[Reply]:
    """``policy.generate`` over ``requests`` in chunks of ``batch_size``."""
    replies: list[Reply] = []
    for start in range(0, len(requests), batch_size):
        chunk = list(requests[start : start + batch_size])
        out = policy.generate(chunk)
        if len(out) != len(chunk):
            raise RuntimeError(f"policy {getattr(policy, 'name', policy)!r} returned {len(out)} replies for {len(chunk)} requests")
        replies.extend(out)
    return replies


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
) -> list[list[ActionSample]]:
    """``n_actions`` next actions of ``policy`` at every point, with their qualities when ``score``.

    The policy sees exactly the prompt of the trajectory that reached the point (history and
    remaining budget included); scripted policies also get the restored environment.
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
            quality = action_quality(env, action, point.remaining) if score else math.nan
            row.append(ActionSample(reply.text, action, quality))
        out.append(row)
    return out


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
    results: list[list[Continuation | None]] = [[None] * n_continuations for _ in points]
    running = [
        _Running(i, j, restore_point(make_env, p), p, []) for i, p in enumerate(points) for j in range(n_continuations)
    ]
    for item in running:
        if item.point.remaining < 1:
            results[item.index][item.j] = Continuation(False, 0, ())
    running = [r for r in running if r.point.remaining >= 1]
    while running:
        requests = [point_request(r.point, r.env, derive_seed(seed, tag, r.index, r.j)) for r in running]
        replies = generate_batched(policy, requests, batch_size)
        still = []
        for item, reply in zip(running, replies, strict=True):
            if reply.error is not None:
                results[item.index][item.j] = Continuation(False, len(item.actions), tuple(item.actions), reply.error)
                continue
            action, result = execute_reply(item.env, reply.text)
            item.actions.append(action)
            item.point = extend_point(item.point, item.env, reply.text, result.observation)
            if result.success or result.done or item.point.remaining < 1:
                results[item.index][item.j] = Continuation(bool(result.success), len(item.actions), tuple(item.actions))
            else:
                still.append(item)
        running = still
    return [[c for c in row if c is not None] for row in results]
