"""Random Sokoban rooms (gym-sokoban's generator): a random walk carves the floor inside the outer
walls, targets and the player are placed at random, and *reverse play* from the solved position (the
player walks and pulls boxes off the targets) yields the start: the reachable state farthest from
solved. Every room is therefore solvable by construction.
"""

from __future__ import annotations

import random
from collections import deque

from arlkit.envs.sokoban.config import SokobanConfig
from arlkit.envs.sokoban.room import DELTAS, Layout, Room, State
from arlkit.envs.sokoban.solver import SolverLimitError, distance_table

__all__ = ["generate_room"]

_MAX_ROOM_ATTEMPTS = 1000
# Shapes stamped around the random walker while carving floor (row, column offsets).
_BRUSHES = (
    ((0, 0),),
    ((0, -1), (0, 0), (0, 1)),
    ((-1, 0), (0, 0), (1, 0)),
    ((0, 0), (0, 1), (1, 0), (1, 1)),
    ((0, 0), (1, 0), (0, 1)),
)


def _carve_floor(dim: int, steps: int, p_turn: float, rng: random.Random) -> set[int]:
    """Floor cells carved by a random walker stamping small shapes inside the outer walls. The
    walker moves to an adjacent cell (or stays, at the border) and every stamp contains it, so the
    floor is connected."""
    r, c = rng.randrange(1, dim - 1), rng.randrange(1, dim - 1)
    dr, dc = rng.choice(DELTAS)
    floor: set[int] = set()
    for _ in range(steps):
        if rng.random() < p_turn:
            dr, dc = rng.choice(DELTAS)
        r, c = min(max(r + dr, 1), dim - 2), min(max(c + dc, 1), dim - 2)
        for br, bc in rng.choice(_BRUSHES):
            if 1 <= r + br <= dim - 2 and 1 <= c + bc <= dim - 2:
                floor.add((r + br) * dim + c + bc)
    return floor


def _reverse_play(layout: Layout, start: State, max_states: int) -> list[State]:
    """Every state reverse play reaches from the solved ``start`` (at most ``max_states``)."""
    seen = {start}
    queue = deque([start])
    while queue and len(seen) < max_states:
        for prev in layout.unmoves(queue.popleft()):
            if prev not in seen:
                seen.add(prev)
                queue.append(prev)
    return sorted(seen)


def generate_room(config: SokobanConfig, rng: random.Random) -> Room:
    """A random solvable room (docs/algorithms.md#oracles): carve, place targets and player, reverse-play, and start
    from the reached state farthest from solved within the configured solution-length range."""
    dim, n_boxes = config.dim_room, config.num_boxes
    steps = config.num_gen_steps if config.num_gen_steps is not None else int(1.7 * 2 * dim)
    longest = config.max_solution_length
    for _ in range(_MAX_ROOM_ATTEMPTS):
        floor = sorted(_carve_floor(dim, steps, config.p_change_direction, rng))
        if len(floor) < n_boxes + 2:
            continue
        targets = tuple(sorted(rng.sample(floor, n_boxes)))
        player = rng.choice([cell for cell in floor if cell not in targets])
        walls = frozenset(range(dim * dim)) - set(floor)
        layout = Layout(dim, dim, walls, targets)
        try:
            table = distance_table(layout, config.max_states)
        except SolverLimitError:
            continue
        reached = _reverse_play(layout, (player, targets), config.max_states)
        eligible = [
            s for s in reached if table[s] >= config.min_solution_length and (longest is None or table[s] <= longest)
        ]
        if not eligible:
            continue
        farthest = max(table[s] for s in eligible)
        player, boxes = rng.choice([s for s in eligible if table[s] == farthest])
        return Room(layout, player, boxes)
    raise ValueError(
        f"no usable Sokoban room in {_MAX_ROOM_ATTEMPTS} attempts for {config}; allow longer or shorter "
        "solutions, more carving steps or fewer boxes"
    )
