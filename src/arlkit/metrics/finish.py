"""How a policy's replies ended: cut at the token cap, or malformed (docs/metrics.md#cut-off-replies).

A reply the token cap (``max_new_tokens``) cut short usually holds no complete action, so it counts as
an invalid turn like a malformed reply does; the two call for different remedies (a larger cap or a
terser prompt, against a better policy). A turn's ``finish_reason`` (:attr:`TurnRecord.finish_reason`)
tells them apart: ``"length"`` is a cut-off. Backends that do not say (scripted policies) leave it
``None``, and their turns are not counted as reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from arlkit.rollout.records import Trajectory, TurnRecord

__all__ = ["CUT_OFF", "FinishCounts", "finish_by_policy", "finish_note", "is_cut_off"]

CUT_OFF = "length"
"""``finish_reason`` of a reply cut at the token cap (the OpenAI API's and vLLM's name)."""


def is_cut_off(turn: TurnRecord) -> bool:
    """The turn's reply was cut at the token cap."""
    return turn.finish_reason == CUT_OFF


@dataclass(frozen=True)
class FinishCounts:
    """How one policy's turns ended.

    Attributes:
        turns: turns counted.
        reported: turns whose backend said why the reply ended (``finish_reason`` set).
        cut_off: turns whose reply was cut at the token cap.
        invalid: turns without a valid action.
        invalid_cut_off: invalid turns whose reply was cut at the token cap.
        malformed: invalid turns, not cut off, whose reply held no action the environment could parse.
        refused: invalid turns, not cut off, whose parsed action the environment did not admit.
    """

    turns: int
    reported: int
    cut_off: int
    invalid: int
    invalid_cut_off: int
    malformed: int
    refused: int

    @property
    def cut_off_share(self) -> float | None:
        """Share of the reported turns that were cut off; ``None`` when no turn reported."""
        return self.cut_off / self.reported if self.reported else None


def finish_by_policy(trajectories: Iterable[Trajectory]) -> dict[str, FinishCounts]:
    """:class:`FinishCounts` of every policy in ``trajectories``."""
    sums: dict[str, list[int]] = {}
    for trajectory in trajectories:
        acc = sums.setdefault(trajectory.policy, [0] * 7)
        for turn in trajectory.turns:
            cut = is_cut_off(turn)
            acc[0] += 1
            acc[1] += turn.finish_reason is not None
            acc[2] += cut
            if not turn.valid:
                acc[3] += 1
                acc[4] += cut
                acc[5] += not cut and turn.action is None
                acc[6] += not cut and turn.action is not None
    return {policy: FinishCounts(*counts) for policy, counts in sums.items()}


def finish_note(trajectories: Iterable[Trajectory]) -> str | None:
    """The ``summary.md`` line on cut-off replies, per policy; ``None`` when no turn says how its reply
    ended (scripted policies only)."""
    counts = finish_by_policy(trajectories)
    if not any(c.reported for c in counts.values()):
        return None
    parts = []
    for policy, c in sorted(counts.items()):
        if not c.reported:
            parts.append(f"`{policy}`: not reported")
            continue
        parts.append(f"`{policy}`: {c.cut_off / c.reported:.1%} of {c.reported} turns cut off; invalid {c.invalid} = "
                     f"{c.invalid_cut_off} cut off + {c.malformed} malformed + {c.refused} refused")
    return ("- replies cut at the token cap (`finish_reason` `length`; max_new_tokens) vs malformed (no action "
            "parsed) and refused (an action the environment did not admit), per policy: " + "; ".join(parts))
