"""Policy optimisation for multi-turn agents: pure tensor functions, registered by name (docs/algorithms.md).

ARLArena's four dimensions are four independent choices:

- **loss aggregation** — :func:`agg_loss` (``token-mean``, ``token-sum``, ``seq-mean-token-mean``,
  ``seq-mean-token-sum``, ``seq-mean-token-sum-norm``);
- **importance sampling / clipping** — :func:`policy_loss` with ``vanilla`` (dual-clip PPO/GRPO), ``gspo``,
  ``cispo``, ``sapo``, optional sequence masking; :func:`register_policy_loss` adds your own;
- **advantage design** — :func:`compute_advantage` with ``grpo`` (and Dr.GRPO), ``rloo``,
  ``reinforce_plus_plus_baseline``, ``gigpo`` (budget-aware anchors), ``gae``, ``empg``;
  :func:`register_adv_estimator` adds your own;
- **trajectory filtering** — :func:`filter_groups` (DAPO-style dynamic filtering).

Plus KL estimators (:func:`kl_penalty`), the critic loss (:func:`compute_value_loss`), reward helpers and
presets (:func:`get_preset`) bundling the choices of GRPO, Dr.GRPO, RLOO, GiGPO, PPO, GSPO, CISPO, SAPO,
EMPG, DAPO and SAMPO. Tensors follow verl's conventions: ``(B, L)`` over response tokens, a 0/1
``response_mask``, per-token log-probs, group ids per row.
"""

from arlkit.algos.advantages import (
    ADV_ESTIMATORS,
    AdvantageFn,
    AdvantageInputs,
    AdvantageOutput,
    EstimatorFlags,
    GRPOConfig,
    adv_estimator_config,
    compute_advantage,
    register_adv_estimator,
)
from arlkit.algos.aggregation import LOSS_AGG_MODES, agg_loss, masked_mean, masked_sum, masked_whiten, row_mean
from arlkit.algos.diagnostics import GROUPS, sequence_groups
from arlkit.algos.empg import EMPGConfig
from arlkit.algos.filtering import FilterConfig, FilterDecision, filter_groups, is_uniform_group
from arlkit.algos.gae import GAEConfig, ValueLossOutput, compute_gae_advantage_return, compute_value_loss
from arlkit.algos.gigpo import GiGPOConfig, budget_anchor, discounted_step_returns
from arlkit.algos.kl import KL_KINDS, ActorLoss, combine_actor_loss, entropy_from_logits, kl_penalty
from arlkit.algos.policy_losses import (
    POLICY_LOSSES,
    SEQ_MASK_DELTA,
    CISPOConfig,
    GSPOConfig,
    LossFlags,
    PolicyLossFn,
    PolicyLossOutput,
    SAPOConfig,
    VanillaConfig,
    policy_loss,
    policy_loss_config,
    register_policy_loss,
    sequence_mask_rows,
)
from arlkit.algos.presets import PRESETS, AlgoConfig, Preset, get_preset, list_presets, override
from arlkit.algos.registry import NoConfig, RegistryEntry
from arlkit.algos.rewards import RewardConfig, StepValidity, classify_step, episode_reward, step_rewards
from arlkit.registry import Registry

__all__ = [
    "ADV_ESTIMATORS",
    "GROUPS",
    "KL_KINDS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "PRESETS",
    "SEQ_MASK_DELTA",
    "ActorLoss",
    "AdvantageFn",
    "AdvantageInputs",
    "AdvantageOutput",
    "AlgoConfig",
    "CISPOConfig",
    "EMPGConfig",
    "EstimatorFlags",
    "FilterConfig",
    "FilterDecision",
    "GAEConfig",
    "GRPOConfig",
    "GSPOConfig",
    "GiGPOConfig",
    "LossFlags",
    "NoConfig",
    "PolicyLossFn",
    "PolicyLossOutput",
    "Preset",
    "Registry",
    "RegistryEntry",
    "RewardConfig",
    "SAPOConfig",
    "StepValidity",
    "ValueLossOutput",
    "VanillaConfig",
    "adv_estimator_config",
    "agg_loss",
    "budget_anchor",
    "classify_step",
    "combine_actor_loss",
    "compute_advantage",
    "compute_gae_advantage_return",
    "compute_value_loss",
    "discounted_step_returns",
    "entropy_from_logits",
    "episode_reward",
    "filter_groups",
    "get_preset",
    "is_uniform_group",
    "kl_penalty",
    "list_presets",
    "masked_mean",
    "masked_sum",
    "masked_whiten",
    "override",
    "policy_loss",
    "policy_loss_config",
    "register_adv_estimator",
    "register_policy_loss",
    "sequence_groups",
    "row_mean",
    "sequence_mask_rows",
    "step_rewards",
]
