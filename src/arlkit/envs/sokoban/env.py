"""Sokoban with gym-sokoban-style room generation and an exact breadth-first-search oracle.

Rules (as in gym-sokoban): the player moves up, down, left or right; walking into a box pushes it
one cell when the cell behind it is free; a push into a wall or into another box leaves everything
where it is (the action is still valid). The episode ends, with reward 1, when every box is on a
target (AA App. C.3).

Rooms (gym-sokoban's generator): a random walk carves the floor inside the outer walls, targets and the player
are placed at random, and *reverse play* from the solved position (the player walks and pulls
boxes off the targets) yields the start: the reachable state farthest from solved. Every room is
therefore solvable by construction.

Oracle (docs/algorithms.md#oracles): a backward breadth-first search from every solved (player, boxes) state of a
layout gives the exact distance ``d(s)`` to solved of every solvable state; it is cached per layout.
With gamma = 0.95 and ``h`` turns left, ``V_h(s) = gamma**(d(s) - 1)`` when ``1 <= d(s) <= h``,
else 0, and ``Q_h(s, a) = 1`` when ``a`` solves, else ``gamma * V_{h-1}(s')``.
"""

from __future__ import annotations

import functools
import random
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any

from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.splits import collect_split, content_id
from arlkit.envs.parsing import parse_tagged_action, quote

__all__ = [
    "ACTIONS",
    "GAMMA",
    "Layout",
    "Room",
    "SokobanConfig",
    "SokobanEnv",
    "SolverLimitError",
    "distance_table",
    "generate_room",
    "solve",
]

ACTIONS = ("up", "down", "left", "right")
_DELTAS = ((-1, 0), (1, 0), (0, -1), (0, 1))
_OPPOSITE = (1, 0, 3, 2)
GAMMA = 0.95
_MAX_ROOM_ATTEMPTS = 1000
# Shapes stamped around the random walker while carving floor (row, column offsets).
_BRUSHES = (
    ((0, 0),),
    ((0, -1), (0, 0), (0, 1)),
    ((-1, 0), (0, 0), (1, 0)),
    ((0, 0), (0, 1), (1, 0), (1, 1)),
    ((0, 0), (1, 0), (0, 1)),
)

State = tuple[int, tuple[int, ...]]
"""``(player cell, sorted box cells)``; a cell is ``row * width + column``."""


class SolverLimitError(RuntimeError):
    """The exact search would visit more states than its cap allows."""


@dataclass(frozen=True)
class SokobanConfig:
    """Configuration of the Sokoban family.

    Attributes:
        dim_room: rooms are ``dim_room`` x ``dim_room`` cells, outer walls included (AA: 6).
        num_boxes: boxes (and targets) per room (AA: 1).
        t_max: the family's full turn budget T_max (AA's 15 max steps).
        num_gen_steps: steps of the random walk that carves the floor; ``None`` means
            ``int(1.7 * 2 * dim_room)`` as in gym-sokoban.
        p_change_direction: probability that the carving walker turns at each step.
        min_solution_length: rooms whose shortest solution is shorter are not used.
        max_solution_length: the start is the farthest state from solved whose shortest solution
            is at most this long (``None``: no limit).
        max_states: cap on the states one exact search may visit (generation and oracle).
        seed: seed of the task stream (which rooms exist); the split of a room depends only on
            its content.
    """

    dim_room: int = 6
    num_boxes: int = 1
    t_max: int = 15
    num_gen_steps: int | None = None
    p_change_direction: float = 0.35
    min_solution_length: int = 1
    max_solution_length: int | None = None
    max_states: int = 200_000
    seed: int = 0

    def __post_init__(self) -> None:
        if not 4 <= self.dim_room <= 16:
            raise ValueError(f"dim_room must be between 4 and 16, got {self.dim_room}")
        if not 1 <= self.num_boxes <= (self.dim_room - 2) ** 2 - 2:
            raise ValueError(
                f"num_boxes must be between 1 and {(self.dim_room - 2) ** 2 - 2} for dim_room "
                f"{self.dim_room}, got {self.num_boxes}"
            )
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")
        if self.num_gen_steps is not None and self.num_gen_steps < 1:
            raise ValueError(f"num_gen_steps must be >= 1 (or None), got {self.num_gen_steps}")
        if not 0.0 <= self.p_change_direction <= 1.0:
            raise ValueError(f"p_change_direction must be in [0, 1], got {self.p_change_direction}")
        if self.min_solution_length < 1:
            raise ValueError(f"min_solution_length must be >= 1, got {self.min_solution_length}")
        if self.max_solution_length is not None and self.max_solution_length < self.min_solution_length:
            raise ValueError(
                f"max_solution_length ({self.max_solution_length}) must be >= min_solution_length "
                f"({self.min_solution_length})"
            )
        if self.max_states < 1:
            raise ValueError(f"max_states must be >= 1, got {self.max_states}")


