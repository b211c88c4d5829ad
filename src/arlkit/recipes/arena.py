"""``arlkit arena``: ARLArena's policy-optimisation comparison in one command (docs/arena.md; AA Table 3).

1. One behaviour-cloned checkpoint (or the given model as it is, with ``bc_steps = 0``).
2. Every variant trained from it with the same seeds, task pool, budget distribution, step count and
   sizes; variants differ only in their policy-optimisation choices (:data:`ARENA_VARIANTS`). Runs
   go in parallel processes (``workers``) and resume after a kill.
3. Every final model evaluated with Pass@(K,T) on the same held-out tasks and budgets.
4. ARLArena's stability verdict and collapse detector on every run
   (:mod:`arlkit.recipes.stability`), and ``arena.md`` / ``arena.csv``: per variant the success at
   T_max pooled over seeds with a bootstrap CI over tasks, the change vs GRPO in %, stable and
   collapsed seeds, and the stability metrics (mean final success variance, largest gradient norm,
   final KL to the reference).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from arlkit.config import ConfigError, EnvSpec, config_to_plain
from arlkit.envs import env_config
from arlkit.recipes.workers import evaluation_status, run_workers
from arlkit.rollout.prompts import PromptConfig
from arlkit.rollout.records import read_trajectories
from arlkit.rundir import claim_run_dir, holds_run_dir, read_complete_jsonl

__all__ = ["ARENA_ENV", "ARENA_VARIANTS", "DEFAULT_VARIANTS", "ArenaPlan", "ArenaRow", "arena_env", "arena_plan",
           "arena_prompt", "run_arena"]

ARENA_ENV: dict[str, Any] = {"size": 5, "t_max": 32, "success_rate": 0.8, "task_set": "budget_sensitive"}
"""FrozenLake's default testbed (without ``--env-arg``): the shipped budget-sensitive 5x5 maps, for which the
arena's cloning and RL sizes are chosen (70-turn 4x4 slippery episodes would take the tiny model hours)."""

ARENA_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "grpo": ("grpo", {}),
    "grpo-st": ("grpo", {"loss_agg_mode": "seq-mean-token-mean"}),
    "grpo-sm": ("grpo", {"sequence_mask": True}),
    "gspo": ("gspo", {}),
    "cispo": ("cispo", {}),
    "cispo-sm": ("cispo", {"sequence_mask": True}),
    "sapo": ("sapo", {}),
    "sapo-sm": ("sapo", {"sequence_mask": True}),
    "gigpo": ("gigpo", {}),
    "empg": ("empg", {}),
    "dapo-grpo": ("dapo", {}),
    "dapo-gigpo": ("gigpo", {"dynamic_filtering": True}),
    "sampo": ("sampo", {}),
}
"""Arena variant -> (preset, overrides): AA Table 3's methods (``-st``: seq-mean-token-mean
aggregation; ``-sm``: sequence masking; ``dapo-``: dynamic filtering)."""
DEFAULT_VARIANTS = ("grpo", "grpo-st", "gspo", "cispo", "cispo-sm", "sapo", "sapo-sm", "gigpo", "empg", "dapo-grpo",
                    "dapo-gigpo", "sampo")  # fmt: skip


