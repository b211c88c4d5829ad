"""Programming problems graded by hidden tests in the sandbox: the environment (``env.py``), its
problems (``data.py``), grading (``grading.py``, ``harness.py``) and the rule-based mutations of
error injection (``mutations.py``). Importing this package registers the ``code`` environment."""

from arlkit.envs.code.env import CodeConfig, CodeEnv, extract_program

__all__ = ["CodeConfig", "CodeEnv", "extract_program"]
