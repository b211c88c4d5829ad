"""``arlkit train``: multi-turn RL with any preset, read top to bottom (docs/algorithms.md; RT App. A, AA §3-5).

One step:

1. **Rollouts.** Sample ``tasks_per_step`` training tasks; each group gets one budget (T_max, a fixed
   budget, or a BudgetMix candidate drawn uniformly) and ``group_size`` trajectories run by the current
   policy through the rollout engine (announced budgets, BudgetMix groups of different budgets in one
   batch). With dynamic filtering, groups whose rewards are all equal are dropped and replaced.
2. **Rewards** (docs/algorithms.md#rewards): invalid-step penalties, outcome reward (0 on exhausted budgets).
3. **Rows** in the preset's layout (step rows or trajectory rows, :mod:`arlkit.train.batch`), split into
   ``mini_batches`` parts by trajectory. Old log-probs are taken now, with the weights that sampled
   (and, per part, the very computation the first update repeats, so on-policy ratios are exactly 1);
   reference log-probs (KL) and critic values (PPO) likewise.
4. **Advantages** by the preset's estimator over the whole batch.
5. **Updates**: ``epochs`` passes over the parts; each part is one AdamW step (gradient clipping, LR
   schedule) of policy loss + KL (+ entropy), and one critic step for PPO. How stale each update's data
   is (optimizer updates since the rollout) is logged.
6. **Log** ``metrics.jsonl`` / TensorBoard / progress bar; **validate** (R_multi, R_single) every
   ``validation.every`` steps; **checkpoint** atomically every ``checkpoint_every`` steps.

A run directory holds ``run.json`` (the config and what it resolved to), ``config.yaml``, ``metrics.jsonl``,
``rollouts.jsonl`` (per group: budget, announced counters, rewards; what ``arlkit budgetmix audit``
reads), ``dynamics_pool.json``, ``tb/``, ``checkpoints/`` and, at the end, ``final/`` (a model directory).
Runs are deterministic on CPU: a run killed at any moment and resumed gives the same metrics.
"""

from __future__ import annotations

import json
import math
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from arlkit.algos import (
    AdvantageInputs,
    combine_actor_loss,
    compute_advantage,
    compute_value_loss,
    filter_groups,
    kl_penalty,
    masked_mean,
    policy_loss,
    sequence_groups,
)
from arlkit.config import config_to_plain, flat_plain
from arlkit.envs import make
from arlkit.rollout import prompt_version, Trajectory, derive_seed, make_jobs, run_rollouts
from arlkit.train.batch import RowBatch, build_batch, pad_rows, score_trajectory
from arlkit.train.budgetmix import sample_group_budgets
from arlkit.rundir import atomic_write_text, check_run_dir, claim_run_dir, holds_run_dir
from arlkit.train.checkpoint import load_latest_checkpoint, save_checkpoint
from arlkit.train.checks import check_train_config
from arlkit.train.config import RUNTIME_FIELDS, TrainConfig
from arlkit.train.dynamics import build_state_pool, load_state_pool, r_multi, r_single, save_state_pool
from arlkit.train.forward import backward_rows, score_rows
from arlkit.train.learner import Learner
from arlkit.train.model import resolve_model_path, save_model_dir
from arlkit.train.tracking import MetricsLog, WandbRun, progress_bar

__all__ = ["TrainResult", "train"]


RUNTIME_KEYS = tuple(f"config.{name}" for name in RUNTIME_FIELDS)
"""Identity keys a resumed run may change (they do not change results)."""


@dataclass
class TrainResult:
    """What :func:`train` produced.

    Attributes:
        run: the run directory.
        steps: steps completed (the config's ``steps``).
        final_model: the trained model directory.
        last_metrics: the last step's metrics line.
        resumed_from: the step the run resumed from (None for a fresh run).
    """

    run: Path
    steps: int
    final_model: Path
    last_metrics: dict[str, Any]
    resumed_from: int | None


def _valid_format_tokens(trajectories: list[Trajectory]) -> float:
    """Share of reply tokens in replies of the valid format (strict tags and a parsed action; AA Fig. 2)."""
    turns = [x for t in trajectories for x in t.turns]
    total = sum(len(x.token_ids or []) for x in turns)
    good = sum(len(x.token_ids or []) for x in turns if x.strict_format and x.action is not None)
    return good / total if total else 0.0


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