@dataclass(frozen=True)
class ArenaPlan:
    """Everything the arena runs (module docstring).

    Attributes:
        env: the environment of every stage.
        variants: arena variants (keys of :data:`ARENA_VARIANTS`), GRPO first when present.
        seeds: training seeds; every variant runs each.
        model: the starting model (``tiny:nano`` is built offline).
        sft: :class:`~arlkit.train.SFTConfig` overrides of the cloning stage; ``{"steps": 0}`` skips it.
        rl: :class:`~arlkit.train.TrainConfig` overrides shared by every run (steps included).
        eval_tasks / eval_samples / budgets: the final evaluation (budgets as percentages of T_max).
        workers: parallel processes.
        prompt: the prompts of every stage.
    """

    env: EnvSpec
    variants: tuple[str, ...]
    seeds: tuple[int, ...]
    model: str
    sft: dict[str, Any]
    rl: dict[str, Any]
    eval_tasks: int
    eval_samples: int
    budgets: tuple[str, ...] = ("50%", "100%")
    workers: int = 2
    prompt: PromptConfig = field(default_factory=lambda: PromptConfig("announced", history=0, profile="compact"))

    def __post_init__(self) -> None:
        unknown = [v for v in self.variants if v not in ARENA_VARIANTS]
        if unknown or not self.variants:
            raise ConfigError(f"unknown arena variant(s) {', '.join(unknown) or '(none given)'}; valid choices: "
                              f"{', '.join(ARENA_VARIANTS)}")  # fmt: skip
        if len(set(self.variants)) != len(self.variants) or not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError("variants and seeds must be non-empty and without repeats")
        if self.workers < 1 or self.eval_tasks < 1 or self.eval_samples < 1:
            raise ConfigError("workers, eval_tasks and eval_samples must be >= 1")


def arena_env(name: str, options: Mapping[str, Any]) -> EnvSpec:
    """The environment every stage runs: ``name`` with ``options``, checked by its config (an unknown name
    or option is a :class:`~arlkit.config.ConfigError`); FrozenLake without options is :data:`ARENA_ENV`."""
    if name == "frozenlake" and not options:
        options = ARENA_ENV
    env_config(name, options)
    return EnvSpec(name, dict(options))


def arena_prompt(profile: Literal["compact", "rt"]) -> PromptConfig:
    """The prompts of every stage: announced budgets in profile ``compact`` (the tiny model's one-line budget
    statement, the current observation only) or ``rt`` (RT's system prompt, the first observation and the
    last (action, observation) pair)."""
    return PromptConfig("announced", history=0 if profile == "compact" else 1, profile=profile)


def arena_plan(
    env: EnvSpec, variants: Sequence[str] = DEFAULT_VARIANTS, *, seeds: Sequence[int] = (0, 1, 2), steps: int | None = None,
    quick: bool = False, model: str = "tiny:nano", workers: int = 2, bc_steps: int | None = None,
    budgets: Sequence[str] = ("50%", "100%"), eval_tasks: int | None = None, eval_samples: int | None = None,
    prompt: PromptConfig | None = None,
) -> ArenaPlan:
    """The arena's sizes: ``quick`` (<= 10 minutes on a 2-core CPU with the tiny model) or the full one.

    Both update in two mini-batches per rollout batch, so importance ratios leave 1 and the clipping
    choices act (with one update per batch every IS variant is GRPO); KL 0.01 to the BC checkpoint;
    one training row per environment step (AA's layout, and what GiGPO and EMPG need), so every
    variant sees the same rows.
    """
    rl: dict[str, Any] = {"train_tasks": 256, "tasks_per_step": 8, "group_size": 8, "mini_batches": 2, "steps": 60,
                          "sampling": {"temperature": 1.0, "max_new_tokens": 8}, "optim": {"lr": 3e-4},
                          "algo": {"kl_coef": 0.01, "step_rows": True}, "validation": {"every": 0}, "progress": False,
                          "tensorboard": False, "checkpoint_every": 10}  # fmt: skip
    sft: dict[str, Any] = {"expert": "noisy-oracle:0.3", "relabel": True, "tasks": 256, "samples": 4, "batch_rows": 64,
                           "steps": 300, "optim": {"lr": 1e-3, "warmup_steps": 20, "schedule": "cosine"}}  # fmt: skip
    default_tasks, default_samples = 50, 8
    if quick:
        rl |= {"train_tasks": 32, "tasks_per_step": 4, "group_size": 4, "steps": 4, "checkpoint_every": 2}
        sft |= {"tasks": 48, "samples": 2, "steps": 60, "batch_rows": 32}
        default_tasks, default_samples = 8, 4
    if steps is not None:
        rl["steps"] = steps
    if bc_steps is not None:
        sft["steps"] = bc_steps
    ordered = sorted(dict.fromkeys(variants), key=lambda v: v != "grpo")
    return ArenaPlan(env, tuple(ordered), tuple(seeds), model, sft, rl, eval_tasks if eval_tasks else default_tasks,
                     eval_samples if eval_samples else default_samples, tuple(budgets), workers=workers,
                     prompt=prompt or PromptConfig("announced", history=0, profile="compact"))  # fmt: skip


