"""What a policy's turns cost: backend calls and tokens per environment turn.

A single agent makes one call per turn; a composite policy (``debate``) records its calls in the
turn's ``details``; a turn's ``usage`` holds its prompt and completion tokens (summed over a debate's
calls) when the backend counts them (docs/baselines.md). Tokens are prompt plus completion tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from arlkit.rollout.records import Trajectory, TurnRecord

__all__ = ["PolicyCost", "cost_by_policy", "turn_cost"]


@dataclass(frozen=True)
class PolicyCost:
    """Mean cost per environment turn of one policy.

    Attributes:
        turns: turns counted.
        calls_per_turn: backend calls per turn.
        tokens_per_turn: prompt + completion tokens per turn, over the turns whose counts are known;
            ``None`` when no turn's are.
        counted_turns: turns whose token counts are known.
    """

    turns: int
    calls_per_turn: float
    tokens_per_turn: float | None
    counted_turns: int


def turn_cost(turn: TurnRecord) -> tuple[int, int | None]:
    """``(calls, tokens)`` of one turn (tokens ``None`` when unknown)."""
    calls = int((turn.details or {}).get("calls", 1))
    return calls, (int(sum(turn.usage.values())) if turn.usage else None)


def cost_by_policy(trajectories: Iterable[Trajectory]) -> dict[str, PolicyCost]:
    """:class:`PolicyCost` of every policy in ``trajectories``."""
    sums: dict[str, list[float]] = {}
    for trajectory in trajectories:
        acc = sums.setdefault(trajectory.policy, [0, 0, 0, 0])
        for turn in trajectory.turns:
            calls, tokens = turn_cost(turn)
            acc[0] += 1
            acc[1] += calls
            if tokens is not None:
                acc[2] += tokens
                acc[3] += 1
    return {
        policy: PolicyCost(int(n), calls / n if n else 0.0, tokens / counted if counted else None, int(counted))
        for policy, (n, calls, tokens, counted) in sums.items()
    }
