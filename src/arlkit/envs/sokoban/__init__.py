"""Sokoban with an exact BFS oracle. Importing this package registers the ``sokoban`` environment."""

from arlkit.envs.sokoban.env import (
    ACTIONS,
    GAMMA,
    Layout,
    Room,
    SokobanConfig,
    SokobanEnv,
    SolverLimitError,
    distance_table,
    generate_room,
    solve,
)

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