@dataclass(frozen=True)
class ArenaRow:
    """One line of ``arena.csv`` (module docstring); ``vs_grpo`` is NaN without a GRPO row."""

    variant: str
    preset: str
    seeds: int
    success: float
    low: float
    high: float
    vs_grpo: float
    stable: int
    collapsed: int
    final_var: float
    max_grad_norm: float
    final_kl: float


def _say(message: str) -> None:
    print(f"[arena] {message}", flush=True)


@holds_run_dir("out")
def run_arena(out: str | Path, plan: ArenaPlan, *, say: Callable[[str], None] = _say, progress: bool = True) -> list[ArenaRow]:
    """Run the whole arena into ``out`` (module docstring); a re-run resumes finished stages."""
    from arlkit.config import load_config
    from arlkit.metrics.bootstrap import bootstrap_mean
    from arlkit.recipes import run_sft
    from arlkit.recipes.stability import analyze_stability
    from arlkit.report.arena_files import write_arena
    from arlkit.train import SFTConfig
    from arlkit.train.tracking import progress_bar

    out = Path(out)
    shared = {"env": config_to_plain(plan.env), "prompt": config_to_plain(plan.prompt)}
    _check(plan, shared)
    claim_run_dir(out, json.loads(json.dumps(asdict(plan), default=str)), record="arena.json", allowed=None, what="arena")
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    model = plan.model
    if plan.sft.get("steps", 1) > 0:
        bc = out / "bc"
        if not (bc / "model" / "config.json").is_file():
            say(f"behaviour cloning {plan.model} for {plan.sft['steps']} steps (the checkpoint every variant starts from)")
            run_sft(load_config(SFTConfig, None, {**shared, **plan.sft, "model": plan.model}), bc, progress=progress)
        model = str(bc / "model")

    runs = {(v, s): out / "runs" / f"{v}-s{s}" for v in plan.variants for s in plan.seeds}
    jobs = []
    for (variant, seed), run in runs.items():
        if (run / "final" / "config.json").is_file():
            continue
        jobs.append((f"train-{run.name}", "train", {"config": _train_config(plan, shared, variant, seed, model), "out": str(run)}))
    if jobs:
        say(f"training {len(jobs)} runs ({len(plan.variants)} variants x {len(plan.seeds)} seeds, {plan.rl['steps']} "
            f"steps each) on {plan.workers} processes")  # fmt: skip
        total = len(runs) * plan.rl["steps"]

        def trained() -> tuple[int, str]:
            done = sum(min(len(read_complete_jsonl(r / "metrics.jsonl")), plan.rl["steps"]) for r in runs.values())
            return done, f"{sum((r / 'final' / 'config.json').is_file() for r in runs.values())}/{len(runs)} runs"

        with progress_bar(total, trained()[0], progress, "arena RL", unit="steps") as update:
            run_workers(jobs, plan.workers, logs, poll=lambda: update(*trained()))

    targets = {key: out / "eval" / run.name for key, run in runs.items()}
    evals = [{"policy": f"hf:{runs[key] / 'final'}", "budget": plan.budgets[-1], "budgets": list(plan.budgets),
              "tasks": plan.eval_tasks, "samples": plan.eval_samples, **shared, "out": str(target),
              "max_new_tokens": plan.rl.get("sampling", {}).get("max_new_tokens", 8)}
             for key, target in targets.items() if not (target / "passkt.csv").is_file()]  # fmt: skip
    if evals:
        say(f"evaluating {len(targets)} final models on {plan.eval_tasks} held-out tasks x {plan.eval_samples} samples "
            f"at {', '.join(plan.budgets)} of T_max")  # fmt: skip
        status = evaluation_status(list(targets.values()))
        with progress_bar(len(targets) * plan.eval_tasks * plan.eval_samples * len(plan.budgets), status()[0], progress,
                          "arena eval", unit="trajectories") as update:  # fmt: skip
            run_workers([(f"eval-{w}", "eval", {"jobs": evals[w :: plan.workers]}) for w in range(plan.workers)
                         if evals[w :: plan.workers]], plan.workers, logs, poll=lambda: update(*status()))  # fmt: skip

    verdicts = analyze_stability(list(runs.values()), out=out / "stability")
    by_run = {v.run: v for v in verdicts}
    rows: list[ArenaRow] = []
    for variant in plan.variants:
        keys = [(variant, s) for s in plan.seeds]
        t_max = _t_max_trajectories([targets[k] for k in keys])
        estimate = bootstrap_mean([float(np.mean(t_max[t])) for t in sorted(t_max)], resamples=1000, seed=0)
        mine = [by_run[runs[k].name] for k in keys]
        metrics = [read_complete_jsonl(runs[k] / "metrics.jsonl") for k in keys]
        grads = [float(r["optim/grad_norm"]) for m in metrics for r in m if "optim/grad_norm" in r]
        kls = [float(m[-1].get("actor/kl_loss", float("nan"))) for m in metrics if m]
        rows.append(ArenaRow(variant, ARENA_VARIANTS[variant][0], len(keys), estimate.value, estimate.low, estimate.high,
                             float("nan"), sum(v.stable for v in mine), sum(v.collapse is not None for v in mine),
                             float(np.mean([v.final_var for v in mine])), max(grads, default=float("nan")),
                             float(np.nanmean(kls)) if kls else float("nan")))  # fmt: skip
    grpo = next((r for r in rows if r.variant == "grpo"), None)
    if grpo is not None and grpo.success > 0:
        rows = [ArenaRow(**{**asdict(r), "vs_grpo": 100.0 * (r.success - grpo.success) / grpo.success}) for r in rows]
    write_arena(rows, out, plan)
    say(f"arena finished: {out / 'arena.md'}")
    return rows


