"""Policy losses behind a registry: vanilla dual-clip PPO/GRPO, GSPO, CISPO, SAPO (AA §2.2, App. A.2;
docs/algorithms.md#policy-losses).
AA: "ARLArena: A Unified Framework for Stable Agentic Reinforcement Learning"

Every loss has the same signature, so a trainer calls ``policy_loss(name, ...)`` with no special cases:

    fn(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config, *, aggregate)
        -> PolicyLossOutput(loss, metrics)

with ``(B, L)`` tensors over response tokens (zeroed under the mask, which arrives as bool) and ``config``
the loss's frozen dataclass of hyperparameters. Conventions: ``lr_t = logπθ − logπold``, ``r_t = exp(clamp(lr_t, −20, 20))``,
``A`` the per-token advantage, ``M`` the 0/1 response mask. Metrics are detached scalars under
``actor/``: ``pg_clipfrac`` (= ``pg_clipfrac_high`` + ``pg_clipfrac_low``, the share of valid tokens
whose clip is active: A > 0 with ratio > 1+ε_high, or A < 0 with ratio < 1−ε_low), ``pg_clipfrac_dual``
(vanilla: A < 0 with ratio > c), ``ppo_kl`` (``mean_t M·(logπold − logπθ)``, an estimate of
KL(πold‖πθ)) and ``seq_masked_rows`` (rows removed by sequence masking). All are taken over the
caller's ``response_mask``, before sequence masking.

Register a new loss with :func:`register_policy_loss`::

    @dataclass(frozen=True)
    class MyConfig:
        beta: float = 1.0  # (document each field in a docstring below it)

    @register_policy_loss("my_loss", MyConfig)
    def my_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config, *, aggregate):
        token_loss = -advantages * torch.exp(log_prob - old_log_prob) * config.beta
        loss = aggregate(token_loss, response_mask, loss_agg_mode)
        return PolicyLossOutput(loss, {})
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import torch
from torch import Tensor

from arlkit.algos.aggregation import LOSS_AGG_MODES, agg_loss, masked_mean, row_mean
from arlkit.algos.registry import NoConfig, RegistryEntry, entry_builder
from arlkit.config import ConfigError
from arlkit.registry import Registry

__all__ = [
    "POLICY_LOSSES",
    "Aggregate",
    "SEQ_MASK_DELTA",
    "CISPOConfig",
    "GSPOConfig",
    "LossFlags",
    "PolicyLossFn",
    "PolicyLossOutput",
    "SAPOConfig",
    "VanillaConfig",
    "policy_loss",
    "policy_loss_config",
    "register_policy_loss",
    "sequence_mask_rows",
]

SEQ_MASK_DELTA: Final = math.log(1.25)
"""arlkit's default sequence-masking threshold δ = ln 1.25 ≈ 0.223 (AA's scripts use 3e-3)."""

_LOG_RATIO_CLAMP: Final = 20.0
_GSPO_LOG_RATIO_MAX: Final = 10.0


class PolicyLossOutput(NamedTuple):
    """What every policy loss returns; unpacks as ``loss, metrics = ...``."""

    loss: Tensor
    """Scalar loss to minimise (carries the gradient)."""
    metrics: dict[str, Tensor]
    """Detached scalar tensors under ``actor/`` keys; convert to numbers once per step."""


PolicyLossFn = Callable[..., PolicyLossOutput]
Aggregate = Callable[[Tensor, Tensor, str], Tensor]
"""``aggregate(token_losses, mask, mode) -> scalar loss``: how a policy loss reduces its ``(B, L)`` matrix."""


@dataclass(frozen=True)
class LossFlags:
    """What a policy loss fixes for its caller."""

    agg_mode: str | None = None
    """The aggregation it always uses (the caller's ``loss_agg_mode`` is then ignored); None: the caller's."""


POLICY_LOSSES: Registry[RegistryEntry[PolicyLossFn, LossFlags]] = Registry("policy loss")
"""The policy-loss registry (name -> function, config class, :class:`LossFlags`)."""


def register_policy_loss(
    name: str, config_cls: type = NoConfig, *, agg_mode: str | None = None
) -> Callable[[PolicyLossFn], PolicyLossFn]:
    """Decorator registering a policy loss under ``name`` with its hyperparameter dataclass.

    ``agg_mode`` fixes the aggregation (the caller's ``loss_agg_mode`` is then ignored), as GSPO and
    SAPO do. A duplicate name raises ``ValueError``.
    """
    if agg_mode is not None and agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"agg_mode: {agg_mode!r} is not one of {', '.join(LOSS_AGG_MODES)}")
    return POLICY_LOSSES.register(name, entry_builder(POLICY_LOSSES.kind, name, config_cls, LossFlags(agg_mode)))


def policy_loss_config(name: str, config: Any = None, **hyperparameters: Any) -> Any:
    """The typed config of loss ``name`` with ``hyperparameters`` applied (unknown keys raise)."""
    return POLICY_LOSSES.get(name).config(config, **hyperparameters)


def policy_loss(
    name: str,
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    loss_scale_factor: float | None = None,
    aggregate: Aggregate | None = None,
    config: Any = None,
    **hyperparameters: Any,
) -> PolicyLossOutput:
    """Compute the registered policy loss ``name``.

    Args:
        name: a registered loss (``vanilla``, ``gspo``, ``cispo``, ``sapo``, or one you registered).
        old_log_prob: ``(B, L)`` log-probs of the sampled tokens under the rollout policy πold.
        log_prob: ``(B, L)`` log-probs under the current policy πθ (carries the gradient).
        advantages: ``(B, L)`` per-token advantages.
        response_mask: ``(B, L)`` 0/1 (or bool) mask of the tokens that enter the loss.
        loss_agg_mode: one of :data:`~arlkit.algos.LOSS_AGG_MODES`; ignored by losses that fix their
            own (GSPO and SAPO always use ``seq-mean-token-mean``, docs/algorithms.md#policy-losses).
        loss_scale_factor: ``L_max`` for ``seq-mean-token-sum-norm`` (default: padded length ``L``).
        aggregate: ``aggregate(token_losses, mask, mode) -> loss`` in place of
            :func:`~arlkit.algos.agg_loss` (e.g. verl's, which scales for data parallelism).
        config: an instance of the loss's config class (defaults when None).
        **hyperparameters: field overrides of that config, e.g. ``clip_ratio_high=0.28``.

    Values under the mask are replaced by 0 before the formula runs, so padding may hold anything.
    """
    entry = POLICY_LOSSES.get(name)
    cfg = entry.config(config, **hyperparameters)
    shape = response_mask.shape
    for arg, tensor in (("old_log_prob", old_log_prob), ("log_prob", log_prob), ("advantages", advantages)):
        if tensor.shape != shape or tensor.dim() != 2:
            raise ValueError(f"{arg} must have the response_mask's shape {tuple(shape)}, got {tuple(tensor.shape)}")
    mode = entry.flags.agg_mode or loss_agg_mode
    if mode not in LOSS_AGG_MODES:
        raise ConfigError(f"loss_agg_mode: {mode!r} is not one of {', '.join(LOSS_AGG_MODES)}")
    mask = response_mask.bool()
    zero = torch.zeros((), dtype=log_prob.dtype, device=log_prob.device)
    return entry.fn(
        torch.where(mask, old_log_prob, zero),
        torch.where(mask, log_prob, zero),
        torch.where(mask, advantages, zero),
        mask,
        mode,
        cfg,
        aggregate=aggregate or functools.partial(agg_loss, loss_scale_factor=loss_scale_factor),
    )


# ---------------------------------------------------------------------------------------------------------------------
# Configs


def _check_clip(low: float, high: float) -> None:
    if not 0.0 <= low <= 1.0:
        raise ValueError(f"clip_ratio_low: must be in [0, 1], got {low}")
    if high < 0.0:
        raise ValueError(f"clip_ratio_high: must be >= 0, got {high}")


@dataclass(frozen=True)
class VanillaConfig:
    """Dual-clip PPO/GRPO (Schulman et al. 2017; Ye et al. 2020 for the dual clip)."""

    clip_ratio_low: float = 0.2
    """ε_low: the ratio is clipped below at 1 − ε_low."""
    clip_ratio_high: float = 0.2
    """ε_high: the ratio is clipped above at 1 + ε_high (DAPO's clip-higher uses 0.28)."""
    clip_ratio_c: float = 3.0
    """c of the dual clip: for A < 0 the token loss is at most −A·c. Must be > 1."""
    sequence_mask: bool = False
    """Drop rows with negative mean advantage whose log-prob fell by more than ``seq_mask_delta`` (AA §4.1)."""
    seq_mask_delta: float = SEQ_MASK_DELTA
    """δ of sequence masking: threshold on ``mean_t M·(logπold − logπθ)``."""

    def __post_init__(self) -> None:
        _check_clip(self.clip_ratio_low, self.clip_ratio_high)
        if not self.clip_ratio_c > 1.0:
            raise ValueError(f"clip_ratio_c: must be > 1 for the dual clip, got {self.clip_ratio_c}")


@dataclass(frozen=True)
class GSPOConfig:
    """GSPO (Zheng et al. 2025): one length-normalised ratio per sequence. No dual clip, no sequence masking."""

    clip_ratio_low: float = 3e-4
    """ε_low on the sequence ratio (GSPO paper's value; AA and RT give none)."""
    clip_ratio_high: float = 4e-4
    """ε_high on the sequence ratio (GSPO paper's value)."""

    def __post_init__(self) -> None:
        _check_clip(self.clip_ratio_low, self.clip_ratio_high)


@dataclass(frozen=True)
class CISPOConfig:
    """CISPO (MiniMax 2025): clipped, stop-gradient IS weight on a REINFORCE term."""

    clip_ratio_low: float = 1.0
    """ε_low; AA runs use 1.0, i.e. no lower clip."""
    clip_ratio_high: float = 0.2
    """ε_high: the IS weight is capped at 1 + ε_high."""
    sequence_mask: bool = False
    """Drop rows with negative mean advantage whose log-prob fell by more than ``seq_mask_delta`` (AA's CISPO_SM)."""
    seq_mask_delta: float = SEQ_MASK_DELTA
    """δ of sequence masking."""

    def __post_init__(self) -> None:
        _check_clip(self.clip_ratio_low, self.clip_ratio_high)


@dataclass(frozen=True)
class SAPOConfig:
    """SAPO (Gao et al. 2025): a soft sigmoid gate instead of a hard clip."""

    tau_pos: float = 1.0
    """Gate temperature τ for rows whose mean advantage is > 0."""
    tau_neg: float = 1.05
    """Gate temperature τ for the other rows."""
    sequence_mask: bool = False
    """Drop rows with negative mean advantage whose log-prob fell by more than ``seq_mask_delta`` (AA's SAPO_SM)."""
    seq_mask_delta: float = SEQ_MASK_DELTA
    """δ of sequence masking."""
    clip_ratio_low: float = 0.2
    """Only for the ``pg_clipfrac_*`` diagnostics (AA Fig. 3's out-of-range tokens); SAPO never clips."""
    clip_ratio_high: float = 0.2
    """Only for the ``pg_clipfrac_*`` diagnostics."""

    def __post_init__(self) -> None:
        _check_clip(self.clip_ratio_low, self.clip_ratio_high)
        if self.tau_pos <= 0 or self.tau_neg <= 0:
            raise ValueError(f"tau_pos, tau_neg: must be > 0, got {self.tau_pos}, {self.tau_neg}")


# ---------------------------------------------------------------------------------------------------------------------
# Shared pieces


def sequence_mask_rows(
    old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor, delta: float
) -> Tensor:
    """Rows removed by sequence masking (docs/algorithms.md#policy-losses; AA §4.1): ``(B, L) x4 -> (B,)`` bool.

    With ``A_i = mean_t M·A`` and ``D_i = mean_t M·(logπold − logπθ)`` (means over the row's valid
    tokens), row i is dropped when ``A_i < 0 and D_i > δ``: a negative-advantage row whose probability
    already fell. Rows without valid tokens are never dropped.
    """
    row_adv = row_mean(advantages, response_mask)
    row_drop = row_mean((old_log_prob - log_prob).detach(), response_mask)
    return (row_adv < 0) & (row_drop > delta)


def _ratio(old_log_prob: Tensor, log_prob: Tensor) -> Tensor:
    return torch.exp((log_prob - old_log_prob).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP))


def _apply_sequence_mask(
    cfg: Any, old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """The loss mask after sequence masking (when enabled) and the number of rows it removed."""
    if not cfg.sequence_mask:
        return mask, torch.zeros((), dtype=log_prob.dtype, device=log_prob.device)
    dropped = sequence_mask_rows(old_log_prob, log_prob, advantages, mask, cfg.seq_mask_delta)
    return mask & ~dropped.unsqueeze(-1), dropped.to(log_prob.dtype).sum()


def _metrics(
    ratio: Tensor, advantages: Tensor, mask: Tensor, old_log_prob: Tensor, log_prob: Tensor,
    low: float, high: float, masked_rows: Tensor,
) -> dict[str, Tensor]:
    ratio = ratio.detach()
    clip_high = masked_mean(((advantages > 0) & (ratio > 1.0 + high)).to(ratio.dtype), mask)
    clip_low = masked_mean(((advantages < 0) & (ratio < 1.0 - low)).to(ratio.dtype), mask)
    return {
        "actor/pg_clipfrac": clip_high + clip_low,
        "actor/pg_clipfrac_high": clip_high,
        "actor/pg_clipfrac_low": clip_low,
        "actor/ppo_kl": masked_mean((old_log_prob - log_prob).detach(), mask),
        "actor/seq_masked_rows": masked_rows.detach(),
    }


# ---------------------------------------------------------------------------------------------------------------------
# The losses (called through ``policy_loss``, which has already zeroed every input under the mask)


@register_policy_loss("vanilla", VanillaConfig)
def _vanilla(
    old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
    loss_agg_mode: str, config: VanillaConfig, *, aggregate: Aggregate,
) -> PolicyLossOutput:
    """Dual-clip PPO/GRPO: ``Lc = max(−A·r, −A·clip(r, 1−ε_low, 1+ε_high))``; for A < 0 ``min(Lc, −A·c)``."""
    ratio = _ratio(old_log_prob, log_prob)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - config.clip_ratio_low, 1.0 + config.clip_ratio_high)
    ppo = torch.maximum(unclipped, clipped)
    dual = -advantages * config.clip_ratio_c
    token_loss = torch.where(advantages < 0, torch.minimum(ppo, dual), ppo)
    mask, masked_rows = _apply_sequence_mask(config, old_log_prob, log_prob, advantages, response_mask)
    loss = aggregate(token_loss, mask, loss_agg_mode)
    metrics = _metrics(
        ratio, advantages, response_mask, old_log_prob, log_prob,
        config.clip_ratio_low, config.clip_ratio_high, masked_rows,
    )
    dual_active = (advantages < 0) & (ratio.detach() > config.clip_ratio_c)
    metrics["actor/pg_clipfrac_dual"] = masked_mean(dual_active.to(ratio.dtype), response_mask)
    return PolicyLossOutput(loss, metrics)


@register_policy_loss("gspo", GSPOConfig, agg_mode="seq-mean-token-mean")
def _gspo(
    old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
    loss_agg_mode: str, config: GSPOConfig, *, aggregate: Aggregate,
) -> PolicyLossOutput:
    """GSPO: ``s_i = exp(mean_t M·lr_t)``; token loss ``max(−A·s, −A·clip(s, 1−ε_low, 1+ε_high))``.

    Implemented token-wise as ``log s_it = logπθ_t − sg(logπθ_t) + sg(mean_t lr_i)`` (clamped at ≤ 10):
    its value is the sequence ratio and its gradient with respect to token t is ``s_i·∇logπθ_t``, so with
    ``seq-mean-token-mean`` aggregation the gradient equals that of the sequence-ratio objective.
    """
    seq_log_ratio = row_mean(log_prob - old_log_prob, response_mask).detach()
    log_seq_ratio = (log_prob - log_prob.detach() + seq_log_ratio.unsqueeze(-1)).clamp(max=_GSPO_LOG_RATIO_MAX)
    seq_ratio = torch.exp(log_seq_ratio)
    unclipped = -advantages * seq_ratio
    clipped = -advantages * seq_ratio.clamp(1.0 - config.clip_ratio_low, 1.0 + config.clip_ratio_high)
    token_loss = torch.maximum(unclipped, clipped)
    loss = aggregate(token_loss, response_mask, loss_agg_mode)
    no_rows = torch.zeros((), dtype=log_prob.dtype, device=log_prob.device)
    metrics = _metrics(
        seq_ratio, advantages, response_mask, old_log_prob, log_prob,
        config.clip_ratio_low, config.clip_ratio_high, no_rows,
    )
    return PolicyLossOutput(loss, metrics)


@register_policy_loss("cispo", CISPOConfig)
def _cispo(
    old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
    loss_agg_mode: str, config: CISPOConfig, *, aggregate: Aggregate,
) -> PolicyLossOutput:
    """CISPO: token loss ``−sg(clip(r, 1−ε_low, 1+ε_high))·A·logπθ_t`` (no min/max: every token keeps a gradient)."""
    ratio = _ratio(old_log_prob, log_prob)
    weight = ratio.detach().clamp(1.0 - config.clip_ratio_low, 1.0 + config.clip_ratio_high)
    token_loss = -weight * advantages * log_prob
    mask, masked_rows = _apply_sequence_mask(config, old_log_prob, log_prob, advantages, response_mask)
    loss = aggregate(token_loss, mask, loss_agg_mode)
    metrics = _metrics(
        ratio, advantages, response_mask, old_log_prob, log_prob,
        config.clip_ratio_low, config.clip_ratio_high, masked_rows,
    )
    return PolicyLossOutput(loss, metrics)


@register_policy_loss("sapo", SAPOConfig, agg_mode="seq-mean-token-mean")
def _sapo(
    old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
    loss_agg_mode: str, config: SAPOConfig, *, aggregate: Aggregate,
) -> PolicyLossOutput:
    """SAPO: ``gate = (4/τ)·σ(τ·(r − 1))``, token loss ``−gate·A``.

    τ = ``tau_pos`` for tokens whose advantage is > 0, else ``tau_neg`` (per token, as SAPO and verl
    0.9.1; with outcome advantages every token of a row has the row's sign). ``dgate/dr = 1`` at r = 1,
    so on-policy the gradient is the plain policy gradient; far from 1 the gate flattens (a soft clip).
    """
    ratio = _ratio(old_log_prob, log_prob)
    tau = torch.where(
        advantages > 0,
        torch.tensor(config.tau_pos, dtype=ratio.dtype, device=ratio.device),
        torch.tensor(config.tau_neg, dtype=ratio.dtype, device=ratio.device),
    )
    gate = (4.0 / tau) * torch.sigmoid(tau * (ratio - 1.0))
    token_loss = -gate * advantages
    mask, masked_rows = _apply_sequence_mask(config, old_log_prob, log_prob, advantages, response_mask)
    loss = aggregate(token_loss, mask, loss_agg_mode)
    metrics = _metrics(
        ratio, advantages, response_mask, old_log_prob, log_prob,
        config.clip_ratio_low, config.clip_ratio_high, masked_rows,
    )
    return PolicyLossOutput(loss, metrics)
