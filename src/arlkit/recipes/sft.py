"""Behaviour cloning (``arlkit sft``): the warm start of ARLArena's stable recipe (AA §3).

1. **Demonstrations.** An expert policy (the env oracle, a noisy oracle, or a model: ``hf:PATH``) plays
   training tasks through the very prompts the agent will see (same budget mode, history window and
   announced budgets). With ``relabel`` (default) every step's target is the oracle's optimal action
   for the announced remaining budget (states from the noisy expert, labels from the oracle); otherwise
   the expert's own reply is cloned. ``keep: success`` keeps only successful trajectories (ARLArena's
   self-bootstrapped variant with a model as the expert).
2. **Fine-tuning** on the reply tokens only: each row is the exact prompt plus the target reply; prompt
   and observation tokens are context, the loss is the mean negative log-likelihood of reply tokens.
3. Writes ``OUT/model`` (a loadable model directory, written atomically), ``OUT/sft.json`` (config and
   statistics) and ``OUT/metrics.jsonl``.
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

from arlkit.config import TRAIN_BUDGETS, ConfigError, config_to_plain, resolve_budget
from arlkit.envs import Oracle, make
from arlkit.policies import Reply, Request, make_policy
from arlkit.policies.scripted import format_reply, oracle_horizon
from arlkit.rollout import derive_seed, make_jobs, run_rollouts
from arlkit.rollout.records import Trajectory
from arlkit.train.batch import ChatTokens, trajectory_row
from arlkit.train.budgetmix import sample_group_budgets
from arlkit.train.checkpoint import atomic_write_text
from arlkit.train.checks import check_sft_config
from arlkit.train.config import SFTConfig
from arlkit.train.forward import TokenRow, resolve_precision, score_rows
from arlkit.train.model import load_model, resolve_model_path, save_model_dir
from arlkit.train.optim import adamw, lr_scheduler
from arlkit.train.tracking import MetricsLog, progress_bar

__all__ = ["SFTResult", "collect_demonstrations", "run_sft", "sft_rows"]


class _Labeler:
    """Wraps the expert: executes its replies, and records for every request the messages and (with
    ``relabel``) the oracle's optimal reply for the announced remaining budget."""

    def __init__(self, inner: Any, relabel: bool, think: str) -> None:
        self.inner, self.relabel, self.think = inner, relabel, think
        self.name = getattr(inner, "name", "expert")
        self.prompts: dict[tuple[int, int], Sequence[Any]] = {}
        self.labels: dict[tuple[int, int], str] = {}
        self.optimal: dict[tuple[int, int], set[str]] = {}

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        for request in requests:
            key = (request.seed, request.turn)
            self.prompts[key] = request.messages
            if self.relabel:
                env = request.env
                if not isinstance(env, Oracle):
                    raise ConfigError(f"relabel: the environment {getattr(env, 'name', '?')!r} has no oracle; set relabel: false")
                best = list(env.optimal_actions(oracle_horizon(request)))
                self.optimal[key] = {a.lower() for a in best}
                rng = np.random.default_rng([request.seed & 0xFFFFFFFFFFFF, request.turn, 7])
                self.labels[key] = format_reply(self.think, best[int(rng.integers(len(best)))])
        return list(self.inner.generate(requests))


@dataclass
class Demonstrations:
    """Collected demonstrations.

    Attributes:
        trajectories: every trajectory played (kept or not).
        kept: indices of the kept trajectories.
        prompts: the messages of each request, keyed by ``(policy seed, turn)``.
        targets: the target reply of each step, keyed likewise.
        optimal: the oracle's optimal actions (lower case) at each step (``relabel`` only).
    """

    trajectories: list[Trajectory]
    kept: list[int]
    prompts: dict[tuple[int, int], Sequence[Any]]
    targets: dict[tuple[int, int], str]
    optimal: dict[tuple[int, int], set[str]]