@holds_run_dir("out")
def train(config: TrainConfig, out: str | Path, *, resume: bool = False, force: bool = False) -> TrainResult:
    """Run (or resume) one RL run into ``out`` (module docstring).

    Everything that can reject the config (fields, environment, model, run directory) is checked
    before anything is written to ``out``; ``run.json`` is written once the models are built, so a run
    refused or failed before that leaves ``out`` reusable by the corrected command.
    """
    out = Path(out)
    resolved = check_train_config(config)
    algo = resolved.algo
    identity = {"config": flat_plain(config), "t_max": resolved.t_max, "budgets": list(resolved.budgets),
                "algo": config_to_plain(algo), "prompt_version": prompt_version(config.prompt)}
    check_run_dir(out, identity, resume=resume, force=force, volatile=RUNTIME_KEYS, allowed=("base_model",))
    torch.manual_seed(config.seed)

    # -- environment, tasks, prompts ------------------------------------------------------------------
    def make_env() -> Any:
        return make(config.env.name, **config.env.args)

    train_tasks = make_env().tasks("train", config.train_tasks)
    prompt = config.prompt
    t_max = resolved.t_max

    # -- the learner: policy, reference, critic, optimizers, and the rollout policy on the same weights ----
    learner = Learner.build(config, algo, resolve_model_path(config.model, out))
    policy, o = learner.policy, config.optim

    val = config.validation
    val_tasks = make_env().tasks("test", val.tasks) if val.every else []
    resuming = claim_run_dir(out, identity, resume=resume, force=force, volatile=RUNTIME_KEYS, allowed=("base_model",),
                             merge=True).resumed
    atomic_write_text(out / "config.yaml", yaml.safe_dump(config_to_plain(config), sort_keys=False))

    # -- the R_single state pool: built once from the initial policy ------------------------------------
    pool_path = out / "dynamics_pool.json"
    pool = []
    if val.every and val.dynamics.states:
        if pool_path.exists():
            pool = load_state_pool(pool_path)
        else:
            pool_tasks = make_env().tasks("test", val.dynamics.pool_tasks)
            pool = build_state_pool(policy, make_env, pool_tasks, samples=val.dynamics.pool_samples, budget=t_max,
                                    prompt=prompt, states=val.dynamics.states, seed=config.seed,
                                    engine=config.engine)
            save_state_pool(pool, pool_path)

    # -- resume ---------------------------------------------------------------------------------------
    # The newest checkpoint that matches its manifest; corrupt newer ones are reported and set aside.
    start = 0
    found = load_latest_checkpoint(out) if resuming else None
    checkpoint: Path | None = None
    if found is not None:
        checkpoint, state = found
        learner.restore(checkpoint, state)
        start = int(state["step"])
    # Without a checkpoint everything is redone from step 0, so nothing of an earlier attempt is kept.
    wandb = (WandbRun(config.wandb, out, name=out.name, config=config_to_plain(config), job_type="train")
             if config.wandb else None)  # fmt: skip
    log = MetricsLog(out, resume_step=start if checkpoint is not None else None, tensorboard=config.tensorboard,
                     wandb=wandb)  # fmt: skip
    rollout_log = _RolloutLog(out / "rollouts.jsonl", keep_until=start if checkpoint is not None else None)

    def validate(step: int) -> dict[str, float]:
        policy.clear_cache()
        metrics = r_multi(policy, make_env, val_tasks, samples=val.samples, budget=t_max, prompt=prompt,
                          reward=config.reward, seed=config.seed, engine=config.engine)
        if pool:
            metrics |= r_single(policy, make_env, pool, actions=val.dynamics.actions, prompt=prompt, seed=config.seed)
        return metrics

    if val.every and start == 0:
        log.log(0, validate(0))

    # -- the loop ---------------------------------------------------------------------------------------
    last: dict[str, Any] = {}
    # The logs close however the loop ends (a failed step, a full disk), so nothing holds their files.
    with progress_bar(config.steps, start, config.progress) as update_bar, closing(log), closing(rollout_log):
        for step in range(start, config.steps):
            t_step = time.monotonic()
            metrics: dict[str, Any] = {}

            # 1. rollouts, one budget per group, with dynamic filtering when the preset asks for it
            policy.clear_cache()
            kept, attempt, dropped = _collect_groups(step, config, resolved.budgets, algo, train_tasks, make_env, policy,
                                                     rollout_log)
            trajectories = [t for trajs, _, _ in kept for t in trajs]
            outcomes = [o for _, outs, _ in kept for o in outs]
            metrics |= {
                "reward/score_mean": _mean([o.score for o in outcomes]),
                "reward/outcome_mean": _mean([o.outcome for o in outcomes]),
                "reward/success": _mean([float(t.success) for t in trajectories]),
                "reward/invalid_rate": _mean([float(f) for o in outcomes for f in o.invalid]),
                "reward/exhausted": _mean([float(o.exhausted) for o in outcomes]),
                "rollout/turns_mean": _mean([len(t.turns) for t in trajectories]),
                "rollout/reply_tokens_mean": _mean([len(x.token_ids or []) for t in trajectories for x in t.turns]),
                "rollout/valid_format_tokens": _valid_format_tokens(trajectories),
                "rollout/backend_errors": float(sum(t.error is not None for t in trajectories)),
                "budget/mean": _mean([float(b) for _, _, b in kept]),
                "filter/attempts": float(attempt),
                "filter/dropped_groups": float(dropped),
                "time/rollout_s": time.monotonic() - t_step,
            }

            # 2-3. rows in the preset's layout; mini-batch parts; old / reference log-probs and values
            t_update = time.monotonic()
            batch = build_batch(trajectories, outcomes, learner.chat, step_rows=algo.step_rows,
                                budget_anchors=config.budget == "budgetmix")
            metrics["rollout/rows"] = float(len(batch.rows))
            if not batch.rows:
                last = {**metrics, "time/step_s": time.monotonic() - t_step}
                log.log(step + 1, last)
                update_bar(step + 1, last)
                continue
            parts = _partition(batch, config.mini_batches, np.random.default_rng([config.seed, step, 99]))
            need_entropy = algo.adv_estimator == "empg"
            # With a single update per rollout batch the update's own forward, detached, is the old
            # log-prob (the same computation on the same weights), so no separate pass is needed.
            reuse_old = config.mini_batches == 1 and config.epochs == 1 and not need_entropy
            old, ref_lp, values, old_entropy = _scoring_passes(learner, batch, parts, reuse_old=reuse_old,
                                                               entropy=need_entropy)

            # 4. advantages over the whole batch
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
            metrics |= {k: float(v) for k, v in adv_out.metrics.items()}
            metrics["adv/abs_mean"] = float((advantages.abs() * batch.mask).sum() / batch.mask.sum().clamp(min=1))

            # 5. updates: epochs x mini-batches; staleness = optimizer updates since the rollout
            collected: dict[str, list[float]] = {}
            updates = 0
            for epoch in range(config.epochs):
                order = np.random.default_rng([config.seed, step, 100 + epoch]).permutation(len(parts))
                for p in order:
                    part = parts[int(p)]
                    step_metrics = _update(learner, algo, batch, part, advantages, returns,
                                           old=None if reuse_old else old, ref_lp=ref_lp, values=values,
                                           grad_clip=o.grad_clip, staleness=updates)  # fmt: skip
                    for key, value in step_metrics.items():
                        collected.setdefault(key, []).append(float(value))
                    updates += 1
            metrics |= {k: _mean(v) for k, v in collected.items()}
            metrics["update/staleness_max"] = max(collected.get("update/staleness", [0.0]))
            metrics["update/updates"] = float(updates)
            metrics["optim/lr"] = float(learner.scheduler.get_last_lr()[0])
            metrics["time/update_s"] = time.monotonic() - t_update

            # 6. validate, checkpoint, log
            done_steps = step + 1
            if val.every and (done_steps % val.every == 0 or done_steps == config.steps):
                t_val = time.monotonic()
                metrics |= validate(done_steps)
                metrics["time/validate_s"] = time.monotonic() - t_val
            metrics["time/step_s"] = time.monotonic() - t_step
            # The metrics line goes first: a kill before the checkpoint re-runs this step after a resume
            # (its line is then replaced); a kill after it finds the line already written.
            log.log(done_steps, metrics)
            update_bar(done_steps, metrics)
            last = metrics
            if done_steps % config.checkpoint_every == 0 or done_steps == config.steps:
                save_checkpoint(out, done_steps, learner.state(), keep=config.keep_checkpoints)

    final = save_model_dir(learner.model, learner.tokenizer, out / "final")
    return TrainResult(out, config.steps, final, last, start if checkpoint is not None else None)


