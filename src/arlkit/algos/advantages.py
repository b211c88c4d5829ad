"""Advantage estimators behind a registry, with one uniform signature (docs/algorithms.md#advantage-estimators).

Every estimator is ``fn(inputs: AdvantageInputs, config) -> AdvantageOutput``: one inputs object
carries everything any estimator may need (rewards, mask, group / trajectory / step ids, per-step
rewards, anchor keys, values, old entropies), and ``config`` is the estimator's own frozen
dataclass. A trainer calls ``compute_advantage(name, inputs, config)`` with no special cases; an
estimator checks for the inputs it needs and names any that are missing.

Row layouts (docs/algorithms.md#conventions): a row is either one whole trajectory (``traj_index`` omitted: each row is its
own trajectory) or one environment step (``traj_index`` and ``step_index`` given; every step row of a
trajectory carries the trajectory's episode score).

This module holds the outcome-reward estimators ``grpo``, ``rloo`` and
``reinforce_plus_plus_baseline``; ``gigpo``, ``gae`` and ``empg`` live in their own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
from torch import Tensor

from arlkit.algos._groups import GroupStats, codes_of, first_row, group_stats, pair_codes
from arlkit.algos.aggregation import masked_whiten
from arlkit.algos.registry import NoConfig, RegistryEntry, entry_builder
from arlkit.registry import Registry

__all__ = [
    "ADV_ESTIMATORS",
    "AdvantageFn",
    "AdvantageInputs",
    "AdvantageOutput",
    "EstimatorFlags",
    "GRPOConfig",
    "GroupKeys",
    "adv_estimator_config",
    "broadcast_rows",
    "compute_advantage",
    "grpo_scalar_advantage",
    "register_adv_estimator",
]

GroupKeys = Sequence[Hashable] | Tensor | np.ndarray
"""Per-row ids: a sequence of hashables (str, int, tuple, ...) or a 1-D tensor/array of length B."""


@dataclass(frozen=True, eq=False)
class AdvantageInputs:
    """Everything an advantage estimator may read; ``B`` rows, ``L`` response tokens.

    Only ``response_mask`` is always required; each estimator documents which other fields it reads.
    """

    response_mask: Tensor
    """``(B, L)`` 0/1 mask of the response tokens that enter the loss."""
    token_level_rewards: Tensor | None = None
    """``(B, L)`` rewards per token (verl's layout: the outcome reward on the last response token)."""
    scores: Tensor | None = None
    """``(B,)`` outcome score per row; when None, ``token_level_rewards.sum(-1)``. For step rows this is
    the episode score of the row's trajectory."""
    index: GroupKeys | None = None
    """``(B,)`` group id per row (verl's ``index``/``uid``): rows sampled for the same task in this step."""
    traj_index: GroupKeys | None = None
    """``(B,)`` trajectory id per row (step rows); None means every row is its own trajectory."""
    step_index: Tensor | None = None
    """``(B,)`` int: the step number t (0-based: interactions completed before this action)."""
    step_rewards: Tensor | None = None
    """``(B,)`` reward of the step itself r_t (success reward on the final step, minus penalties)."""
    anchor_keys: Sequence[Hashable] | None = None
    """``(B,)`` hashable anchor-state key per step row (GiGPO); BudgetMix passes ``(state, T − t)``."""
    values: Tensor | None = None
    """``(B, L)`` critic values V(s_t) per token under the rollout-time critic (GAE)."""
    old_entropy: Tensor | None = None
    """``(B, L)`` per-token entropy of the rollout policy (EMPG)."""

    @property
    def batch_size(self) -> int:
        """``B``."""
        return int(self.response_mask.shape[0])

    def require(self, estimator: str, *fields: str) -> None:
        """Raise ``ValueError`` naming every field in ``fields`` that is None."""
        missing = [f for f in fields if getattr(self, f) is None]
        if missing:
            raise ValueError(f"advantage estimator {estimator!r} needs inputs: {', '.join(missing)}")

    def row_scores(self, estimator: str) -> Tensor:
        """``(B,)`` outcome score per row: ``scores``, else the row sum of ``token_level_rewards``."""
        if self.scores is not None:
            scores = self.scores
        elif self.token_level_rewards is not None:
            _check_shape("token_level_rewards", self.token_level_rewards, tuple(self.response_mask.shape))
            scores = self.token_level_rewards.sum(dim=-1)
        else:
            raise ValueError(f"advantage estimator {estimator!r} needs inputs: scores or token_level_rewards")
        _check_shape("scores", scores, (self.batch_size,))
        return scores.to(torch.get_default_dtype()) if not scores.is_floating_point() else scores

    def group_codes(self, estimator: str) -> tuple[Tensor, int]:
        """Dense group codes ``(B,)`` and the number of groups."""
        self.require(estimator, "index")
        assert self.index is not None
        return codes_of(self.index, self.batch_size, what="index")

    def trajectory_codes(self, group: Tensor) -> tuple[Tensor, int]:
        """Dense codes of (group, trajectory) pairs ``(B,)``; each row its own trajectory if ``traj_index`` is None."""
        if self.traj_index is None:
            return torch.arange(self.batch_size), self.batch_size
        traj, _ = codes_of(self.traj_index, self.batch_size, what="traj_index")
        return pair_codes(group, traj)


class AdvantageOutput(NamedTuple):
    """What every estimator returns."""

    advantages: Tensor
    """``(B, L)`` per-token advantages, 0 outside the response mask."""
    returns: Tensor
    """``(B, L)`` value targets (GAE); equal to ``advantages`` for critic-free estimators (verl's convention)."""
    metrics: dict[str, Tensor]
    """Detached diagnostics under ``adv/`` keys."""


AdvantageFn = Callable[[AdvantageInputs, Any], AdvantageOutput]


@dataclass(frozen=True)
class EstimatorFlags:
    """What an advantage estimator requires of the trainer."""

    needs_critic: bool = False
    """A value model (its values in ``AdvantageInputs.values``)."""
    needs_step_rows: bool = False
    """One training row per environment step (``traj_index`` and ``step_index``)."""
    needs_entropy: bool = False
    """The old policy's token entropies (``old_entropy``), taken in a pass of their own before the updates."""
    needs_anchor_states: bool = False
    """Environment states that group steps across trajectories (``anchor_keys``: the env's ``state_key``)."""


ADV_ESTIMATORS: Registry[RegistryEntry[AdvantageFn, EstimatorFlags]] = Registry(
    "advantage estimator", modules=("arlkit.algos.gae", "arlkit.algos.gigpo", "arlkit.algos.empg")
)
"""The advantage-estimator registry (name -> function, config class, :class:`EstimatorFlags`); ``modules``
are the estimators registered outside this module."""


def register_adv_estimator(
    name: str, config_cls: type = NoConfig, *, needs_critic: bool = False, needs_step_rows: bool = False,
    needs_entropy: bool = False, needs_anchor_states: bool = False,
) -> Callable[[AdvantageFn], AdvantageFn]:
    """Decorator registering ``fn(inputs, config) -> AdvantageOutput`` under ``name``.

    The ``needs_*`` flags tell presets and the trainer what the estimator requires (:class:`EstimatorFlags`).
    A duplicate name raises ``ValueError``.
    """
    flags = EstimatorFlags(needs_critic=needs_critic, needs_step_rows=needs_step_rows, needs_entropy=needs_entropy,
                           needs_anchor_states=needs_anchor_states)
    return ADV_ESTIMATORS.register(name, entry_builder(ADV_ESTIMATORS.kind, name, config_cls, flags))


def adv_estimator_config(name: str, config: Any = None, **overrides: Any) -> Any:
    """The typed config of estimator ``name`` with ``overrides`` applied (unknown keys raise)."""
    return ADV_ESTIMATORS.get(name).config(config, **overrides)


def compute_advantage(name: str, inputs: AdvantageInputs, config: Any = None, **overrides: Any) -> AdvantageOutput:
    """Run the registered estimator ``name`` on ``inputs`` with its config (defaults + ``overrides``).

    Estimators run under ``torch.no_grad()``: advantages are targets, not part of the graph.
    """
    entry = ADV_ESTIMATORS.get(name)
    cfg = entry.config(config, **overrides)
    if inputs.response_mask.dim() != 2:
        raise ValueError(f"response_mask must be (B, L), got {tuple(inputs.response_mask.shape)}")
    with torch.no_grad():
        return entry.fn(inputs, cfg)


def _check_shape(name: str, tensor: Tensor, shape: tuple[int, ...]) -> None:
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(tensor.shape)}")


