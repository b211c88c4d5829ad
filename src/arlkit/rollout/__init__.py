"""Rollouts: budget-aware prompts, reply parsing, the batched engine and trajectory records."""

from arlkit.rollout.engine import Job, make_jobs, run_rollouts
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
    "Job",
    "JsonlWriter",
    "Prompt",
    "PromptConfig",
    "Trajectory",
    "TurnRecord",
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
