"""Rollouts: budget-aware prompts, reply parsing, the asynchronous engine and trajectory records."""

from arlkit.rollout.engine import EngineConfig, EngineStats, Job, arun_rollouts, make_jobs, run_rollouts
from arlkit.envs.parsing import parse_tagged_action, quote, valid_utf8
from arlkit.rollout.prompts import (
    BUDGET_MODES,
    PROMPT_VERSION,
    prompt_version,
    PromptConfig,
    build_messages,
    system_prompt,
    turn_messages,
)
from arlkit.rollout.records import JsonlWriter, Prompt, Trajectory, TurnRecord, read_trajectories
from arlkit.rollout.seeds import derive_seed

__all__ = [
    "BUDGET_MODES",
    "PROMPT_VERSION",
    "prompt_version",
    "EngineConfig",
    "EngineStats",
    "Job",
    "JsonlWriter",
    "Prompt",
    "PromptConfig",
    "Trajectory",
    "TurnRecord",
    "arun_rollouts",
    "build_messages",
    "derive_seed",
    "make_jobs",
    "parse_tagged_action",
    "quote",
    "read_trajectories",
    "run_rollouts",
    "system_prompt",
    "turn_messages",
    "valid_utf8",
]
