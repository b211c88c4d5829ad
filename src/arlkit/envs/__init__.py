"""Environments: the protocol, the registry and the built-in environments."""

from arlkit.envs.protocol import ActionSpace, BudgetHeadroom, Env, Oracle, ParsedAction, StepResult, Task, has_oracle
from arlkit.envs.registry import RegisteredEnv, env_config, list_envs, make, register_env

__all__ = [
    "ActionSpace",
    "BudgetHeadroom",
    "Env",
    "Oracle",
    "ParsedAction",
    "RegisteredEnv",
    "StepResult",
    "Task",
    "env_config",
    "has_oracle",
    "list_envs",
    "make",
    "register_env",
]
