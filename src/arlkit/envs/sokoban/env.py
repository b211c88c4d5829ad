"""The Sokoban environment: rooms drawn as text over the rules of :mod:`arlkit.envs.sokoban.room`, a
seeded stream of generated rooms (:mod:`arlkit.envs.sokoban.generate`), and the oracle capabilities
from the exact search (:mod:`arlkit.envs.sokoban.solver`). The episode ends, with reward 1, when
every box is on a target.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from itertools import count
from typing import Any

from arlkit.envs.parsing import parse_tagged_action, quote
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.splits import collect_split, content_id
from arlkit.envs.sokoban.config import SokobanConfig
from arlkit.envs.sokoban.generate import generate_room
from arlkit.envs.sokoban.room import ACTIONS, Layout, Room, State
from arlkit.envs.sokoban.solver import GAMMA, SolverLimitError, distance_table, solve

# The package's names, importable from this module as well.
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
