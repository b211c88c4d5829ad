"""Metrics: unbiased pass@k, Pass@(K,T) and bootstrap intervals over tasks."""

from arlkit.metrics.bootstrap import Estimate, bootstrap_mean, paired_bootstrap_difference
from arlkit.metrics.passk import pass_at_k, pass_at_k_per_task, successes_within

__all__ = [
    "Estimate",
    "bootstrap_mean",
    "paired_bootstrap_difference",
    "pass_at_k",
    "pass_at_k_per_task",
    "successes_within",
]
