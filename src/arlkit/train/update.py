"""The learning half of an RL step (docs/algorithms.md): the rollout batch's rows split into
``mini_batches`` parts by trajectory; old log-probs (and entropies where the estimator needs them),
reference log-probs and critic values taken before any update, with the weights that sampled;
advantages by the preset's estimator over the whole batch; then ``epochs`` passes over the parts, each
part one AdamW step of policy loss + KL (+ entropy) and, for PPO, one critic step. How stale each
update's data is (optimizer updates since the rollout) is logged."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch

from arlkit.algos import (
    ADV_ESTIMATORS,
    AdvantageInputs,
    AlgoConfig,
    combine_actor_loss,
    compute_advantage,
    compute_value_loss,
    kl_penalty,
    masked_mean,
    policy_loss,
    sequence_groups,
)
from arlkit.train.batch import RowBatch, pad_rows
from arlkit.train.config import TrainConfig
from arlkit.train.forward import backward_rows, score_rows
from arlkit.train.learner import Learner

__all__ = ["learn"]


def learn(learner: Learner, algo: AlgoConfig, batch: RowBatch, config: TrainConfig, step: int) -> dict[str, Any]:
    """Advantages and every update of one step's batch (module docstring); returns the step's
    advantage, loss and optimizer metrics."""
    start = time.monotonic()
    parts = _partition(batch, config.mini_batches, np.random.default_rng([config.seed, step, 99]))
    need_entropy = ADV_ESTIMATORS.get(algo.adv_estimator).flags.needs_entropy
    # With a single update per rollout batch the update's own forward, detached, is the old
    # log-prob (the same computation on the same weights), so no separate pass is needed.
    reuse_old = config.mini_batches == 1 and config.epochs == 1 and not need_entropy
    old, ref_lp, values, old_entropy = _scoring_passes(learner, batch, parts, reuse_old=reuse_old,
                                                       entropy=need_entropy)
    adv_out = compute_advantage(algo.adv_estimator, AdvantageInputs(
        response_mask=batch.mask,
        token_level_rewards=batch.reward_at,
        scores=batch.score,
        index=batch.group,
        traj_index=batch.traj if algo.step_rows else None,
        step_index=torch.tensor(batch.step),
        step_rewards=batch.step_reward,
        anchor_keys=batch.anchors,
        values=values if learner.critic is not None else None,
        old_entropy=old_entropy if need_entropy else None,
    ), algo.adv_config)
    advantages, returns = adv_out.advantages.float(), adv_out.returns.float()
    metrics: dict[str, Any] = {k: float(v) for k, v in adv_out.metrics.items()}
    metrics["adv/abs_mean"] = float((advantages.abs() * batch.mask).sum() / batch.mask.sum().clamp(min=1))

    collected: dict[str, list[float]] = {}
    updates = 0
    for epoch in range(config.epochs):
        order = np.random.default_rng([config.seed, step, 100 + epoch]).permutation(len(parts))
        for p in order:
            step_metrics = _update(learner, algo, batch, parts[int(p)], advantages, returns,
                                   old=None if reuse_old else old, ref_lp=ref_lp, values=values,
                                   grad_clip=config.optim.grad_clip, staleness=updates)  # fmt: skip
            for key, value in step_metrics.items():
                collected.setdefault(key, []).append(float(value))
            updates += 1
    metrics |= {k: float(np.mean(v)) for k, v in collected.items()}
    metrics["update/staleness_max"] = max(collected.get("update/staleness", [0.0]))
    metrics["update/updates"] = float(updates)
    metrics["optim/lr"] = float(learner.scheduler.get_last_lr()[0])
    metrics["time/update_s"] = time.monotonic() - start
    return metrics


def _scoring_passes(learner: Learner, batch: RowBatch, parts: list[list[int]], *, reuse_old: bool,
                    entropy: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Before the updates, without gradients: the old policy's log-probs (unless the update's own
    forward serves, ``reuse_old``) and entropies, the reference's log-probs and the critic's values,
    as ``(rows, width)`` tensors."""
    n, width, fwd = len(batch.rows), batch.width, learner.forward
    old, ref_lp, values, old_entropy = (torch.zeros(n, width) for _ in range(4))
    with torch.no_grad():
        for part in parts:
            rows = [batch.rows[i] for i in part]
            if not reuse_old:
                scored = score_rows(learner.lm, rows, entropy=entropy, **fwd)
                old[part] = pad_rows(scored.logprobs, width)
                if scored.entropy is not None:
                    old_entropy[part] = pad_rows(scored.entropy, width)
            if learner.use_kl:
                if learner.ref is not None:
                    ref_lp[part] = pad_rows(score_rows(learner.ref, rows, **fwd).logprobs, width)
                else:
                    with learner.model.disable_adapter():
                        ref_lp[part] = pad_rows(score_rows(learner.lm, rows, **fwd).logprobs, width)
            if learner.critic is not None:
                values[part] = pad_rows(learner.critic.values(rows, **fwd), width)
    return old, ref_lp, values, old_entropy


