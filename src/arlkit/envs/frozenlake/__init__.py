"""FrozenLake with announced turn budgets and an exact oracle (``env.py``), and the task sets where the
budget matters (``sets.py``). Importing this package registers the ``frozenlake`` environment."""

from arlkit.envs.frozenlake.env import ACTIONS, FrozenLakeConfig, FrozenLakeEnv, LakeModel, generate_random_map, lake_model

__all__ = ["ACTIONS", "FrozenLakeConfig", "FrozenLakeEnv", "LakeModel", "generate_random_map", "lake_model"]