# -- rooms ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """The static part of a room: its size, walls and targets (cells are ``row * width + col``)."""

    height: int
    width: int
    walls: frozenset[int]
    targets: tuple[int, ...]

    @functools.cached_property
    def neighbours(self) -> tuple[tuple[int, ...], ...]:
        """``neighbours[cell][a]``: the cell one step in direction ``ACTIONS[a]``, or -1 when that
        is a wall or off the grid."""
        table = []
        for cell in range(self.height * self.width):
            r, c = divmod(cell, self.width)
            row = []
            for dr, dc in _DELTAS:
                nr, nc = r + dr, c + dc
                inside = 0 <= nr < self.height and 0 <= nc < self.width
                nxt = nr * self.width + nc
                row.append(nxt if inside and nxt not in self.walls else -1)
            table.append(tuple(row))
        return tuple(table)

    @functools.cached_property
    def floor(self) -> tuple[int, ...]:
        """Every non-wall cell, in order."""
        return tuple(c for c in range(self.height * self.width) if c not in self.walls)

    def move(self, state: State, action: int) -> tuple[State, str]:
        """The state after ``ACTIONS[action]`` and what happened: ``"moved"``, ``"pushed"``,
        ``"wall"`` (walked into a wall) or ``"stuck"`` (the box cannot move)."""
        player, boxes = state
        nxt = self.neighbours[player][action]
        if nxt < 0:
            return state, "wall"
        if nxt not in boxes:
            return (nxt, boxes), "moved"
        beyond = self.neighbours[nxt][action]
        if beyond < 0 or beyond in boxes:
            return state, "stuck"
        moved = tuple(sorted(beyond if b == nxt else b for b in boxes))
        return (nxt, moved), "pushed"

    def unmoves(self, state: State) -> Iterator[State]:
        """Every state from which one forward move leads to ``state`` (reverse play: the player
        steps back, optionally pulling the box it faces away from)."""
        player, boxes = state
        for a in range(4):
            back = self.neighbours[player][a]
            if back < 0 or back in boxes:
                continue
            yield back, boxes  # forward: a plain step from ``back`` onto ``player``
            ahead = self.neighbours[player][_OPPOSITE[a]]
            if ahead in boxes:  # forward: from ``back`` push the box on ``player`` to ``ahead``
                yield back, tuple(sorted(player if b == ahead else b for b in boxes))


