"""Sokoban rooms and their rules (as in gym-sokoban): the player moves up, down, left or right; walking
into a box pushes it one cell when the cell behind it is free; a push into a wall or into another
box leaves everything where it is (the action is still valid). A room is solved when every box is
on a target (AA App. C.3).

A :class:`Layout` is a room's static part (walls, targets) with its moves forward and backward
(reverse play); a :class:`Room` adds where the player and the boxes are, and its text drawing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["ACTIONS", "DELTAS", "Layout", "Room", "State"]

ACTIONS = ("up", "down", "left", "right")
DELTAS = ((-1, 0), (1, 0), (0, -1), (0, 1))
"""Row and column steps of ``ACTIONS``."""
_OPPOSITE = (1, 0, 3, 2)

State = tuple[int, tuple[int, ...]]
"""``(player cell, sorted box cells)``; a cell is ``row * width + column``."""


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
            for dr, dc in DELTAS:
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
