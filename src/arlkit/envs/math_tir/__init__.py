"""Tool-integrated math: Python in the sandbox, then a boxed answer (``--env math-tir``)."""

from arlkit.envs.math_tir.env import MathTirConfig, MathTirEnv, parse_tir_action
from arlkit.envs.math_tir.problems import FAMILIES, MathProblem

__all__ = ["FAMILIES", "MathProblem", "MathTirConfig", "MathTirEnv", "parse_tir_action"]
