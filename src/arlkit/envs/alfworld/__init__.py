"""ALFWorld's text household tasks on ALFWorld's own TextWorld engine (docs/environments.md#alfworld).
Importing this package registers the ``alfworld`` environment; TextWorld and ALFWorld are imported
only when a game is played (the ``alfworld`` extra, :data:`~arlkit.envs.alfworld.backend.INSTALL_HINT`).
"""

from arlkit.envs.alfworld.env import AlfworldConfig, AlfworldEnv
from arlkit.envs.alfworld.games import TASK_TYPES, GeneratedGame, Tables

__all__ = ["TASK_TYPES", "AlfworldConfig", "AlfworldEnv", "GeneratedGame", "Tables"]