def _train_config(plan: ArenaPlan, shared: dict[str, Any], variant: str, seed: int, model: str) -> dict[str, Any]:
    preset, extra = ARENA_VARIANTS[variant]
    return {**shared, **plan.rl, "model": model, "seed": seed,
            "algo": {**plan.rl.get("algo", {}), "preset": preset, **extra}}


def _check(plan: ArenaPlan, shared: dict[str, Any]) -> None:
    """Every stage's config, and the task pools, before anything runs (a ConfigError names the problem)."""
    from arlkit.config import load_config
    from arlkit.envs import make
    from arlkit.train import SFTConfig, TrainConfig, check_sft_config, check_train_config

    if plan.sft.get("steps", 1) > 0:
        check_sft_config(load_config(SFTConfig, None, {**shared, **plan.sft, "model": plan.model}))
    for variant in plan.variants:
        check_train_config(load_config(TrainConfig, None, _train_config(plan, shared, variant, plan.seeds[0], plan.model)))
    env = make(plan.env.name, **plan.env.args)
    try:
        env.tasks("train", int(plan.rl["train_tasks"]))
        env.tasks("test", plan.eval_tasks)
    except ValueError as exc:
        raise ConfigError(f"{plan.env.name}: {exc}") from None


def _t_max_trajectories(folders: Sequence[Path]) -> dict[str, list[float]]:
    """Per task, the success of the trajectories run at the largest budget of the evaluations."""
    records = [t for f in folders for t in read_trajectories(f / "trajectories.jsonl")]  # each trajectory once
    if not records:
        raise ValueError(f"no evaluated trajectories in {', '.join(map(str, folders))}")
    top = max(int(t.budget) for t in records)
    out: dict[str, list[float]] = {}
    for t in records:
        if int(t.budget) == top:
            out.setdefault(str(t.task_id), []).append(float(bool(t.success)))
    return out