def _update(learner: Learner, algo: AlgoConfig, batch: RowBatch, part: list[int], advantages: torch.Tensor,
            returns: torch.Tensor, *, old: torch.Tensor | None, ref_lp: torch.Tensor, values: torch.Tensor,
            grad_clip: float, staleness: int) -> dict[str, Any]:
    """One optimizer update on the rows ``part``: the policy loss of the preset against the old
    log-probs (``old``; None: this forward's own, detached), plus KL and entropy terms, then the
    critic's value loss when there is one. Returns the update's metrics (``staleness``: optimizer
    updates since the rollout)."""
    width, clip = batch.width, grad_clip if grad_clip > 0 else math.inf
    rows = [batch.rows[i] for i in part]
    mask, adv = batch.mask[part, :width], advantages[part]
    # Entropies always: the loss uses them with an entropy bonus, the stability diagnostics always (detached).
    # Chunked backward: the loss is built on leaves holding this forward's values; backward_rows then
    # carries their gradients through the model one chunk at a time.
    chunked = learner.chunked_backward
    with torch.set_grad_enabled(not chunked):
        scored = score_rows(learner.lm, rows, entropy=True, entropy_grad=algo.entropy_coeff > 0, **learner.forward)
    logp = pad_rows(scored.logprobs, width)
    if chunked:
        logp.requires_grad_()
    old_lp = logp.detach() if old is None else old[part]
    pg = policy_loss(algo.policy_loss, old_lp, logp, adv, mask, algo.loss_agg_mode,
                     loss_scale_factor=algo.loss_scale_factor, config=algo.loss_config)
    kl = kl_penalty(logp, ref_lp[part], algo.kl_penalty) if learner.use_kl else None
    assert scored.entropy is not None
    ent = pad_rows(scored.entropy, width)
    if chunked and algo.entropy_coeff > 0:
        ent.requires_grad_()
    actor = combine_actor_loss(pg.loss, mask, algo.loss_agg_mode, entropy=ent if algo.entropy_coeff > 0 else None,
                               entropy_coeff=algo.entropy_coeff, kl=kl, kl_coef=algo.kl_coef,
                               loss_scale_factor=algo.loss_scale_factor)
    learner.optimizer.zero_grad(set_to_none=True)
    actor.loss.backward()
    if chunked:
        lengths = [len(lp) for lp in scored.logprobs]

        def per_row(grad: torch.Tensor) -> list[torch.Tensor]:
            return [g[:n] for g, n in zip(grad, lengths, strict=True)]

        backward_rows(learner.lm, rows, per_row(logp.grad), per_row(ent.grad) if ent.grad is not None else None,
                      **learner.forward)
    grad_norm = torch.nn.utils.clip_grad_norm_(learner.params, clip)
    learner.optimizer.step()
    learner.scheduler.step()
    metrics: dict[str, Any] = {**pg.metrics, **actor.metrics, "optim/grad_norm": grad_norm,
                               "update/staleness": torch.tensor(float(staleness)),
                               "actor/entropy_mean": masked_mean(ent.detach(), mask),
                               **sequence_groups(old_lp, logp, adv, mask, entropy=ent, kl=kl)}
    critic, critic_opt = learner.critic, learner.critic_opt
    if critic is not None and critic_opt is not None:
        vpreds = pad_rows(critic.values(rows, **learner.forward), width)
        vloss = compute_value_loss(vpreds, returns[part], values[part], mask, algo.cliprange_value, algo.loss_agg_mode,
                                   loss_scale_factor=algo.loss_scale_factor)
        critic_opt.zero_grad(set_to_none=True)
        vloss.loss.backward()
        torch.nn.utils.clip_grad_norm_(critic.parameters(), clip)
        critic_opt.step()
        metrics |= {**vloss.metrics, "critic/vf_loss": vloss.loss.detach()}
    return metrics


def _partition(batch: RowBatch, parts: int, rng: np.random.Generator) -> list[list[int]]:
    """Row indices of ``parts`` mini-batches, split by trajectory (all rows of a trajectory together)."""
    trajs = sorted(set(batch.traj))
    order = [trajs[i] for i in rng.permutation(len(trajs))]
    chunks = [c for c in np.array_split(np.array(order, dtype=np.int64), min(parts, len(order))) if len(c)]
    where: dict[int, int] = {int(t): k for k, chunk in enumerate(chunks) for t in chunk}
    out: list[list[int]] = [[] for _ in chunks]
    for i, t in enumerate(batch.traj):
        out[where[t]].append(i)
    return out