def _collect_groups(step: int, config: TrainConfig, budgets: Any, algo: Any, tasks: list[Any], make_env: Any,
                    policy: Any, log: _RolloutLog) -> tuple[list[tuple[list[Any], list[Any], int]], int, int]:
    """One step's rollout groups: ``tasks_per_step`` tasks, each at one sampled budget, ``group_size``
    trajectories each, scored; with dynamic filtering, groups are drawn again until enough are kept.
    Every group goes to the rollout log. Returns the kept ``(trajectories, outcomes, budget)`` groups,
    the number of attempts and of dropped groups."""
    kept: list[tuple[list[Any], list[Any], int]] = []
    attempt, needed, dropped = 1, config.tasks_per_step, 0
    while True:
        rng = np.random.default_rng([config.seed, step, attempt])
        picks = rng.choice(len(tasks), size=needed, replace=needed > len(tasks))
        drawn = sample_group_budgets(budgets, needed, rng)
        jobs = [job for g, (i, budget) in enumerate(zip(picks, drawn, strict=True))
                for job in make_jobs([tasks[int(i)]], config.group_size, budget,
                                     derive_seed(config.seed, "rollout", step, attempt, g),
                                     group=f"s{step}a{attempt}g{g}")]  # fmt: skip
        trajectories = run_rollouts(make_env, jobs, policy, config.prompt, engine=config.engine,
                                    policy_name="policy", keep_prompts=True)  # fmt: skip
        groups = []
        for g, budget in enumerate(drawn):
            trajs = trajectories[g * config.group_size : (g + 1) * config.group_size]
            groups.append((trajs, [score_trajectory(t, config.reward) for t in trajs], budget))
        if not algo.dynamic_filtering:
            keep, done = [True] * len(groups), True
        else:
            decision = filter_groups([[o.score for o in outs] for _, outs, _ in groups],
                                     num_needed=config.tasks_per_step - len(kept), attempt=attempt,
                                     training_step=step, config=algo.filter_config)  # fmt: skip
            keep, done, dropped = list(decision.keep), decision.done, dropped + decision.num_dropped
        for group, k in zip(groups, keep, strict=True):
            log.write(step, attempt, group, k)
        kept += [group for group, k in zip(groups, keep, strict=True) if k]
        if done:
            return kept, attempt, dropped
        attempt, needed = attempt + 1, decision.num_to_resample


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


