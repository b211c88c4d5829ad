"""Stability diagnostics of one update, from its tensors (docs/arena.md; AA §4.2, Fig. 3).

ARLArena explains training collapse by splitting each step's sequences into **eight groups**: the
sign of the sequence's advantage, whether its importance ratio is below 1, and whether its policy
entropy is below a threshold; and by each group's share of the KL divergence to the reference policy.
In collapsed runs the share of negative-advantage, low-ratio sequences grows abruptly.

:func:`sequence_groups` computes, for ``(B, L)`` tensors in verl's layout:

- the sequence advantage ``A_i = mean_t M·A`` (rows with ``A_i = 0``, e.g. GRPO groups whose rewards
  are all equal, belong to no group and are counted in ``stab/seq/zero_adv``);
- the sequence importance ratio ``s_i = exp(mean_t M·(log πθ − log πold))`` (GSPO's length-normalised
  ratio); "low" is ``s_i < 1``, so on-policy rows (ratio exactly 1) are "high";
- the sequence entropy ``H_i = mean_t M·H``; "low" is ``H_i < τ``, with τ given or, when not, the
  median of ``H_i`` over the batch's rows (ARLArena does not publish its threshold);
- the sequence KL ``K_i = Σ_t M·k`` of the per-token KL ``k`` to the reference (any estimator; AA
  uses k3).

It returns the share of rows in each group (``stab/seq/<group>``, over the rows with valid tokens)
and each group's share of ``Σ_i K_i`` (``stab/kl/<group>``; absent without a KL tensor, all 0 when
the total is 0), group names like ``neg_adv.low_ratio.high_ent``; the zero-advantage rows make up
the rest (``stab/seq/zero_adv``, ``stab/kl/zero_adv``), so each family sums to 1. The token-level out-of-range
fractions of AA Fig. 3(a, b) are the policy losses' ``actor/pg_clipfrac_low`` / ``_high``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from arlkit.algos.aggregation import masked_sum, row_mean

__all__ = ["GROUPS", "sequence_groups"]

GROUPS: tuple[str, ...] = tuple(
    f"{adv}_adv.{ratio}_ratio.{ent}_ent" for adv in ("neg", "pos") for ratio in ("low", "high") for ent in ("low", "high")
)
"""The eight group names, in a fixed order (advantage sign, then ratio, then entropy)."""


def sequence_groups(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    entropy: Tensor | None = None,
    kl: Tensor | None = None,
    entropy_threshold: float | None = None,
) -> dict[str, Tensor]:
    """The eight-group breakdown of one batch (module docstring); every input is ``(B, L)``."""
    mask = response_mask.bool()
    rows = mask.any(dim=-1)
    n_rows = rows.sum().clamp(min=1).to(torch.float32)
    adv = row_mean(advantages.float(), mask)
    log_ratio = row_mean((log_prob - old_log_prob).detach().float(), mask)
    out: dict[str, Tensor] = {"stab/seq/zero_adv": ((adv == 0) & rows).sum() / n_rows}
    if entropy is not None:
        ent = row_mean(entropy.detach().float(), mask)
        if entropy_threshold is None:
            threshold = ent[rows].median() if bool(rows.any()) else torch.zeros(())
        else:
            threshold = torch.tensor(float(entropy_threshold))
        low_ent = ent < threshold
        out["stab/entropy_threshold"] = threshold.float()
    else:
        low_ent = torch.zeros_like(rows)
    seq_kl = masked_sum(kl.detach().float(), mask, dim=-1) if kl is not None else None
    total_kl = seq_kl[rows].sum() if seq_kl is not None else None
    if seq_kl is not None and total_kl is not None:
        zero = rows & (adv == 0)
        out["stab/kl/zero_adv"] = seq_kl[zero].sum() / total_kl if float(total_kl) > 0 else torch.zeros(())
    for name in GROUPS:
        adv_part, ratio_part, ent_part = name.split(".")
        member = rows & (adv < 0 if adv_part == "neg_adv" else adv > 0)
        member &= log_ratio < 0 if ratio_part == "low_ratio" else log_ratio >= 0
        if entropy is not None:
            member &= low_ent if ent_part == "low_ent" else ~low_ent
        elif ent_part == "low_ent":
            member &= torch.zeros_like(member)  # without entropies every row counts as high-entropy
        out[f"stab/seq/{name}"] = member.sum() / n_rows
        if seq_kl is not None and total_kl is not None:
            share = seq_kl[member].sum() / total_kl if float(total_kl) > 0 else torch.zeros(())
            out[f"stab/kl/{name}"] = share
    return out
