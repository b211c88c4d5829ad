"""Terminal tasks: one shell command per turn on a task folder in the sandbox (``--env terminal``)."""

from arlkit.envs.terminal.env import TerminalConfig, TerminalEnv
from arlkit.envs.terminal.tasks import TerminalTask, load_task, load_tasks

__all__ = ["TerminalConfig", "TerminalEnv", "TerminalTask", "load_task", "load_tasks"]
