"""The exact Sokoban oracle (docs/algorithms.md#oracles): a backward breadth-first search from every
solved (player, boxes) state of a layout gives the exact distance ``d(s)`` to solved of every
solvable state; it is cached per layout. With gamma = 0.95 and ``h`` turns left,
``V_h(s) = gamma**(d(s) - 1)`` when ``1 <= d(s) <= h``, else 0, and ``Q_h(s, a) = 1`` when ``a``
solves, else ``gamma * V_{h-1}(s')`` (:meth:`~arlkit.envs.sokoban.env.SokobanEnv.action_values`).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Mapping

from arlkit.envs.sokoban.room import ACTIONS, Layout, Room, State

__all__ = ["GAMMA", "SolverLimitError", "distance_table", "solve"]

GAMMA = 0.95


class SolverLimitError(RuntimeError):
    """The exact search would visit more states than its cap allows."""


@functools.lru_cache(maxsize=64)
def distance_table(layout: Layout, max_states: int = 200_000) -> Mapping[State, int]:
    """Exact distance to solved of every solvable ``(player, boxes)`` state of ``layout``.

    Backward breadth-first search over reverse moves from every solved state (boxes on all targets,
    player on any other floor cell). A state missing from the table cannot be solved. Cached per
    layout. Raises :class:`SolverLimitError` past ``max_states`` states.
    """
    dist: dict[State, int] = {}
    queue: deque[State] = deque()
    for cell in layout.floor:
        if cell not in layout.targets:
            dist[(cell, layout.targets)] = 0
            queue.append((cell, layout.targets))
    while queue:
        state = queue.popleft()
        d = dist[state] + 1
        for prev in layout.unmoves(state):
            if prev not in dist:
                dist[prev] = d
                if len(dist) > max_states:
                    raise SolverLimitError(
                        f"the exact Sokoban search passed max_states={max_states} states; raise max_states "
                        "or use smaller rooms / fewer boxes"
                    )
                queue.append(prev)
    return dist


def solve(room: Room, max_states: int = 200_000) -> list[str] | None:
    """A shortest action sequence that solves ``room`` (ties broken in ``ACTIONS`` order), or
    ``None`` when it cannot be solved."""
    table = distance_table(room.layout, max_states)
    state = room.state
    if state not in table:
        return None
    plan: list[str] = []
    while table[state] > 0:
        for a in range(4):
            nxt, _ = room.layout.move(state, a)
            if table.get(nxt, -1) == table[state] - 1:
                plan.append(ACTIONS[a])
                state = nxt
                break
    return plan
