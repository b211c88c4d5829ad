"""Environments: the core protocol, the optional capabilities, the registry and the built-in environments."""

from arlkit.envs.capabilities import (
    ActionScorer,
    ActionSpace,
    BudgetHeadroom,
    ErrorInjector,
    FailureDetector,
    FunctionCalling,
    MissingCapability,
    MutationSource,
    Oracle,
    Snapshot,
    StateKey,
    StepQuality,
    SummaryNotes,
    has_oracle,
    has_snapshots,
)
from arlkit.envs.protocol import Env, ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import RegisteredEnv, env_config, list_envs, make, register_env

__all__ = [
    "ActionScorer",
    "ActionSpace",
    "BudgetHeadroom",
    "Env",
    "ErrorInjector",
    "FailureDetector",
    "FunctionCalling",
    "MissingCapability",
    "MutationSource",
    "Oracle",
    "ParsedAction",
    "PromptText",
    "RegisteredEnv",
    "Snapshot",
    "StateKey",
    "StepQuality",
    "StepResult",
    "SummaryNotes",
    "Task",
    "env_config",
    "has_oracle",
    "has_snapshots",
    "list_envs",
    "make",
    "register_env",
]
