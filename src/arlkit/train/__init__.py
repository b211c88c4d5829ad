"""Training: behaviour cloning, multi-turn RL with any preset, BudgetMix, checkpoints, training dynamics.

``run_sft(SFTConfig(...), out)`` clones an expert; ``train(TrainConfig(...), out)`` runs RL (the loop is
:mod:`arlkit.train.rl`, one file read top to bottom); ``audit_run(run_dir)`` checks a BudgetMix run.
"""

from arlkit.train.budgetmix import AuditReport, audit_run, budget_candidates, chi_square_uniform, sample_group_budgets
from arlkit.train.config import (
    DynamicsConfig,
    LoRAConfig,
    OptimConfig,
    SFTConfig,
    TrainConfig,
    ValidationConfig,
    load_config,
)
from arlkit.train.checks import check_sft_config, check_train_config
from arlkit.train.forward import Critic, TokenRow, score_rows
from arlkit.train.rl import TrainResult, train
from arlkit.train.sft import SFTResult, run_sft
from arlkit.train.tracking import read_metrics, read_tb_scalars

__all__ = [
    "AuditReport",
    "Critic",
    "DynamicsConfig",
    "LoRAConfig",
    "OptimConfig",
    "SFTConfig",
    "SFTResult",
    "TokenRow",
    "TrainConfig",
    "TrainResult",
    "ValidationConfig",
    "audit_run",
    "budget_candidates",
    "check_sft_config",
    "check_train_config",
    "chi_square_uniform",
    "load_config",
    "read_metrics",
    "read_tb_scalars",
    "run_sft",
    "sample_group_budgets",
    "score_rows",
    "train",
]
