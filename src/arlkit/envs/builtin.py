"""Imports every built-in environment module so that their registrations run."""

from arlkit.envs import frozenlake  # noqa: F401
from arlkit.envs import sokoban  # noqa: F401
from arlkit.envs import bfcl, sql  # noqa: F401
from arlkit.envs import code  # noqa: F401
from arlkit.envs import from_gym, math_tir, terminal  # noqa: F401
from arlkit.envs import webshop  # noqa: F401
from arlkit.envs import alfworld  # noqa: F401
