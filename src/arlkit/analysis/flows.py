"""Action-transition flows and loop metrics (ARLArena App. F), from trajectory records alone.

**Flows.** Each turn's action gets a short *label* (FrozenLake: the move; SQL or code: the first
keyword; tool calls: the function name; an unusable reply: ``(invalid)``, or ``(cut off)`` when the
token cap cut it, ``finish_reason`` ``"length"``). Per step t the label
frequencies, and per consecutive steps the label transitions, are counted separately for successful
and failed trajectories; :mod:`arlkit.analysis.sankey` draws them as a Sankey diagram.

**Loops.** Per trajectory:

- *repeat*: the same action ``repeat_k`` (default 3) or more times in a row;
- *oscillation*: two different actions alternating, A B A B..., over at least ``oscillation_len``
  (default 4) consecutive turns;
- *revisit*: the agent acts again in a state it already acted in (recorded pre-action state keys);
  the turns from the first visit up to the return form the cycle.

A turn is *spent in a loop* when it belongs to a repeat run, an oscillation run, or a revisit cycle.
Note that in navigation tasks a repeated move can be progress (walking down a corridor); the
revisit measure is the one that needs no such caveat.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from arlkit.metrics.finish import is_cut_off
from arlkit.rollout.records import Trajectory, TurnRecord

__all__ = [
    "CUT_OFF_LABEL",
    "INVALID_LABEL",
    "FlowCounts",
    "LoopStats",
    "LoopSummary",
    "action_flows",
    "action_label",
    "loop_stats",
    "summarize_loops",
]

INVALID_LABEL = "(invalid)"
CUT_OFF_LABEL = "(cut off)"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def action_label(turn: TurnRecord, max_len: int = 24) -> str:
    """A short label of a turn's action: ``(cut off)`` for unusable replies the token cap cut,
    ``(invalid)`` for other unusable replies, else the action's first word or identifier
    (lower-cased), cut to ``max_len`` characters."""
    if turn.action is None or not turn.valid:
        return CUT_OFF_LABEL if is_cut_off(turn) else INVALID_LABEL
    text = turn.action.strip()
    match = _WORD.search(text)
    label = (match.group(0) if match else text.split()[0] if text.split() else "?").lower()
    return label[:max_len]


def _action_key(turn: TurnRecord) -> str:
    """The exact action (normalised) used by the repeat and oscillation detectors (every unusable
    reply, cut off or malformed, is one key)."""
    if turn.action is None or not turn.valid:
        return INVALID_LABEL
    return " ".join(turn.action.split()).casefold()


@dataclass
class FlowCounts:
    """Label counts per step and transitions between consecutive steps.

    Attributes:
        steps: the number of steps (columns) counted.
        nodes: ``{(step, label, outcome): count}``; step is 1-based; outcome ``success``/``failure``.
        links: ``{(step, label, next label, outcome): count}`` for transitions step -> step + 1.
        trajectories: ``{outcome: count}``.
    """

    steps: int
    nodes: Counter[tuple[int, str, str]] = field(default_factory=Counter)
    links: Counter[tuple[int, str, str, str]] = field(default_factory=Counter)
    trajectories: Counter[str] = field(default_factory=Counter)

    def labels(self) -> list[str]:
        """Every label, most frequent first (ties alphabetical)."""
        totals: Counter[str] = Counter()
        for (_, label, _), n in self.nodes.items():
            totals[label] += n
        return sorted(totals, key=lambda lab: (-totals[lab], lab))


def action_flows(
    trajectories: Sequence[Trajectory],
    *,
    max_steps: int = 12,
    labeler: Callable[[TurnRecord], str] = action_label,
) -> FlowCounts:
    """Count labels per step (the first ``max_steps`` steps) and transitions, by outcome."""
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    flows = FlowCounts(steps=0)
    for traj in trajectories:
        outcome = "success" if traj.success else "failure"
        flows.trajectories[outcome] += 1
        labels = [labeler(turn) for turn in traj.turns[:max_steps]]
        flows.steps = max(flows.steps, len(labels))
        for step, label in enumerate(labels, start=1):
            flows.nodes[(step, label, outcome)] += 1
        for step, (a, b) in enumerate(zip(labels, labels[1:], strict=False), start=1):
            flows.links[(step, a, b, outcome)] += 1
    return flows


@dataclass(frozen=True)
class LoopStats:
    """Loop metrics of one trajectory.

    Attributes:
        turns: turns taken.
        repeat: some action was taken ``repeat_k`` or more times in a row.
        oscillation: two actions alternated over ``oscillation_len`` or more turns.
        revisit: the agent acted again in a state it had already acted in.
        loop_turns: turns that belong to a repeat run, an oscillation run or a revisit cycle.
    """

    turns: int
    repeat: bool
    oscillation: bool
    revisit: bool
    loop_turns: int

    @property
    def any_loop(self) -> bool:
        """Any of the three loop kinds."""
        return self.repeat or self.oscillation or self.revisit


def _repeat_turns(keys: Sequence[str], k: int) -> set[int]:
    out: set[int] = set()
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            if i - start >= k:
                out.update(range(start, i))
            start = i
    return out


def _oscillation_turns(keys: Sequence[str], length: int) -> set[int]:
    """Turns of maximal runs A B A B ... (A != B) of at least ``length`` turns."""
    out: set[int] = set()
    i = 0
    while i < len(keys) - 1:
        if keys[i + 1] == keys[i]:
            i += 1
            continue
        j = i + 2
        while j < len(keys) and keys[j] == keys[j - 2]:
            j += 1
        if j - i >= length:
            out.update(range(i, j))
        i = j - 1
    return out


def _revisit_turns(states: Sequence[str]) -> set[int]:
    out: set[int] = set()
    last_seen: dict[str, int] = {}
    for i, key in enumerate(states):
        if not key:
            continue
        if key in last_seen:
            out.update(range(last_seen[key], i))
        last_seen[key] = i
    return out


def loop_stats(trajectory: Trajectory, *, repeat_k: int = 3, oscillation_len: int = 4) -> LoopStats:
    """The loop metrics of one trajectory (see the module docstring)."""
    if repeat_k < 2 or oscillation_len < 3:
        raise ValueError("repeat_k must be >= 2 and oscillation_len >= 3")
    keys = [_action_key(turn) for turn in trajectory.turns]
    repeat = _repeat_turns(keys, repeat_k)
    osc = _oscillation_turns(keys, oscillation_len)
    revisit = _revisit_turns([turn.state for turn in trajectory.turns])
    return LoopStats(len(keys), bool(repeat), bool(osc), bool(revisit), len(repeat | osc | revisit))


@dataclass(frozen=True)
class LoopSummary:
    """Loop metrics of a group of trajectories.

    Attributes:
        group: the group's name (policy, outcome).
        n: trajectories.
        repeat: share with a repeat run.
        oscillation: share with an oscillation.
        revisit: share with a revisited state.
        any_loop: share with any loop.
        loop_turns_mean: mean turns spent in loops per trajectory.
        loop_turn_share: turns in loops / all turns.
    """

    group: str
    n: int
    repeat: float
    oscillation: float
    revisit: float
    any_loop: float
    loop_turns_mean: float
    loop_turn_share: float


def summarize_loops(group: str, stats: Sequence[LoopStats]) -> LoopSummary:
    """Shares and means over ``stats`` (NaN for an empty group)."""
    if not stats:
        nan = float("nan")
        return LoopSummary(group, 0, nan, nan, nan, nan, nan, nan)
    turns = sum(s.turns for s in stats)
    return LoopSummary(
        group,
        len(stats),
        float(np.mean([s.repeat for s in stats])),
        float(np.mean([s.oscillation for s in stats])),
        float(np.mean([s.revisit for s in stats])),
        float(np.mean([s.any_loop for s in stats])),
        float(np.mean([s.loop_turns for s in stats])),
        sum(s.loop_turns for s in stats) / turns if turns else 0.0,
    )