def broadcast_rows(row_values: Tensor, response_mask: Tensor) -> Tensor:
    """``(B,) -> (B, L)``: each row's value on its valid tokens, 0 elsewhere."""
    return row_values.unsqueeze(-1) * response_mask.to(row_values.dtype)


# ---------------------------------------------------------------------------------------------------------------------
# GRPO


@dataclass(frozen=True)
class GRPOConfig:
    """GRPO (Shao et al. 2024) and Dr.GRPO (Liu et al. 2025) group-relative advantages."""

    norm_adv_by_std_in_grpo: bool = True
    """Divide by the group's std (GRPO); False gives Dr.GRPO's ``s − μ``."""
    epsilon: float = 1e-6
    """Added to σ before dividing."""
    step_stats: Literal["cross_step", "per_trajectory"] = "cross_step"
    """With step rows: μ, σ over all step rows of the group (AA's "cross steps"), or over one score per
    trajectory. Identical when every row is its own trajectory."""


def grpo_scalar_advantage(
    inputs: AdvantageInputs, config: GRPOConfig, estimator: str = "grpo"
) -> tuple[Tensor, dict[str, Tensor]]:
    """The GRPO advantage per row ``(B,)`` (before broadcasting) and diagnostics; reused by GiGPO/EMPG.

    Per group g with statistics μ_g, σ_g (unbiased) of its scores: ``A = (s − μ_g)/(σ_g + ε)``, or
    ``s − μ_g`` without std normalisation; a group with a single member uses μ = 0, σ = 1.
    """
    scores = inputs.row_scores(estimator)
    group, num_groups = inputs.group_codes(estimator)
    group = group.to(scores.device)
    if config.step_stats == "per_trajectory":
        traj, num_traj = inputs.trajectory_codes(group)
        traj = traj.to(scores.device)
        if not bool(group_stats(scores, traj, num_traj).uniform.all()):
            raise ValueError("per_trajectory statistics need every step row of a trajectory to carry the same score")
        first = first_row(traj, num_traj)
        stats = group_stats(scores[first], group[first], num_groups)
    elif config.step_stats == "cross_step":
        stats = group_stats(scores, group, num_groups)
    else:
        raise ValueError(f"step_stats: {config.step_stats!r} is not one of cross_step, per_trajectory")
    singleton = stats.size <= 1
    mean = torch.where(singleton, torch.zeros_like(stats.mean), stats.mean)
    std = torch.where(singleton, torch.ones_like(stats.std), stats.std)
    centred = scores - mean[group]
    adv = centred / (std[group] + config.epsilon) if config.norm_adv_by_std_in_grpo else centred
    present = stats.size > 0
    metrics = {
        "adv/singleton_groups": (singleton & present).sum().to(scores.dtype),
        "adv/uniform_groups": (stats.uniform & present & ~singleton).sum().to(scores.dtype),
    }
    return adv, metrics