def _update(learner: Learner, algo: Any, batch: RowBatch, part: list[int], advantages: torch.Tensor,
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


def _announced(trajectory: Trajectory) -> list[list[int] | None]:
    """Per turn, the ``(total, completed, remaining)`` counters the prompt announced (the recorded
    remaining budget under the trajectory's budget), or None where it announced none (hidden mode)."""
    return [None if turn.remaining is None else [trajectory.budget, k, turn.remaining]
            for k, turn in enumerate(trajectory.turns)]


class _RolloutLog:
    """``rollouts.jsonl``: one line per sampled group (budget, announced counters, rewards), the
    evidence ``arlkit budgetmix audit`` checks. Lines of steps after a resumed checkpoint are dropped."""

    def __init__(self, path: Path, keep_until: int | None) -> None:
        self.path = path
        lines = []
        if keep_until is not None and path.exists():
            raw = path.read_text(encoding="utf-8")
            for line in raw.split("\n")[:-1] if not raw.endswith("\n") else raw.split("\n"):
                if line.strip() and json.loads(line)["step"] < keep_until:
                    lines.append(line + "\n")
        atomic_write_text(path, "".join(lines))
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, step: int, attempt: int, group: tuple[list[Any], list[Any], int], kept: bool) -> None:
        trajs, outcomes, budget = group
        self._file.write(json.dumps({
            "step": step, "attempt": attempt, "group": trajs[0].group if trajs else None,
            "task_id": trajs[0].task_id if trajs else None, "budget": budget, "kept": kept,
            "trajectories": [{
                "sample": t.sample, "budget": t.budget, "turns": len(t.turns), "success": t.success,
                "exhausted": o.exhausted, "outcome": o.outcome, "score": o.score,
                "announced": _announced(t),
            } for t, o in zip(trajs, outcomes, strict=True)],
        }) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
