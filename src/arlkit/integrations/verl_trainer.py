"""arlkit's step-level advantages (GiGPO, EMPG) inside verl's v1 trainer: ``trainer.v1.trainer_mode=arlkit``.

verl hands an advantage estimator token rewards, the mask and the group ids, nothing per step. GiGPO
needs each step's trajectory, number, reward and anchor state (``(state, T − t)`` under BudgetMix),
and EMPG the rollout policy's token entropies: the arlkit agent loop records the former with every
output (:mod:`arlkit.integrations.verl_steps`), verl's trainer computes the latter. This module
registers three v1 trainer modes (verl's ``register_trainer``): ``arlkit`` (verl's ``sync``),
``arlkit_colocate_async`` and ``arlkit_separate_async``, each verl's own trainer with one method
changed: when ``algorithm.adv_estimator`` is ``arlkit_gigpo`` or ``arlkit_empg``, the advantage step
reads those records (and the entropies) for the batch and computes arlkit's estimator on the step
rows (:func:`step_advantages`). Everything around it is verl's: the KL penalty in the reward,
rollout correction, writing advantages back. Any other estimator runs exactly as in verl's trainer.

How the one step is changed: verl's ``_compute_advantage`` calls the module function
``compute_advantage_for_multi_trajectories``; this trainer's ``_compute_advantage`` swaps that name,
for the duration of its own call, for one that computes arlkit's step advantages.

The plugin (:mod:`arlkit.integrations.verl_plugin`) imports this module as soon as a process imports
``verl.trainer.ppo.v1``, so the modes exist wherever verl looks trainers up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from verl.trainer.ppo.v1 import register_trainer, trainer_base
from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync
from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from arlkit.algos import ADV_ESTIMATORS, AdvantageOutput, compute_advantage
from arlkit.integrations.verl_plugin import PREFIX, estimator_settings
from arlkit.integrations.verl_steps import EXTRA_KEY, OutputInfo, step_inputs

__all__ = ["STEP_ESTIMATORS", "StepAdvantages", "step_advantages"]

STEP_ESTIMATORS = frozenset(
    f"{PREFIX}{n}" for n in ADV_ESTIMATORS.names() if ADV_ESTIMATORS.get(n).flags.needs_step_rows)
"""The verl names of arlkit's estimators that need step rows (``arlkit_gigpo``, ``arlkit_empg``)."""


def step_advantages(
    estimator: str,
    keys: Sequence[str],
    extra_fields: Sequence[Mapping[str, Any]],
    response_mask: Tensor,
    token_level_rewards: Tensor,
    *,
    entropy: Tensor | None = None,
    algo_config: Any = None,
) -> AdvantageOutput:
    """arlkit's step-row advantages for a verl batch.

    Args:
        estimator: ``arlkit_gigpo`` or ``arlkit_empg``.
        keys: verl's output keys ``{uid}_{session}_{index}``.
        extra_fields: each row's ``extra_fields`` (holding arlkit's record under ``"arlkit"``).
        response_mask: ``(B, L)``.
        token_level_rewards: ``(B, L)``; each row's sum is its trajectory's score.
        entropy: ``(B, L)`` the rollout policy's token entropies (EMPG needs them).
        algo_config: verl's ``algorithm`` config (``norm_adv_by_std_in_grpo``); the rest from
            ``$ARLKIT_VERL_SETTINGS`` (:func:`~arlkit.integrations.verl_plugin.settings_for`).
    """
    name = estimator.removeprefix(PREFIX)
    if estimator not in STEP_ESTIMATORS:
        raise ValueError(f"{estimator!r} is not a step-row estimator; these are: {', '.join(sorted(STEP_ESTIMATORS))}")
    infos = []
    for row in extra_fields:
        if not isinstance(row, Mapping) or EXTRA_KEY not in row:
            raise ValueError(f"{estimator} needs arlkit's record on every row (extra_fields[{EXTRA_KEY!r}]): the rows "
                             "must come from the arlkit_agent loop")
        infos.append(OutputInfo.from_dict(row[EXTRA_KEY]))
    inputs = step_inputs(keys, infos, response_mask, token_level_rewards,
                         entropy=entropy if name == "empg" else None)
    if name == "gigpo" and any(t.state == "" for info in infos for t in info.turns):
        raise ValueError(f"{estimator} groups steps by anchor state, and the environment {infos[0].env!r} has no "
                         "state_key; use an estimator without anchor states (arlkit_grpo, arlkit_rloo, ...)")
    return compute_advantage(name, inputs, **estimator_settings(name, algo_config))


@contextlib.contextmanager
def _swapped(module: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


class StepAdvantages:
    """The one change to verl's v1 trainers (module docstring): step-row estimators read arlkit's
    records from the TransferQueue and compute on step rows; every other estimator is verl's."""

    config: Any

    def _compute_advantage(self, batch: Any, metrics: dict[str, Any]) -> Any:
        estimator = str(self.config.algorithm.adv_estimator)
        parent = super()._compute_advantage  # type: ignore[misc]
        if estimator not in STEP_ESTIMATORS:
            return parent(batch, metrics)
        fields = ["extra_fields", "entropy"] if estimator == f"{PREFIX}empg" else ["extra_fields"]
        stash = trainer_base.tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        extra_fields = list(stash["extra_fields"])
        entropy = stash.to_padded_tensor()["entropy"] if "entropy" in fields else None

        def advantages(data: Any, batch_keys: Sequence[str], adv_estimator: str, **_: Any) -> Any:
            mask = data.batch["response_mask"]
            if entropy is not None and tuple(entropy.shape) != tuple(mask.shape):
                raise ValueError(f"entropy {tuple(entropy.shape)} and response_mask {tuple(mask.shape)} differ")
            out = step_advantages(adv_estimator, list(batch_keys), extra_fields, mask,
                                  data.batch["token_level_rewards"], entropy=entropy, algo_config=self.config.algorithm)
            data.batch["advantages"] = out.advantages.to(torch.float32)
            data.batch["returns"] = out.returns.to(torch.float32)
            metrics.update({f"arlkit/{key}": float(value) for key, value in out.metrics.items()})
            return data

        with _swapped(trainer_base, "compute_advantage_for_multi_trajectories", advantages):
            return parent(batch, metrics)


@register_trainer("arlkit")
class ArlkitTrainer(StepAdvantages, PPOTrainerSync):
    """verl's ``sync`` trainer with arlkit's step-row advantages."""


@register_trainer("arlkit_colocate_async")
class ArlkitColocateAsyncTrainer(StepAdvantages, PPOTrainerColocateAsync):
    """verl's ``colocate_async`` trainer with arlkit's step-row advantages."""


@register_trainer("arlkit_separate_async")
class ArlkitSeparateAsyncTrainer(StepAdvantages, PPOTrainerSeparateAsync):
    """verl's ``separate_async`` trainer with arlkit's step-row advantages."""
