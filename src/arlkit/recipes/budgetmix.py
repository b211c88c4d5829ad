"""``arlkit budgetmix``: BudgetMix's candidate budgets for a full budget, and the audit of a finished
training run or of a verl data file against BudgetMix's rules (:mod:`arlkit.train.budgetmix`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from arlkit.budgets import budget_candidates
from arlkit.config import ConfigError
from arlkit.extras import install_hint

if TYPE_CHECKING:
    from arlkit.train.budgetmix import AuditReport

__all__ = ["audit_budgetmix", "budget_candidates"]


def audit_budgetmix(path: str | Path, *, alpha: float = 0.01) -> AuditReport:
    """The audit of ``path``: a training run directory (its ``rollouts.jsonl``) or a ``.parquet`` file
    written by ``arlkit verl data``, which needs pyarrow (without it a :class:`~arlkit.config.ConfigError`
    names the extra to install). Uniform draws fail below the chi-square p-value ``alpha``."""
    if str(path).endswith(".parquet"):
        try:
            from arlkit.integrations.verl_data import audit_data
        except ImportError as exc:
            raise ConfigError(f"auditing a parquet file needs pyarrow ({exc}): {install_hint('verl')}") from None
        return audit_data(path, alpha=alpha)
    from arlkit.train.budgetmix import audit_run

    return audit_run(path, alpha=alpha)