def collect_demonstrations(config: SFTConfig) -> Demonstrations:
    """Play the expert on the first ``config.tasks`` training tasks (module docstring, step 1)."""
    env = make(config.env.name, **config.env.args)
    budgets = resolve_budget(config.budget, int(env.t_max), TRAIN_BUDGETS)
    tasks = env.tasks("train", config.tasks)
    rng = np.random.default_rng([config.seed, 1729])
    per_task = sample_group_budgets(budgets, len(tasks), rng) if len(budgets) > 1 else [budgets[0]] * len(tasks)
    jobs = [
        job
        for i, (task, budget) in enumerate(zip(tasks, per_task, strict=True))
        for job in make_jobs([task], config.samples, budget, derive_seed(config.seed, "sft", i), group=f"sft:{i}")
    ]
    expert = make_policy(config.expert)
    labeler = _Labeler(expert, config.relabel, config.think)
    trajectories = run_rollouts(
        lambda: make(config.env.name, **config.env.args), jobs, labeler, config.prompt
    )
    kept = [i for i, t in enumerate(trajectories) if t.turns and (config.keep == "all" or t.success)]
    targets = labeler.labels if config.relabel else {
        (t.policy_seed, k): turn.reply for t in trajectories for k, turn in enumerate(t.turns)
    }
    return Demonstrations(trajectories, kept, labeler.prompts, targets, labeler.optimal)


def sft_rows(demos: Demonstrations, chat: ChatTokens, layout: str = "step") -> tuple[list[TokenRow], list[str]]:
    """Training rows and each row's system prompt (rows with the same one share a prefix in the forward
    pass). ``step``: one row per kept step, the exact prompt then the target reply (the only targets).
    ``trajectory``: one row per kept trajectory with the executed replies; the targets are the replies
    whose action was oracle-optimal (every reply when the demonstrations were not relabelled)."""
    rows, systems = [], []
    if layout == "trajectory":
        for i in demos.kept:
            trajectory = demos.trajectories[i]
            seed = trajectory.policy_seed
            n = len(trajectory.turns)
            if demos.optimal:
                wanted = [(turn.action or "").strip().lower() in demos.optimal.get((seed, k), set())
                          for k, turn in enumerate(trajectory.turns)]
            else:
                wanted = [True] * n
            if not any(wanted):
                continue
            row, _ = trajectory_row(chat, demos.prompts[(seed, 0)], [demos.prompts[(seed, k)] for k in range(1, n)],
                                    trajectory, replies=[chat.ids(t.reply) for t in trajectory.turns],
                                    targets_of=wanted)
            rows.append(row)
            systems.append(str(demos.prompts[(seed, 0)][0].get("content", "")))
        return rows, systems
    for i in demos.kept:
        trajectory = demos.trajectories[i]
        for turn in range(len(trajectory.turns)):
            key = (trajectory.policy_seed, turn)
            prompt = chat.prompt_ids(demos.prompts[key])
            target = chat.ids(demos.targets[key])
            ids = prompt + target
            rows.append(TokenRow(tuple(ids), tuple(range(len(prompt), len(ids)))))
            systems.append(str(demos.prompts[key][0].get("content", "")))
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


def run_sft(config: SFTConfig, out: str | Path, *, progress: bool = True) -> SFTResult:
    """Behaviour cloning into ``out`` (module docstring). The config, its environment, model and expert
    are checked (:func:`~arlkit.train.checks.check_sft_config`) before anything is written to ``out``."""
    out = Path(out)
    check_sft_config(config)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; choose a directory for --out")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    model_path = resolve_model_path(config.model, out)
    model, tokenizer = load_model(model_path, attn_implementation=config.attn_implementation)
    chat = ChatTokens(tokenizer)
    precision = resolve_precision(config.precision, next(model.parameters()).device)

    demos = collect_demonstrations(config)
    rows, systems = sft_rows(demos, chat, config.rows)
    if not rows:
        raise ConfigError("keep: no demonstration was kept (no successful trajectory?); use keep: all or more tasks")

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = adamw(params, config.optim)
    scheduler = lr_scheduler(optimizer, config.optim, config.steps)
    rng = np.random.default_rng([config.seed, 31337])
    epoch: list[list[int]] = []
    log = MetricsLog(out, resume_step=None, tensorboard=False)
    losses: list[float] = []
    start = time.monotonic()
    with progress_bar(config.steps, 0, progress, "sft") as update:
        for step in range(config.steps):
            if not epoch:
                epoch = _batches(systems, config.batch_rows, rng)
            batch = [rows[i] for i in epoch.pop()]
            scores = score_rows(model, batch, max_tokens=config.max_tokens, pad_id=chat.pad_id, precision=precision)
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
    summary = {"config": config_to_plain(config), "precision": precision,
               **{k: (str(v) if isinstance(v, Path) else v) for k, v in result.__dict__.items()}}
    atomic_write_text(out / "sft.json", json.dumps(summary, indent=2) + "\n")
    return result
