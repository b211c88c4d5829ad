"""What one ``arlkit demo`` runs: the task family, the sizes of every stage and the recipe behind them
(:func:`demo_plan`; docs/training.md, "The demo's recipe")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from arlkit.config import ConfigError, EnvSpec, config_to_plain
from arlkit.rollout.prompts import PromptConfig

__all__ = ["DEMO_ENV", "DemoPlan", "demo_analysis_sizes", "demo_plan"]

DEMO_ENV: dict[str, Any] = {"size": 5, "t_max": 32, "success_rate": 0.8, "task_set": "budget_fork",
                            "headroom_threshold": 0.2}
"""The demo's task family: the shipped budget-fork 5x5 set (first-move gain >= 0.2 at 25% of T_max:
docs/concepts.md, "Budget headroom, budget-sensitive and budget-fork maps")."""

@dataclass(frozen=True)
class DemoPlan:
    """Sizes of one demo run.

    Attributes:
        sft: overrides of :class:`~arlkit.train.SFTConfig` (``env`` and ``prompt`` come from the plan's).
        rl: overrides of :class:`~arlkit.train.TrainConfig` shared by all RL runs (likewise).
        eval_tasks: held-out maps evaluated.
        eval_samples: trajectories per map and budget (n; Pass@k for k <= n).
        budgets: evaluation budgets (percentages of T_max, announced).
        workers: parallel processes.
        env: the environment of every stage (the budget-fork FrozenLake set).
        prompt: the prompts of every stage: cloning, RL and evaluation (announced budgets).
        rl_seeds: the RL seeds (``TrainConfig.seed``): Full and BudgetMix each train once per seed from
            the same base, and the tables pool a method's runs (docs/training.md, "The demo's recipe").
    """

    sft: dict[str, Any]
    rl: dict[str, Any]
    eval_tasks: int
    eval_samples: int
    budgets: tuple[str, ...] = ("25%", "50%", "75%", "100%")
    workers: int = 2
    env: EnvSpec = field(default_factory=lambda: EnvSpec("frozenlake", dict(DEMO_ENV)))
    prompt: PromptConfig = field(default_factory=lambda: PromptConfig("announced", history=0, profile="compact"))
    rl_seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        if not self.rl_seeds or len(set(self.rl_seeds)) != len(self.rl_seeds):
            raise ConfigError(f"rl_seeds must be non-empty and without repeats, got {list(self.rl_seeds)}")

    def overrides(self, stage: str) -> dict[str, Any]:
        """The config overrides of ``stage`` (``sft`` or ``rl``) with the plan's environment and prompts."""
        return {"env": config_to_plain(self.env), "prompt": config_to_plain(self.prompt), **getattr(self, stage)}


def demo_plan(quick: bool, rl_seeds: Sequence[int] | None = None) -> DemoPlan:
    """The full demo or ``--quick`` (every stage at smoke-test sizes; its seeded tables are recorded);
    ``rl_seeds`` replaces the recipe's RL seeds (``arlkit demo --rl-seeds``: each seed adds a Full and a
    BudgetMix run and their evaluations). Wall times: ``benchmarks/results/`` and docs/training.md.

    The recipe, and why (docs/training.md, "The demo's recipe"):

    - **Compact prompts** (``profile: compact``, ``history: 0``): the current map after one budget line
      (``turns remaining: 05 of 08``), ~58 tokens per step row instead of ~290, in every stage.
    - **Budget-fork maps**: each map forks at the start between a short route beside holes and a safe
      detour; the full-budget oracle takes the detour, 25% of T_max leaves time only for the short route
      (first-move gain >= 0.2). Full RL never meets that first decision with a tight budget left; BudgetMix
      does. On corner-to-corner maps the budget-aware decisions are small and late, and BudgetMix gains
      nothing over Full there.
    - **Cloning a mostly budget-unaware expert**: states from a noisy oracle playing BudgetMix budgets (so
      the model sees every announced budget), labels from the oracle planning for T_max at every step
      (``label_horizon: t_max``) in 70% of the trajectories and from the budget-aware oracle in 30%
      (``aware_share: 0.3``). The base mostly plays the full-budget policy whatever the prompt announces,
      and takes the budget-aware first move often enough that BudgetMix's tight groups contain successes
      to learn from.
    - **Noisy labels, cloned well** (``label_noise: 0.1``, four demonstrations per map, 1250 steps at lr
      1e-3 with cosine decay): the base's mistakes are noise that RL can sharpen away. The passes over the
      training maps set the base's optimal-action rate; more passes leave less for RL to add at T_max.
      Cloning runs alone, on two torch threads, with unshared forwards (``model.share_prefix: false``): a
      compact row shares only ~20 of its ~53 tokens, and the small forwards that sharing splits a batch
      into cost more than they save.
    - **RL at lr 3e-4 with cosine decay** and a small KL (0.01) to the base: the decay keeps the reply
      format intact late in the BudgetMix run, where a constant lr can break it.
    - **GRPO with dynamic filtering, 45 steps** (ARLArena §5): episode-level groups, all-equal groups drawn
      again, one row per step. GiGPO's (state, remaining turns) anchors cover about half of BudgetMix's step
      rows and almost all of Full's, which favours Full; ``--quick`` runs GiGPO to cover it.
    - **One RL seed per method** (seed 0) by default: the tables and ``summary.md`` say that their CIs do
      not cover the RL seed, which moves the differences by several points (``rl_seeds`` pools several)."""
    filtered = {"dynamic_filtering": True, "step_rows": True, "kl_coef": 0.01}  # every RL run's algorithm
    common_rl: dict[str, Any] = {
        "sampling": {"temperature": 1.0, "max_new_tokens": 8}, "train_tasks": 600, "progress": False,
        "optim": {"lr": 3e-4, "schedule": "cosine"}, "checkpoint_every": 5,
    }
    common_sft: dict[str, Any] = {"expert": "noisy-oracle:0.3", "relabel": True, "label_horizon": "t_max",
                                  "label_noise": 0.1, "aware_share": 0.3,
                                  "budget": "budgetmix", "tasks": 600, "samples": 4, "batch_rows": 64,
                                  "model.share_prefix": False,
                                  "optim": {"lr": 1e-3, "warmup_steps": 20, "schedule": "cosine"}}
    if quick:
        plan = DemoPlan(
            # enough cloning to learn the reply format (an unformatted model runs every turn of every budget)
            sft={**common_sft, "tasks": 48, "samples": 2, "steps": 60, "batch_rows": 32},
            rl={**common_rl, "algo": {"adv_estimator": "gigpo", **filtered}, "steps": 2, "tasks_per_step": 4,
                "group_size": 4, "checkpoint_every": 1,
                "validation": {"every": 1, "tasks": 4, "dynamics": {"states": 16, "actions": 2, "pool_tasks": 4,
                                                                   "pool_samples": 2}}},
            eval_tasks=8, eval_samples=8,
            rl_seeds=(0, 1),  # two seeds, so that the quick run covers the pooled tables too
        )
        return plan if rl_seeds is None else replace(plan, rl_seeds=tuple(rl_seeds))
    eval_tasks = 100
    plan = DemoPlan(
        sft={**common_sft, "steps": 1250},
        # GRPO (episode-level groups) for 45 steps
        rl={**common_rl, "algo": {"adv_estimator": "grpo", **filtered}, "steps": 45, "tasks_per_step": 8,
            "group_size": 8,
            # R_multi on 64 maps x 2 samples: fewer leave a sampling error as large as the gains it tracks.
            # R_single's pool spans the 100 evaluation maps: finding 1 reads the base's step-0 value there.
            "validation": {"every": 10, "tasks": 64, "samples": 2,
                           "dynamics": {"states": 512, "actions": 4, "pool_tasks": eval_tasks, "pool_samples": 2}}},
        eval_tasks=eval_tasks, eval_samples=8,
    )
    return plan if rl_seeds is None else replace(plan, rl_seeds=tuple(rl_seeds))


def demo_analysis_sizes(quick: bool) -> dict[str, dict[str, Any]]:
    """``StepsConfig`` and ``ErrorsConfig`` arguments of the demo's step-level analyses (Base vs Full on
    their T_max evaluations): seconds in ``--quick``, well under a minute on a 2-core CPU in the full demo."""
    if quick:
        return {"steps": {"states": 16, "actions": 2, "bootstrap": 200},
                "errors": {"states": 8, "actions": 2, "continuations": 1, "correction_states": 4,
                           "correction_actions": 1, "bootstrap": 200}}
    return {"steps": {"states": 100, "actions": 4, "bootstrap": 1000},
            "errors": {"states": 48, "actions": 4, "continuations": 2, "correction_states": 20,
                       "correction_actions": 1, "bootstrap": 1000}}