@dataclass(frozen=True)
class Room:
    """A Sokoban position: a layout plus where the player and the boxes are."""

    layout: Layout
    player: int
    boxes: tuple[int, ...]

    @property
    def state(self) -> State:
        """``(player, boxes)``."""
        return self.player, self.boxes

    @property
    def solved(self) -> bool:
        """Every box is on a target."""
        return self.boxes == self.layout.targets

    @classmethod
    def from_rows(cls, rows: Sequence[str]) -> Room:
        """Parse a room drawn with ``# _ O X √ P S`` (one string per row). Raises ``ValueError``."""
        rows = [str(row) for row in rows]
        if not rows or not rows[0] or any(len(row) != len(rows[0]) for row in rows):
            raise ValueError("a Sokoban room must be a non-empty rectangle of rows")
        width = len(rows[0])
        flat = "".join(rows)
        unknown = set(flat) - set("#_OX√PS")
        if unknown:
            raise ValueError(f"unknown symbols {sorted(unknown)} in a Sokoban room; use # _ O X √ P S")
        players = [i for i, ch in enumerate(flat) if ch in "PS"]
        boxes = tuple(i for i, ch in enumerate(flat) if ch in "X√")
        targets = tuple(i for i, ch in enumerate(flat) if ch in "O√S")
        if len(players) != 1:
            raise ValueError(f"a Sokoban room needs exactly one player (P or S), found {len(players)}")
        if not boxes or len(boxes) != len(targets):
            raise ValueError(f"a Sokoban room needs as many boxes as targets, at least one; found "
                             f"{len(boxes)} boxes and {len(targets)} targets")
        walls = frozenset(i for i, ch in enumerate(flat) if ch == "#")
        return cls(Layout(len(rows), width, walls, targets), players[0], boxes)

    def rows(self) -> list[str]:
        """The room drawn one string per row."""
        layout, cells = self.layout, []
        targets, boxes = set(layout.targets), set(self.boxes)
        for i in range(layout.height * layout.width):
            if i in layout.walls:
                cells.append("#")
            elif i in boxes:
                cells.append("√" if i in targets else "X")
            elif i == self.player:
                cells.append("S" if i in targets else "P")
            else:
                cells.append("O" if i in targets else "_")
        w = layout.width
        return ["".join(cells[r * w : (r + 1) * w]) for r in range(layout.height)]

    def text(self) -> str:
        """The room drawn one row per line (also its canonical content for ids and splits)."""
        return "\n".join(self.rows())


# -- exact search -----------------------------------------------------------------------------


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


def _carve_floor(dim: int, steps: int, p_turn: float, rng: random.Random) -> set[int]:
    """Floor cells carved by a random walker stamping small shapes inside the outer walls. The
    walker moves to an adjacent cell (or stays, at the border) and every stamp contains it, so the
    floor is connected."""
    r, c = rng.randrange(1, dim - 1), rng.randrange(1, dim - 1)
    dr, dc = rng.choice(_DELTAS)
    floor: set[int] = set()
    for _ in range(steps):
        if rng.random() < p_turn:
            dr, dc = rng.choice(_DELTAS)
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


# -- the environment --------------------------------------------------------------------------


