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

import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from arlkit.config import config_to_plain
from arlkit.envs import Env, make
from arlkit.rollout import prompt_version
from arlkit.rundir import atomic_write_text, check_run_dir, claim_run_dir, holds_run_dir
from arlkit.train.batch import build_batch
from arlkit.train.checkpoint import load_latest_checkpoint, save_checkpoint
from arlkit.train.checks import check_train_config
from arlkit.train.config import RUNTIME_FIELDS, TrainConfig
from arlkit.train.groups import RolloutLog, collect_groups
from arlkit.train.learner import Learner
from arlkit.train.model import resolve_model_path, save_model_dir
from arlkit.train.tracking import MetricsLog, WandbRun, progress_bar
from arlkit.train.update import learn
from arlkit.train.validation import Validation

__all__ = ["TrainConfig", "TrainResult", "check_train", "train"]


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


def check_train(config: TrainConfig) -> dict[str, Any]:
    """Every check :func:`train` makes before writing to its folder, and the config whole with what it
    resolves to (the budgets in turns, T_max, the algorithm): what ``arlkit train --check`` prints."""
    resolved = check_train_config(config)
    return {"config": config_to_plain(config), "resolved": {
        "budgets": list(resolved.budgets), "t_max": resolved.t_max, "algo": resolved.algo.to_dict()}}  # fmt: skip


@holds_run_dir("out")
def train(config: TrainConfig, out: str | Path, *, resume: bool = False, force: bool = False) -> TrainResult:
    """Run (or resume) one RL run into ``out`` (module docstring).

    Everything that can reject the config (fields, environment, model, run directory) is checked
    before anything is written to ``out``; ``run.json`` is written once the models are built, so a run
    refused or failed before that leaves ``out`` reusable by the corrected command.
    """
    out = Path(out)
    resolved = check_train_config(config)
    algo, t_max = resolved.algo, resolved.t_max
    identity = {"config": config_to_plain(config), "t_max": t_max, "budgets": list(resolved.budgets),
                "algo": config_to_plain(algo), "prompt_version": prompt_version(config.prompt)}
    claim: dict[str, Any] = {"resume": resume, "force": force, "volatile": RUNTIME_KEYS, "allowed": ("base_model",)}
    check_run_dir(out, identity, **claim)
    torch.manual_seed(config.seed)

    def make_env() -> Env:
        return make(config.env.name, **config.env.args)

    train_tasks = make_env().tasks("train", config.train_tasks)
    learner = Learner.build(config, algo, resolve_model_path(config.model.path, out))
    validation = Validation(config, learner.policy, make_env, t_max)
    resuming = claim_run_dir(out, identity, **claim, merge=True).resumed
    atomic_write_text(out / "config.yaml", yaml.safe_dump(config_to_plain(config), sort_keys=False))
    validation.load_or_build_pool(out / "dynamics_pool.json")
    start = _resume(learner, out) if resuming else None
    wandb = (WandbRun(config.wandb, out, name=out.name, config=config_to_plain(config), job_type="train")
             if config.wandb else None)  # fmt: skip
    log = MetricsLog(out, resume_step=start, tensorboard=config.tensorboard, wandb=wandb)
    rollout_log = RolloutLog(out / "rollouts.jsonl", keep_until=start)
    if validation.every and start is None:
        log.log(0, validation(0))

    last: dict[str, Any] = {}
    # The logs close however the loop ends (a failed step, a full disk), so nothing holds their files.
    with progress_bar(config.steps, start or 0, config.progress) as update_bar, closing(log), closing(rollout_log):
        for step in range(start or 0, config.steps):
            t_step, done = time.monotonic(), step + 1
            learner.policy.clear_cache()
            groups = collect_groups(step, config, resolved.budgets, algo, train_tasks, make_env, learner.policy,
                                    rollout_log)
            metrics: dict[str, Any] = groups.metrics()
            batch = build_batch(groups.trajectories, groups.outcomes, learner.chat, step_rows=algo.step_rows,
                                budget_anchors=config.budget.is_budgetmix)
            metrics["rollout/rows"] = float(len(batch.rows))
            if batch.rows:
                metrics |= learn(learner, algo, batch, config, step)
            if batch.rows and validation.due(done):
                t_val = time.monotonic()
                metrics |= validation(done)
                metrics["time/validate_s"] = time.monotonic() - t_val
            metrics["time/step_s"] = time.monotonic() - t_step
            # The metrics line goes first: a kill before the checkpoint re-runs this step after a resume
            # (its line is then replaced); a kill after it finds the line already written.
            log.log(done, metrics)
            update_bar(done, metrics)
            last = metrics
            if batch.rows and (done % config.checkpoint_every == 0 or done == config.steps):
                save_checkpoint(out, done, learner.state(), keep=config.keep_checkpoints)

    final = save_model_dir(learner.model, learner.tokenizer, out / "final")
    return TrainResult(out, config.steps, final, last, start)


def _resume(learner: Learner, out: Path) -> int | None:
    """Restore the newest checkpoint that matches its manifest (corrupt newer ones are reported and set
    aside) and return its step; None when there is none, and then everything is redone from step 0."""
    found = load_latest_checkpoint(out)
    if found is None:
        return None
    checkpoint, state = found
    learner.restore(checkpoint, state)
    return int(state["step"])
