"""Training blocks: configs, token rows and their forward pass, BudgetMix, checkpoints, metrics logs and
training dynamics. The loops that use them are recipes: :func:`arlkit.recipes.run_sft` (behaviour
cloning) and :func:`arlkit.recipes.train` (RL); ``audit_run(run_dir)`` checks a BudgetMix run.
"""

from arlkit.train.budgetmix import AuditReport, audit_run, budget_candidates, chi_square_uniform, sample_group_budgets
from arlkit.train.config import (
    DynamicsConfig,
    LoRAConfig,
    ModelConfig,
    OptimConfig,
    SFTConfig,
    TrainConfig,
    ValidationConfig,
)
from arlkit.config import load_config  # the loader of every command's config, re-exported for convenience
from arlkit.train.checks import check_sft_config, check_train_config
from arlkit.train.forward import Critic, TokenRow, score_rows
from arlkit.train.tracking import read_metrics, read_tb_scalars

__all__ = [
    "AuditReport",
    "Critic",
    "DynamicsConfig",
    "LoRAConfig",
    "ModelConfig",
    "OptimConfig",
    "SFTConfig",
    "TokenRow",
    "TrainConfig",
    "ValidationConfig",
    "audit_run",
    "budget_candidates",
    "check_sft_config",
    "check_train_config",
    "chi_square_uniform",
    "load_config",
    "read_metrics",
    "read_tb_scalars",
    "sample_group_budgets",
    "score_rows",
]
