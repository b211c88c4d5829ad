"""Sokoban with an exact breadth-first-search oracle: the rules (``room.py``), the room generator
(``generate.py``), the exact search (``solver.py``) and the environment (``env.py``). Importing this
package registers the ``sokoban`` environment."""

from arlkit.envs.sokoban.config import SokobanConfig
from arlkit.envs.sokoban.env import SokobanEnv
from arlkit.envs.sokoban.generate import generate_room
from arlkit.envs.sokoban.room import ACTIONS, Layout, Room
from arlkit.envs.sokoban.solver import GAMMA, SolverLimitError, distance_table, solve

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
