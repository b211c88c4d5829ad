"""Recipes: the runs arlkit's commands make, each one file read top to bottom, built from the blocks
below them (``envs``, ``algos``, ``policies``, ``rollout``, ``metrics``, ``train``, ``analysis``,
``report``, ``integrations``; docs/architecture.md). The command line (``arlkit.cli``) reaches the layers
below only through them.

- :func:`run_eval` (:mod:`~arlkit.recipes.eval`): Pass@(K,T) of policies on a task set.
- :func:`run_sft` (:mod:`~arlkit.recipes.sft`): behaviour cloning from an expert.
- :func:`train` (:mod:`~arlkit.recipes.rl`): multi-turn RL with any preset, BudgetMix included.
- :func:`run_demo` (:mod:`~arlkit.recipes.demo`): the tiny model cloned, trained by RL at the full budget and
  with BudgetMix, and evaluated across budgets (docs/training.md, "The demo's recipe").
- :func:`analyze_steps`, :func:`analyze_errors`, ... (:mod:`~arlkit.recipes.analyze`): one step-level
  analysis of runs end to end, files included (``arlkit analyze``).
- :func:`analyze_stability` (:mod:`~arlkit.recipes.stability`): ARLArena's stability verdict and
  collapse detector for training runs (``arlkit analyze stability``).
- :func:`run_scripted_demo` (:mod:`~arlkit.recipes.demo_scripted`): scripted policies and the
  step-level diagnostics, no model.
- :func:`run_arena` (:mod:`~arlkit.recipes.arena`): every policy-optimisation variant on one testbed.
- :func:`~arlkit.recipes.export.export_run`: an eval run's trajectories as a dataset.
- :mod:`~arlkit.recipes.budgetmix`, :mod:`~arlkit.recipes.verl`, :mod:`~arlkit.recipes.model`,
  :mod:`~arlkit.recipes.report`: BudgetMix's candidates and audits, verl training data, the tiny model
  and a served local model, the HTML report.
- :mod:`~arlkit.recipes.catalog`: what every command shares (the errors a user can fix, the sampling
  options).

Names load on first use, so importing this package does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "EvalConfig": "eval", "EvalResult": "eval", "run_eval": "eval",
    "SFTResult": "sft", "run_sft": "sft",
    "TrainResult": "rl", "train": "rl",
    "DemoPlan": "demo_plan", "demo_plan": "demo_plan", "DemoResult": "demo", "run_demo": "demo",
    "run_scripted_demo": "demo_scripted",
    "analyze_depth": "analyze", "analyze_errors": "analyze", "analyze_flows": "analyze", "analyze_judge": "analyze",
    "analyze_likelihood": "analyze", "analyze_run": "analyze", "analyze_steps": "analyze",
    "analyze_stability": "stability",
}  # fmt: skip

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'arlkit.recipes' has no attribute {name!r}")
    return getattr(importlib.import_module(f"arlkit.recipes.{_WHERE[name]}"), name)
