"""Behaviour cloning (``arlkit sft``): the warm start of ARLArena's stable recipe (AA §3).

1. **Demonstrations.** An expert policy (the env oracle, a noisy oracle, or a model: ``hf:PATH``) plays
   training tasks through the very prompts the agent will see (same budget mode, history window and
   announced budgets); the trajectories keep the prompts the expert was shown. With ``relabel``
   (default) every step's target is the oracle's optimal action for the remaining budget the prompt
   announced (states from the noisy expert, rebuilt by replaying its actions; labels from the oracle);
   otherwise the expert's own reply is cloned. ``label_horizon: t_max`` labels with the oracle planning for
   the full budget at every step instead (a budget-unaware expert), except in an ``aware_share`` of the
   trajectories. ``keep: success`` keeps only successful trajectories (ARLArena's
   self-bootstrapped variant with a model as the expert).
2. **Fine-tuning** on the reply tokens only: each row is the exact prompt plus the target reply; prompt
   and observation tokens are context, the loss is the mean negative log-likelihood of reply tokens.
3. Writes ``OUT/run.json`` (the run's identity), ``OUT/model`` (a loadable model directory, written
   atomically), ``OUT/sft.json`` (config and statistics), ``OUT/metrics.jsonl`` and TensorBoard events in
   ``OUT/tb`` (``tensorboard: false`` turns them off); a checkpoint every
   ``checkpoint_every`` steps. Re-running the same command resumes an interrupted run from its last
   checkpoint (the result equals an uninterrupted run's) and returns a finished one as it is; a
   different config on the same ``OUT`` is refused (:mod:`arlkit.rundir`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arlkit.analysis.states import replay
from arlkit.config import ConfigError, config_to_plain
from arlkit.envs import ActionSpace, Oracle, Task, make
from arlkit.policies import Message, Request, make_policy
from arlkit.policies.scripted import format_reply, oracle_horizon, random_action
from arlkit.rollout import prompt_version, derive_seed, make_jobs, run_rollouts
from arlkit.rollout.records import Trajectory, TurnRecord
from arlkit.rundir import atomic_write_text, claim_run_dir, holds_run_dir
from arlkit.train.batch import ChatTokens, trajectory_row
from arlkit.train.budgetmix import sample_group_budgets
from arlkit.train.checkpoint import load_latest_checkpoint, restore_state, save_checkpoint
from arlkit.train.checks import check_sft_config
from arlkit.train.config import SFTConfig
from arlkit.train.forward import TokenRow, resolve_precision, score_rows
from arlkit.train.model import load_model, resolve_model_path, save_model_dir
from arlkit.train.optim import adamw, lr_scheduler
from arlkit.train.tracking import MetricsLog, WandbRun, progress_bar

__all__ = ["SFTConfig", "SFTResult", "check_sft", "collect_demonstrations", "run_sft", "sft_rows"]


@dataclass
class Demonstrations:
    """Collected demonstrations. The prompts are the trajectories' own (``TurnRecord.prompt``).

    Attributes:
        trajectories: every trajectory played (kept or not), with the prompts the expert was shown.
        kept: indices of the kept trajectories.
        targets: per trajectory, the target reply of each turn.
        optimal: per trajectory, the oracle's optimal actions (lower case) at each turn (``relabel``
            only; empty otherwise).
    """

    trajectories: list[Trajectory]
    kept: list[int]
    targets: list[list[str]]
    optimal: list[list[set[str]]]


def _oracle_labels(config: SFTConfig, tasks: Sequence[Task], trajectories: Sequence[Trajectory]
                   ) -> tuple[list[list[str]], list[list[set[str]]]]:
    """Per trajectory and turn, the oracle's reply and optimal actions in the state the turn started
    from, rebuilt by replaying the recorded actions (:func:`~arlkit.analysis.states.replay`), for the
    remaining budget the prompt announced (the oracle's horizon; T_max with ``label_horizon: t_max``, except in
    the ``aware_share`` of trajectories drawn per trajectory seed); the reply's action is drawn among
    the optimal ones by a generator seeded with (policy seed, turn)."""
    env = make(config.env.name, **config.env.args)
    assert isinstance(env, Oracle)  # checked before the rollouts
    by_id = {task.task_id: task for task in tasks}
    targets, optimal = [], []
    for trajectory in trajectories:
        labels, best_sets = [], []
        aware = config.label_horizon == "announced" or (
            config.aware_share > 0
            and np.random.default_rng([trajectory.policy_seed & 0xFFFFFFFFFFFF, 9]).random() < config.aware_share)
        for t in replay(env, by_id[trajectory.task_id], trajectory):
            turn = trajectory.turns[t]
            shown = turn.prompt.messages if turn.prompt is not None else ()
            request = Request(shown, trajectory.policy_seed, t, env, turn.remaining)
            horizon = oracle_horizon(request) if aware else int(env.t_max)
            best = list(env.optimal_actions(horizon))
            best_sets.append({a.lower() for a in best})
            rng = np.random.default_rng([request.seed & 0xFFFFFFFFFFFF, request.turn, 7])
            action = best[int(rng.integers(len(best)))]
            if config.label_noise > 0:
                noise = np.random.default_rng([request.seed & 0xFFFFFFFFFFFF, request.turn, 8])
                if noise.random() < config.label_noise:
                    action = random_action(request, noise)
            labels.append(format_reply(config.think, action))
        targets.append(labels)
        optimal.append(best_sets)
    return targets, optimal


def collect_demonstrations(config: SFTConfig) -> Demonstrations:
    """Play the expert on the first ``config.tasks`` training tasks (module docstring, step 1)."""
    env = make(config.env.name, **config.env.args)
    if config.relabel and not isinstance(env, Oracle):
        raise ConfigError(f"relabel: the environment {env.name!r} has no oracle; set relabel: false")
    if config.label_noise > 0 and not (config.relabel and isinstance(env, ActionSpace)):
        raise ConfigError("label_noise needs relabel: true and an environment with a finite action set")
    budgets = config.budget.turns(int(env.t_max))
    tasks = env.tasks("train", config.tasks)
    rng = np.random.default_rng([config.seed, 1729])
    per_task = sample_group_budgets(budgets, len(tasks), rng) if len(budgets) > 1 else [budgets[0]] * len(tasks)
    jobs = [
        job
        for i, (task, budget) in enumerate(zip(tasks, per_task, strict=True))
        for job in make_jobs([task], config.samples, budget, derive_seed(config.seed, "sft", i), group=f"sft:{i}")
    ]
    expert = make_policy(config.expert)
    trajectories = run_rollouts(
        lambda: make(config.env.name, **config.env.args), jobs, expert, config.prompt,
        policy_name=str(getattr(expert, "name", "expert")), keep_prompts=True,
    )
    kept = [i for i, t in enumerate(trajectories) if t.turns and (config.keep == "all" or t.success)]
    if config.relabel:
        targets, optimal = _oracle_labels(config, tasks, trajectories)
    else:
        targets, optimal = [[turn.reply for turn in t.turns] for t in trajectories], []
    return Demonstrations(trajectories, kept, targets, optimal)


def _shown(turn: TurnRecord) -> Sequence[Message]:
    """The messages the expert was shown before ``turn``."""
    assert turn.prompt is not None  # collect_demonstrations keeps the prompts
    return turn.prompt.messages


def sft_rows(demos: Demonstrations, chat: ChatTokens, layout: str = "step") -> tuple[list[TokenRow], list[str]]:
    """Training rows and each row's system prompt (rows with the same one share a prefix in the forward
    pass). ``step``: one row per kept step, the exact prompt then the target reply (the only targets).
    ``trajectory``: one row per kept trajectory with the executed replies; the targets are the replies
    whose action was oracle-optimal (every reply when the demonstrations were not relabelled)."""
    rows, systems = [], []
    if layout == "trajectory":
        for i in demos.kept:
            trajectory = demos.trajectories[i]
            if demos.optimal:
                wanted = [(turn.action or "").strip().lower() in best
                          for turn, best in zip(trajectory.turns, demos.optimal[i], strict=True)]
            else:
                wanted = [True] * len(trajectory.turns)
            if not any(wanted):
                continue
            row, _ = trajectory_row(chat, trajectory, replies=[chat.ids(t.reply) for t in trajectory.turns],
                                    targets_of=wanted)
            rows.append(row)
            systems.append(str(_shown(trajectory.turns[0])[0].get("content", "")))
        return rows, systems
    for i in demos.kept:
        for turn, target in zip(demos.trajectories[i].turns, demos.targets[i], strict=True):
            messages = _shown(turn)
            prompt = chat.prompt_ids(messages)
            ids = prompt + chat.ids(target)
            rows.append(TokenRow(tuple(ids), tuple(range(len(prompt), len(ids)))))
            systems.append(str(messages[0].get("content", "")))
    return rows, systems


def _batches(systems: Sequence[str], batch_rows: int, rng: np.random.Generator) -> list[list[int]]:
    """One epoch of batches: rows shuffled, then sorted by system prompt within windows of 8 batches,
    so a batch holds few distinct system prompts (each encoded once) while the epoch stays random."""
    order = rng.permutation(len(systems))
    window = 8 * batch_rows
    batches = []
    for start in range(0, len(order), window):
        part = sorted(order[start : start + window].tolist(), key=lambda i: systems[i])
        batches += [part[k : k + batch_rows] for k in range(0, len(part), batch_rows)]
    return [batches[i] for i in rng.permutation(len(batches)) if len(batches[i]) == batch_rows or len(batches) == 1]


@dataclass
class SFTResult:
    """What :func:`run_sft` produced.

    Attributes:
        model_dir: the fine-tuned model directory.
        demonstrations: trajectories played by the expert.
        kept: trajectories kept for training.
        rows: training rows (steps).
        demo_success: success rate of the expert's trajectories.
        final_loss: mean loss over the last 10% of steps.
        seconds: wall time of the fine-tuning.
    """

    model_dir: Path
    demonstrations: int
    kept: int
    rows: int
    demo_success: float
    final_loss: float
    seconds: float


def _finished(out: Path) -> SFTResult:
    """The result of the finished run in ``out`` (from its ``sft.json``)."""
    saved = json.loads((out / "sft.json").read_text(encoding="utf-8"))
    fields = {name: saved[name] for name in SFTResult.__dataclass_fields__}
    return SFTResult(**{**fields, "model_dir": Path(fields["model_dir"])})


def check_sft(config: SFTConfig) -> dict[str, Any]:
    """Every check :func:`run_sft` makes before writing to its folder (the environment, the budgets, the
    model and expert paths), and the run in short: what ``arlkit sft --check`` prints."""
    budgets = check_sft_config(config)
    return {"env": config.env.name, "model": config.model.path, "expert": config.expert, "budgets": list(budgets),
            "rows": config.rows}


@holds_run_dir("out")
def run_sft(config: SFTConfig, out: str | Path, *, progress: bool = True) -> SFTResult:
    """Behaviour cloning into ``out`` (module docstring). The config, its environment, model and expert
    are checked (:func:`~arlkit.train.checks.check_sft_config`) before anything is written to ``out``."""
    out = Path(out)
    check_sft_config(config)
    identity = {"config": config_to_plain(config), "prompt_version": prompt_version(config.prompt)}
    claim = claim_run_dir(out, identity, volatile=("config.checkpoint_every", "config.tensorboard", "config.wandb"), allowed=("base_model",))
    if claim.resumed and (out / "sft.json").is_file() and (out / "model" / "config.json").is_file():
        return _finished(out)  # the same command again: the run is done
    torch.manual_seed(config.seed)
    model_path = resolve_model_path(config.model.path, out)
    model, tokenizer = load_model(model_path, attn_implementation=config.model.attn_implementation)
    chat = ChatTokens(tokenizer)
    precision = resolve_precision(config.model.precision, next(model.parameters()).device)

    demos = collect_demonstrations(config)  # seeded: a resumed run collects the same ones
    rows, systems = sft_rows(demos, chat, config.rows)
    if not rows:
        raise ConfigError("keep: no demonstration was kept (no successful trajectory?); use keep: all or more tasks")

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = adamw(params, config.optim)
    scheduler = lr_scheduler(optimizer, config.optim, config.steps)
    rng = np.random.default_rng([config.seed, 31337])
    epoch: list[list[int]] = []
    losses: list[float] = []
    first = 0
    found = load_latest_checkpoint(out) if claim.resumed else None
    if found is not None:  # an interrupted run: continue exactly where its last checkpoint left off
        checkpoint, state = found
        restore_state(checkpoint, state, {"model": model, "optimizer": optimizer, "scheduler": scheduler})
        rng.bit_generator.state = state["batch_rng"]
        epoch, losses, first = [list(b) for b in state["epoch"]], list(state["losses"]), int(state["step"])
    plain = config_to_plain(config)  # the whole config, for wandb and sft.json (the identity leaves late defaults out)
    wandb = WandbRun(config.wandb, out, name=out.name, config=plain, job_type="sft") if config.wandb else None
    log = MetricsLog(out, resume_step=first if found is not None else None, tensorboard=config.tensorboard,
                     wandb=wandb)
    start = time.monotonic()
    with progress_bar(config.steps, first, progress, "sft") as update:
        for step in range(first, config.steps):
            if not epoch:
                epoch = _batches(systems, config.batch_rows, rng)
            batch = [rows[i] for i in epoch.pop()]
            scores = score_rows(model, batch, max_tokens=config.model.max_tokens, pad_id=chat.pad_id, precision=precision,
                                share_prefix=config.model.share_prefix)
            logp = torch.cat(scores.logprobs)
            loss = -logp.mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, config.optim.grad_clip if config.optim.grad_clip > 0 else math.inf)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            metrics = {"sft/loss": losses[-1], "sft/grad_norm": float(grad_norm), "sft/lr": scheduler.get_last_lr()[0],
                       "sft/token_accuracy": float((logp > math.log(0.5)).float().mean())}
            log.log(step + 1, metrics)
            update(step + 1, metrics)
            if (step + 1) % config.checkpoint_every == 0 and step + 1 < config.steps:
                save_checkpoint(out, step + 1, {
                    "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "batch_rng": rng.bit_generator.state,
                    "epoch": epoch, "losses": losses,
                })  # fmt: skip
    seconds = time.monotonic() - start
    log.close()
    model_dir = save_model_dir(model, tokenizer, out / "model")
    tail = losses[-max(1, len(losses) // 10) :]
    result = SFTResult(
        model_dir=model_dir,
        demonstrations=len(demos.trajectories),
        kept=len(demos.kept),
        rows=len(rows),
        demo_success=float(np.mean([t.success for t in demos.trajectories])) if demos.trajectories else 0.0,
        final_loss=float(np.mean(tail)) if tail else float("nan"),
        seconds=seconds,
    )
    summary = {"config": plain, "precision": precision,
               **{k: (str(v) if isinstance(v, Path) else v) for k, v in result.__dict__.items()}}
    atomic_write_text(out / "sft.json", json.dumps(summary, indent=2) + "\n")
    return result
