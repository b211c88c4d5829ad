"""Terminal tasks: one shell command per turn on a task folder in the sandbox (``--env terminal``)."""

from arlkit.envs.terminal.env import TerminalConfig, TerminalEnv
from arlkit.envs.terminal.session import ShellSession
from arlkit.envs.terminal.tasks import TaskSetReport, TerminalTask, load_task, load_task_set, load_tasks

__all__ = [
    "ShellSession", "TaskSetReport", "TerminalConfig", "TerminalEnv", "TerminalTask", "load_task", "load_task_set",
    "load_tasks",
]