@register_adv_estimator("grpo", GRPOConfig)
def _grpo(inputs: AdvantageInputs, config: GRPOConfig) -> AdvantageOutput:
    """GRPO: ``A_i = (s_i − μ_g)/(σ_g + ε)`` (or ``s_i − μ_g``), broadcast over the row's tokens.

    Reads ``scores`` or ``token_level_rewards``, ``index``; ``traj_index`` for ``per_trajectory``.
    """
    adv, metrics = grpo_scalar_advantage(inputs, config)
    out = broadcast_rows(adv, inputs.response_mask)
    return AdvantageOutput(out, out, metrics)


# ---------------------------------------------------------------------------------------------------------------------
# RLOO and REINFORCE++-baseline (one score per trajectory)


def _trajectory_group_stats(inputs: AdvantageInputs, estimator: str) -> tuple[Tensor, Tensor, GroupStats]:
    """Row scores, row group codes and per-group statistics over one score per trajectory."""
    scores = inputs.row_scores(estimator)
    group, num_groups = inputs.group_codes(estimator)
    group = group.to(scores.device)
    traj, num_traj = inputs.trajectory_codes(group)
    first = first_row(traj.to(scores.device), num_traj)
    return scores, group, group_stats(scores[first], group[first], num_groups)


@register_adv_estimator("rloo", NoConfig)
def _rloo(inputs: AdvantageInputs, config: NoConfig) -> AdvantageOutput:
    """RLOO (Ahmadian et al. 2024): ``A_i = s_i − mean_{j≠i} s_j = n/(n−1)·(s_i − μ_g)`` over the n trajectories
    of the group; a group of one trajectory uses baseline 0 (``A = s``). Reads ``scores``/``token_level_rewards``,
    ``index``, optionally ``traj_index``."""
    scores, group, stats = _trajectory_group_stats(inputs, "rloo")
    n = stats.size[group]
    loo = torch.where(n > 1, n / (n - 1.0).clamp(min=1.0) * (scores - stats.mean[group]), scores)
    out = broadcast_rows(loo, inputs.response_mask)
    return AdvantageOutput(out, out, {})


@register_adv_estimator("reinforce_plus_plus_baseline", NoConfig)
def _reinforce_pp_baseline(inputs: AdvantageInputs, config: NoConfig) -> AdvantageOutput:
    """REINFORCE++-baseline (Hu et al. 2025): ``s_i − μ_g`` (μ over the group's trajectories; 0 for a single
    trajectory), broadcast over tokens, then whitened over all valid tokens of the batch:
    ``(x − mean)/sqrt(var + 1e-8)``. Reads ``scores``/``token_level_rewards``, ``index``, optionally ``traj_index``."""
    scores, group, stats = _trajectory_group_stats(inputs, "reinforce_plus_plus_baseline")
    mean = torch.where(stats.size > 1, stats.mean, torch.zeros_like(stats.mean))
    out = masked_whiten(broadcast_rows(scores - mean[group], inputs.response_mask), inputs.response_mask)
    return AdvantageOutput(out, out, {})