class SokobanEnv:
    """Text Sokoban: ``#`` wall, ``_`` floor, ``O`` target, ``X`` box, ``√`` box on target,
    ``P`` player, ``S`` player on a target."""

    name = "sokoban"

    def __init__(self, config: SokobanConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        self._task: Task | None = None
        self._room: Room | None = None
        self._done = False

    # -- tasks ---------------------------------------------------------------------------------
    def _room_stream(self) -> Iterator[Room]:
        c = self.config
        for i in count():
            rng = random.Random(f"arlkit-sokoban:{c.seed}:{c.dim_room}:{c.num_boxes}:{i}")
            yield generate_room(c, rng)

    def tasks(self, split: str, n: int) -> list[Task]:
        rooms = collect_split(self._room_stream(), Room.text, split, n, max_draws=20 * n + 1000)
        return [self.task_from_room(room.rows()) for room in rooms]

    @staticmethod
    def task_from_room(rows: Sequence[str]) -> Task:
        """A task for a room drawn with ``# _ O X √ P S``, one string per row (``ValueError`` when
        the drawing is not a valid room)."""
        room = Room.from_rows(rows)
        return Task(task_id="sk-" + content_id(room.text()), payload={"room": room.rows()})

    # -- episode -------------------------------------------------------------------------------
    @property
    def room(self) -> Room:
        """The current position."""
        if self._room is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._room

    def reset(self, task: Task, seed: int) -> str:
        """Start ``task``; Sokoban is deterministic, so ``seed`` is unused."""
        rows = task.payload.get("room")
        if not isinstance(rows, Sequence) or isinstance(rows, str):
            raise ValueError("a Sokoban task's payload needs 'room': a list of row strings")
        self._room = Room.from_rows(rows)
        self._task = task
        self._done = self._room.solved
        return self.render()

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_tagged_action(reply)

    def step(self, action: str) -> StepResult:
        room = self.room
        if self._done:
            return StepResult("The episode is over.\n" + self.render(), 0.0, True, False, False)
        index = _action_index(action)
        if index is None:
            shown = quote(action) if isinstance(action, str) else "of a non-text type"
            message = f"Invalid action {shown}: write exactly one of {', '.join(ACTIONS)}. You did not move."
            return StepResult(f"{message}\n{self.render()}", 0.0, False, False, False)
        (player, boxes), outcome = room.layout.move(room.state, index)
        self._room = Room(room.layout, player, boxes)
        success = self._room.solved
        self._done = success
        name = ACTIONS[index]
        if success:
            note = f"You pushed a box {name}. Every box is on a target: the puzzle is solved."
        else:
            note = {
                "moved": f"You moved {name}.",
                "pushed": f"You pushed a box {name}.",
                "wall": f"You cannot move {name}: a wall is in the way. You did not move.",
                "stuck": f"You cannot push the box {name}: a wall or another box is behind it. Nothing moved.",
            }[outcome]
        return StepResult(f"{note}\n{self.render()}", 1.0 if success else 0.0, success, success, True)

    def render(self) -> str:
        return self.room.text()

    def prompt_text(self) -> PromptText:
        """The instruction (rules, legend, goal) and the action format of the prompt."""
        instruction = (
            "You are playing Sokoban in a room drawn as a grid seen from above, one row per line "
            "(up is towards the first line). Symbols: # is a wall, _ is floor, O is a target, X is "
            "a box, √ is a box on a target, P is you, S is you standing on a target. Walk into a box "
            "to push it one cell, provided the cell behind it is free; a box cannot be pushed into "
            "a wall or another box, and boxes cannot be pulled, so a box pushed into a corner is "
            "stuck for good. Push every box onto a target to succeed."
        )
        action_format = "The action is one of up, down, left, right, for example <action>up</action>."
        return PromptText(instruction, action_format)

    def admissible_actions(self) -> Sequence[str]:
        return ACTIONS

    def state_key(self) -> str:
        return self.room.text()

    def snapshot(self) -> dict[str, Any]:
        return {"task": self._task, "room": self.room, "done": self._done}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self._task = snapshot["task"]
        self._room = snapshot["room"]
        self._done = bool(snapshot["done"])

    # -- oracle --------------------------------------------------------------------------------
    def _table(self) -> Mapping[State, int]:
        return distance_table(self.room.layout, self.config.max_states)

    def action_values(self, remaining: int) -> dict[str, float]:
        room, table = self.room, self._table()
        values = dict.fromkeys(ACTIONS, 0.0)
        if self._done or remaining <= 0:
            return values
        for a, name in enumerate(ACTIONS):
            nxt, _ = room.layout.move(room.state, a)
            d = table.get(nxt)  # the next state's distance to solved (None: unsolvable)
            if d is not None and d + 1 <= remaining:
                values[name] = GAMMA**d  # 1 when this move solves, else gamma * gamma**(d - 1)
        return values

    def optimal_actions(self, remaining: int) -> list[str]:
        values = self.action_values(remaining)
        best = max(values.values())
        return [a for a, v in values.items() if v >= best - 1e-12]

    def shortest_solution_length(self) -> int | None:
        return self._table().get(self.room.state)

    def success_probability(self, remaining: int) -> float:
        d = self.shortest_solution_length()
        return 1.0 if d is not None and d <= remaining else 0.0


def _action_index(action: object) -> int | None:
    if not isinstance(action, str):
        return None
    cleaned = action.strip().strip(".").lower()
    return ACTIONS.index(cleaned) if cleaned in ACTIONS else None


@register_env("sokoban", SokobanConfig)
def _make_sokoban(config: SokobanConfig) -> SokobanEnv:
    return SokobanEnv(config)
