"""KL estimators, token entropy and the total actor loss (docs/algorithms.md#kl-and-entropy).

Per-token estimators of KL(πθ ‖ πref) from samples of πθ (Schulman's k1/k2/k3 family, verl's names).
With ``x = logπref − logπθ`` per token:

- ``k1`` / ``kl``: ``−x`` (unbiased, high variance, can be negative)
- ``abs``: ``|x|``
- ``k2`` / ``mse``: ``½ x²``
- ``k3`` / ``low_var_kl``: ``clamp(exp(clamp(x, −20, 20)) − x − 1, −10, 10)`` — the clamped form of
  ``e^x − x − 1`` (unbiased, low variance, ≥ 0)
- ``<kind>+`` (e.g. ``k1+``, ``low_var_kl+``): the forward value of ``<kind>`` with the gradient of
  ``k2`` (straight-through), because the k2 gradient is the unbiased gradient of the KL.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import torch
from torch import Tensor

from arlkit.algos.aggregation import agg_loss
from arlkit.config import ConfigError

__all__ = ["KL_KINDS", "ActorLoss", "combine_actor_loss", "entropy_from_logits", "kl_penalty"]

_BASE_KINDS: Final[tuple[str, ...]] = ("k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl")
KL_KINDS: Final[tuple[str, ...]] = _BASE_KINDS + tuple(f"{k}+" for k in _BASE_KINDS)
"""Every ``kind`` accepted by :func:`kl_penalty`."""

_LOG_RATIO_CLAMP: Final = 20.0
_K3_CLAMP: Final = 10.0


def _forward_kl(logprob: Tensor, ref_logprob: Tensor, kind: str) -> Tensor:
    x = ref_logprob - logprob
    if kind in ("k1", "kl"):
        return -x
    if kind == "abs":
        return x.abs()
    if kind in ("k2", "mse"):
        return 0.5 * x.square()
    if kind in ("k3", "low_var_kl"):
        x = x.clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
        return (torch.exp(x) - x - 1.0).clamp(-_K3_CLAMP, _K3_CLAMP)
    raise ConfigError(f"kl_penalty: {kind!r} is not one of {', '.join(KL_KINDS)}")


def kl_penalty(logprob: Tensor, ref_logprob: Tensor, kind: str) -> Tensor:
    """Per-token KL estimate between the current and the reference policy.

    Args:
        logprob: ``(B, L)`` log-probs of the sampled tokens under πθ.
        ref_logprob: ``(B, L)`` log-probs of the same tokens under πref.
        kind: one of :data:`KL_KINDS` (see the module docstring for each formula).

    Returns:
        ``(B, L)`` token KL estimates; aggregate them with :func:`~arlkit.algos.agg_loss`.
    """
    if kind.endswith("+"):
        forward = _forward_kl(logprob, ref_logprob, kind[:-1])
        k2 = 0.5 * (ref_logprob - logprob).square()
        return forward.detach() + (k2 - k2.detach())
    return _forward_kl(logprob, ref_logprob, kind)


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of the categorical distribution at each position: ``(B, L, V) -> (B, L)``.

    ``H = logsumexp(z) − Σ softmax(z)·z``, computed without forming log-softmax twice.
    """
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


class ActorLoss(NamedTuple):
    """The total actor loss and its parts."""

    loss: Tensor
    """Scalar: ``pg_loss − entropy_coeff·agg(H) + kl_coef·agg(k)``."""
    metrics: dict[str, Tensor]
    """Detached scalars: ``actor/pg_loss``, ``actor/entropy``, ``actor/kl_loss``."""


def combine_actor_loss(
    pg_loss: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str,
    *,
    entropy: Tensor | None = None,
    entropy_coeff: float = 0.0,
    kl: Tensor | None = None,
    kl_coef: float = 0.0,
    loss_scale_factor: float | None = None,
) -> ActorLoss:
    """Total actor loss ``pg_loss − entropy_coeff·agg(H) + kl_coef·agg(k)`` (docs/algorithms.md#kl-and-entropy).

    Args:
        pg_loss: scalar from :func:`~arlkit.algos.policy_loss`.
        response_mask: ``(B, L)`` 0/1 mask the entropy and KL terms are aggregated over.
        loss_agg_mode: aggregation mode for the entropy and KL terms (the run's mode).
        entropy: ``(B, L)`` token entropies under πθ, or None to skip the bonus.
        entropy_coeff: weight of the entropy bonus.
        kl: ``(B, L)`` token KL estimates from :func:`kl_penalty`, or None to skip the penalty.
        kl_coef: weight of the KL penalty.
        loss_scale_factor: ``L_max`` for ``seq-mean-token-sum-norm``.
    """
    loss = pg_loss
    metrics = {"actor/pg_loss": pg_loss.detach()}
    if entropy is not None:
        ent = agg_loss(entropy, response_mask, loss_agg_mode, loss_scale_factor=loss_scale_factor)
        loss = loss - entropy_coeff * ent
        metrics["actor/entropy"] = ent.detach()
    if kl is not None:
        kl_term = agg_loss(kl, response_mask, loss_agg_mode, loss_scale_factor=loss_scale_factor)
        loss = loss + kl_coef * kl_term
        metrics["actor/kl_loss"] = kl_term.detach()
    return ActorLoss(loss, metrics)
