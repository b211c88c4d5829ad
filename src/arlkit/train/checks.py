"""Checks of a training config that need more than its fields: the environment, the algorithm library
and the file system (budget above T_max, G = 1 with a group estimator, a critic preset without a critic,
a model path that is no model directory). ``arlkit train --check`` / ``arlkit sft --check`` run them, and
so do :func:`~arlkit.train.train` and :func:`~arlkit.train.run_sft` before writing anything to their
output folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arlkit.algos import ADV_ESTIMATORS, AlgoConfig
from arlkit.config import ConfigError, check_model_dir
from arlkit.extras import install_hint
from arlkit.train.config import SFTConfig, TrainConfig

__all__ = ["ResolvedTrain", "check_model_spec", "check_sft_config", "check_train_config"]


@dataclass(frozen=True)
class ResolvedTrain:
    """What :func:`check_train_config` derived from a config.

    Attributes:
        algo: the preset with the ``algo`` overrides applied.
        t_max: the environment's full budget.
        budgets: the budgets a group may get (one value unless BudgetMix).
    """

    algo: AlgoConfig
    t_max: int
    budgets: tuple[int, ...]


def check_model_spec(spec: str, *, field: str = "model") -> None:
    """Check a model setting without loading anything: ``tiny:SIZE`` with a known size, or a local
    model directory (``PATH`` or ``hf:PATH``, see :func:`arlkit.config.check_model_dir`)."""
    if spec.startswith("tiny:"):
        from arlkit.policies.tiny import TINY_SIZES

        size = spec.split(":", 1)[1]
        if size not in TINY_SIZES:
            raise ConfigError(f"{field}: unknown tiny model size {size!r}; valid choices: {', '.join(TINY_SIZES)}")
        return
    check_model_dir(spec.removeprefix("hf:"), field=field)


def _check_attention(name: str) -> None:
    from transformers import AttentionInterface

    known = {"arlkit", "eager", *AttentionInterface().valid_keys()}
    if name not in known:
        raise ConfigError(f"model.attn_implementation: unknown kernel {name!r}; valid choices: {', '.join(sorted(known))}")


def _check_env(env: str, env_args: Mapping[str, Any]) -> Any:
    """The environment ``env`` built with ``env_args`` (names and values checked first)."""
    from arlkit.envs import env_config, list_envs, make

    if env not in list_envs():
        raise ConfigError(f"env.name: unknown environment {env!r}; valid choices: {', '.join(list_envs())}")
    env_config(env, env_args)
    return make(env, **env_args)


def check_sft_config(config: SFTConfig) -> tuple[int, ...]:
    """Check what an SFT run needs beyond its fields (the environment, the budgets, the model and the
    expert); returns the budgets. Raises :class:`ConfigError` naming the field."""
    from arlkit.envs import Oracle
    from arlkit.policies import make_policy

    env = _check_env(config.env.name, config.env.args)
    budgets = config.budget.turns(int(env.t_max))
    check_model_spec(config.model.path)
    _check_attention(config.model.attn_implementation)
    if config.expert.startswith("hf:"):
        check_model_spec(config.expert, field="expert")
    else:
        try:
            make_policy(config.expert)
        except ConfigError as exc:
            raise ConfigError(f"expert: {exc}") from None
    if config.relabel and not isinstance(env, Oracle):
        raise ConfigError(f"relabel: the environment {config.env.name!r} has no oracle; set relabel: false")
    return budgets


def check_train_config(config: TrainConfig) -> ResolvedTrain:
    """Resolve the preset and the budgets, and check the model path; raise :class:`ConfigError` naming
    the field for impossible combinations."""
    env = _check_env(config.env.name, config.env.args)
    check_model_spec(config.model.path)
    _check_attention(config.model.attn_implementation)
    algo = config.algo
    t_max = int(env.t_max)
    budgets = config.budget.turns(t_max)
    needs = ADV_ESTIMATORS.get(algo.adv_estimator).flags
    if not needs.needs_critic and config.group_size < 2:  # a critic-free estimator's baseline is the group
        raise ConfigError(
            f"group_size: preset {algo.preset!r} (adv_estimator={algo.adv_estimator!r}) compares the trajectories "
            f"of a group; it needs group_size >= 2, got {config.group_size}"
        )
    if needs.needs_anchor_states:
        from arlkit.envs import StateKey

        if not isinstance(env, StateKey):
            raise ConfigError(
                f"algo.preset: adv_estimator={algo.adv_estimator!r} groups steps by anchor state, and the environment "
                f"{config.env.name!r} has no state_key; use a preset without anchor states (grpo, rloo, ...)"
            )
    if not algo.step_rows and config.prompt.history is not None:
        raise ConfigError("prompt.history: trajectory rows (step_rows=false) hold the whole chat; set "
                          "prompt.history: null, or algo.step_rows: true")
    if algo.needs_critic and algo.step_rows:
        raise ConfigError("algo.step_rows: the PPO critic's token-level GAE runs over whole trajectories; use trajectory rows")
    if algo.needs_critic and config.optim.critic_lr <= 0:
        raise ConfigError("optim.critic_lr: the critic needs a learning rate > 0")
    if config.lora.enabled:
        try:
            import peft  # noqa: F401
        except ImportError:
            raise ConfigError(f"lora.enabled: LoRA needs the peft package: {install_hint('lora')}") from None
    return ResolvedTrain(algo, t_max, budgets)
