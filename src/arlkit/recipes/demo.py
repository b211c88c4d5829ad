"""``arlkit demo``: the seeds' central experiment on the embedded tiny model, end to end on a CPU.

1. Build the nano model offline (tokenizer trained on arlkit's own prompts, random weights).
2. Behaviour cloning on budget-fork FrozenLake training maps (oracle labels at the full budget, with a
   share of budget-aware ones), on every core the plan may use.
3. RL at the full budget (Full) and with BudgetMix from the same checkpoint (GRPO advantages with dynamic
   filtering, AA §5's ingredients), once per RL seed, with the same seeds and step counts (the two
   methods differ only in the budget distribution), two runs at a time.
4. Evaluate Base (the cloned model), Full and BudgetMix on held-out maps at 25/50/75/100% of T_max with
   announced budgets: Pass@k with 95% bootstrap CIs over tasks, and the paired BudgetMix - Full
   difference with its CI (RT Table 1's comparison); a method's runs are pooled (per map, the mean of
   their Pass@k), and each seed's numbers are reported too.
5. Below trajectory success, Base vs Full (the first RL seed's run) on their T_max evaluations: step
   quality at matched states and continuation from injected error states (:mod:`arlkit.recipes.analyze`),
   into ``analysis/``.
6. Write ``table.csv``, ``passkt.png`` (Pass@T and Pass@K), ``training_dynamics.png`` (R_multi, R_single
   and training reward over steps), ``report.html`` and ``summary.md`` (the four findings, MET or MISSED,
   first) (:mod:`arlkit.recipes.demo_outputs`, :mod:`arlkit.recipes.demo_summary`), next to one folder
   per stage.

Each stage shows one progress bar with its ETA (BC steps, the RL runs' steps, evaluation trajectories,
analyses, report parts); ``summary.md``'s wall-time line and the final message are the same line and
cover every stage.

Everything runs with one torch thread per process (tiny models gain little from a second thread, and
OpenMP threads degrade badly when the cores are shared); the RL runs, the evaluation jobs and the
two analyses use two processes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from arlkit.config import ConfigError, EnvSpec, config_to_plain
from arlkit.recipes.jobs import evaluation_status, quiet, run_workers, training_status
from arlkit.recipes.demo_outputs import (
    analysis_readings, base_r_single, demo_findings, eval_folders, rl_runs, run_label, seed_caveat, write_tables,
)
from arlkit.recipes.demo_summary import wall_time, write_summary
from arlkit.rollout.prompts import PromptConfig
from arlkit.rundir import atomic_write_json, atomic_write_text, claim_run_dir, holds_run_dir
from arlkit.train.tracking import progress_bar

__all__ = ["DEMO_ENV", "DemoPlan", "DemoResult", "demo_plan", "run_demo"]

DEMO_ENV: dict[str, Any] = {"size": 5, "t_max": 32, "success_rate": 0.8, "task_set": "budget_fork",
                            "headroom_threshold": 0.2}
"""The demo's task family: the shipped budget-fork 5x5 set (first-move gain >= 0.2 at 25% of T_max:
docs/concepts.md, "Budget headroom, budget-sensitive and budget-fork maps")."""

@dataclass(frozen=True)
class DemoPlan:
    """Sizes of one demo run.

    Attributes:
        sft: overrides of :class:`~arlkit.train.SFTConfig` (``env`` and ``prompt`` come from the plan's).
        rl: overrides of :class:`~arlkit.train.TrainConfig` shared by all RL runs (likewise).
        eval_tasks: held-out maps evaluated.
        eval_samples: trajectories per map and budget (n; Pass@k for k <= n).
        budgets: evaluation budgets (percentages of T_max, announced).
        workers: parallel processes.
        env: the environment of every stage (the budget-fork FrozenLake set).
        prompt: the prompts of every stage: cloning, RL and evaluation (announced budgets).
        rl_seeds: the RL seeds (``TrainConfig.seed``): Full and BudgetMix each train once per seed from
            the same base, and the tables pool a method's runs (docs/training.md, "The demo's recipe").
    """

    sft: dict[str, Any]
    rl: dict[str, Any]
    eval_tasks: int
    eval_samples: int
    budgets: tuple[str, ...] = ("25%", "50%", "75%", "100%")
    workers: int = 2
    env: EnvSpec = field(default_factory=lambda: EnvSpec("frozenlake", dict(DEMO_ENV)))
    prompt: PromptConfig = field(default_factory=lambda: PromptConfig("announced", history=0, profile="compact"))
    rl_seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        if not self.rl_seeds or len(set(self.rl_seeds)) != len(self.rl_seeds):
            raise ConfigError(f"rl_seeds must be non-empty and without repeats, got {list(self.rl_seeds)}")

    def overrides(self, stage: str) -> dict[str, Any]:
        """The config overrides of ``stage`` (``sft`` or ``rl``) with the plan's environment and prompts."""
        return {"env": config_to_plain(self.env), "prompt": config_to_plain(self.prompt), **getattr(self, stage)}


def demo_plan(quick: bool, rl_seeds: Sequence[int] | None = None) -> DemoPlan:
    """The full demo (11.5-12.5 minutes measured on a 2-core Intel Xeon, 13.3-14.2 on a 2-core AMD
    EPYC, both with AVX512 kernels; session 20's recipe took 30.3 on a slow CPU with AVX2 kernels:
    docs/training.md) or ``--quick`` (a smoke test); ``rl_seeds`` replaces the recipe's RL seeds
    (``arlkit demo --rl-seeds``: each seed adds a Full and a BudgetMix run and their evaluations, 7.5
    minutes measured on the AMD EPYC).

    The recipe (docs/training.md, "The demo's recipe", with what was tried and measured):

    - **Compact prompts** (``profile: compact``, ``history: 0``): the current map after one budget line
      (``turns remaining: 05 of 08``), ~58 tokens per step row instead of ~290, in every stage.
    - **Budget-fork maps**: each held-out and training map forks at the start between a short route
      beside holes and a safe detour; the full-budget oracle takes the detour, 25% of T_max leaves
      time only for the short route (first-move gain >= 0.2). Full RL never meets that first decision
      with a tight budget left; BudgetMix does. On the corner-to-corner budget-sensitive maps the
      budget-aware decisions were small and late, and BudgetMix never beat Full there.
    - **Cloning a mostly budget-unaware expert**: states from a noisy oracle playing BudgetMix budgets
      (so the model has seen every announced budget), labels from the oracle planning for T_max at
      every step (``label_horizon: t_max``) in 70% of the trajectories and from the budget-aware oracle
      in 30% (``aware_share: 0.3``): the base mostly plays the full-budget policy whatever the prompt
      announces, and takes the budget-aware first move often enough that BudgetMix's tight groups
      contain successes to learn from (with an unaware base they almost never did).
    - **Noisy labels, cloned well** (``label_noise: 0.1``, four demonstrations per map, 1250 steps at lr
      1e-3 with cosine decay, 3.7 passes over 21,840 rows): the base's mistakes are noise that RL can
      sharpen away. Passes over the 600 training maps set the base's optimal-action rate, not the number
      of demonstrations: 1.5 passes over eight demonstrations per map gave 0.76, 2.9 passes over four or
      eight 0.81-0.83, 3.7 passes 0.835, 4.4 passes 0.87, but the more the base plays, the less Full RL
      adds at T_max; lr 1.5e-3 and 2e-3 were worse, and 32-row batches too. Two torch threads for
      cloning, which runs alone (1.5x faster), and unshared forwards (``share_prefix: false``): a compact
      row shares only ~20 of its ~53 tokens with others, and the small forwards that sharing splits a
      batch into cost more than it saves (0.53 s instead of 0.79 s per 64-row step on the slow CPU).
    - **RL at lr 3e-4 with cosine decay** and a small KL (0.01) to the base: at a constant lr the BudgetMix
      run's reply format broke at step 29 of 30 (14% of its replies dropped the ``<think></think><action>``
      prefix; 16 points lost at T_max); with the decay it did not.
    - **GRPO with dynamic filtering, 45 steps** (AA §5; sessions 22-23): episode-level groups, all-equal
      groups resampled, one row per step. On the Intel machine, over RL seeds 0-2 from one base, it gave
      Full - Base +5.0 points at T_max and BudgetMix - Full +2.0 at 25% and -0.5 at T_max; GiGPO (gamma
      0.99, 30 steps, the recipe before) gave +4.5, +2.9 and -2.8 over seeds 0-3: its (state, remaining
      turns) anchors cover about half of BudgetMix's step rows and almost all of Full's. On an AMD
      machine's base (seeds 0+1) GRPO gave +6.0, +1.8 and -3.4: findings 2 and 4 sit within the
      seed-to-seed spread. ``--quick`` keeps GiGPO (a smoke run of every stage; its seeded tables are
      recorded).
    - **One RL seed per method** (seed 0): the 15-minute bound leaves room for one at most; the tables
      and ``summary.md`` say that their CIs do not cover the RL seed (``rl_seeds`` pools several when
      given; docs/training.md, "GRPO for 45 steps", has the seeds one by one)."""
    filtered = {"dynamic_filtering": True, "step_rows": True, "kl_coef": 0.01}  # every RL run's algorithm
    common_rl: dict[str, Any] = {
        "sampling": {"temperature": 1.0, "max_new_tokens": 8}, "train_tasks": 600, "progress": False,
        "optim": {"lr": 3e-4, "schedule": "cosine"}, "checkpoint_every": 5,
    }
    common_sft: dict[str, Any] = {"expert": "noisy-oracle:0.3", "relabel": True, "label_horizon": "t_max",
                                  "label_noise": 0.1, "aware_share": 0.3,
                                  "budget": "budgetmix", "tasks": 600, "samples": 4, "batch_rows": 64,
                                  "share_prefix": False,
                                  "optim": {"lr": 1e-3, "warmup_steps": 20, "schedule": "cosine"}}
    if quick:
        plan = DemoPlan(
            # enough cloning to learn the reply format (an unformatted model runs every turn of every budget)
            sft={**common_sft, "tasks": 48, "samples": 2, "steps": 60, "batch_rows": 32},
            rl={**common_rl, "algo": {"adv_estimator": "gigpo", **filtered}, "steps": 2, "tasks_per_step": 4,
                "group_size": 4, "checkpoint_every": 1,
                "validation": {"every": 1, "tasks": 4, "dynamics": {"states": 16, "actions": 2, "pool_tasks": 4,
                                                                   "pool_samples": 2}}},
            eval_tasks=8, eval_samples=8,
            rl_seeds=(0, 1),  # two seeds, so that the quick run covers the pooled tables too
        )
        return plan if rl_seeds is None else replace(plan, rl_seeds=tuple(rl_seeds))
    # Measured on the 2-core CPU: see docs/training.md, "The demo's recipe".
    eval_tasks = 100
    plan = DemoPlan(
        sft={**common_sft, "steps": 1250},
        # GRPO (episode-level groups) for 45 steps: docs/training.md, "GRPO for 45 steps"
        rl={**common_rl, "algo": {"adv_estimator": "grpo", **filtered}, "steps": 45, "tasks_per_step": 8,
            "group_size": 8,
            # R_multi on 64 maps x 2 samples: on 32 x 1 its sampling error (~7 points) hid a 6-point gain.
            # R_single's pool spans the 100 evaluation maps: finding 1 reads the base's step-0 value, and a
            # pool from the first 32 maps read 0.03-0.05 below one from 128 for two bases (session 21)
            "validation": {"every": 10, "tasks": 64, "samples": 2,
                           "dynamics": {"states": 512, "actions": 4, "pool_tasks": eval_tasks, "pool_samples": 2}}},
        eval_tasks=eval_tasks, eval_samples=8,
    )
    return plan if rl_seeds is None else replace(plan, rl_seeds=tuple(rl_seeds))


@dataclass
class DemoResult:
    """Where the demo wrote everything, and its headline numbers.

    Attributes:
        out: the demo directory.
        table: rows of ``table.csv``.
        seconds: wall time per stage.
    """

    out: Path
    table: list[dict[str, Any]]
    seconds: dict[str, float]


def demo_analysis_sizes(quick: bool) -> dict[str, dict[str, Any]]:
    """``StepsConfig`` and ``ErrorsConfig`` arguments of the demo's step-level analyses (Base vs Full on
    their T_max evaluations): seconds in ``--quick``, well under a minute on a 2-core CPU in the full demo."""
    if quick:
        return {"steps": {"states": 16, "actions": 2, "bootstrap": 200},
                "errors": {"states": 8, "actions": 2, "continuations": 1, "correction_states": 4,
                           "correction_actions": 1, "bootstrap": 200}}
    # Measured on the shared 2-core CPU with the quick demo's models (each analysis in its own process,
    # ~8 s of it imports and model loading): 40 states x 4 actions took 3.4 s, 20 error states with
    # 2 continuations each 7 s.
    return {"steps": {"states": 100, "actions": 4, "bootstrap": 1000},
            "errors": {"states": 48, "actions": 4, "continuations": 2, "correction_states": 20,
                       "correction_actions": 1, "bootstrap": 1000}}


def _claim(out: Path, plan: DemoPlan) -> None:
    """Record the plan in ``out/demo.json``; a directory holding a demo with another plan (say ``--quick``
    then the full demo) is refused rather than mixed (:func:`arlkit.rundir.claim_run_dir`). Only the RL
    seeds may change: each seed's runs and evaluations have their own folders, so a demo re-run with
    more seeds reuses its cloning and the seeds it has, and the tables pool the seeds now asked for."""
    identity = json.loads(json.dumps(asdict(plan)))
    if claim_run_dir(out, identity, record="demo.json", allowed=None, what="plan", volatile=("rl_seeds",)).resumed:
        atomic_write_json(out / "demo.json", identity)  # the seeds asked for now (a fresh claim wrote them)


def _stale_analysis(analysis: Path, compared: dict[str, str]) -> None:
    """Delete the step-level analyses in ``analysis`` unless they compared the models in ``compared``
    (``compared.json``; a re-run with other RL seeds may put another Full run first), then record it."""
    record = analysis / "compared.json"
    if not record.is_file() or json.loads(record.read_text(encoding="utf-8")) != compared:
        for kind in ("steps", "errors"):
            for stale in analysis.glob(f"{kind}.*"):
                stale.unlink()
    analysis.mkdir(parents=True, exist_ok=True)
    atomic_write_json(record, compared)


def _say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


class _Stages:
    """Wall time per stage, measured back to back from the clock's creation, so the stages add up to
    the whole run."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds: dict[str, float] = {}
        self._clock = clock
        self._last = clock()

    def done(self, stage: str) -> None:
        now = self._clock()
        self.seconds[stage] = now - self._last
        self._last = now


@holds_run_dir("out")
def run_demo(out: str | Path = "runs/demo", *, quick: bool = False, plan: DemoPlan | None = None,
             say: Callable[[str], None] = _say, progress: bool = True) -> DemoResult:
    """Run the whole demo into ``out`` (module docstring); a re-run resumes finished stages. ``say``
    receives the stage announcements and the final message; ``progress`` shows one progress bar per
    stage on stderr (:func:`arlkit.train.tracking.progress_bar`: sparse lines without a terminal)."""
    stages = _Stages()
    quiet()
    import torch
    from arlkit.rollout.corpus import init_tiny_model
    from arlkit.config import load_config
    from arlkit.recipes import run_sft
    from arlkit.train import SFTConfig

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; give a folder (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)
    plan = plan or demo_plan(quick)
    _claim(out, plan)
    logs = out / "logs"
    logs.mkdir(exist_ok=True)

    base = out / "base_model"
    if not (base / "config.json").is_file():
        say("building the nano model offline (tokenizer + Qwen2-style LM, random weights)")
        init_tiny_model("nano", base, seed=0, overwrite=True)
    stages.done("model")

    bc = out / "bc"
    if not (bc / "model" / "config.json").is_file():
        say(f"behaviour cloning: expert demonstrations on budget-fork FrozenLake, then {plan.sft['steps']} steps")
        torch.set_num_threads(plan.workers)  # cloning runs alone: it may use every core the plan's workers do
        try:
            sft = run_sft(load_config(SFTConfig, None, {**plan.overrides("sft"), "model": str(base)}), bc,
                          progress=progress)
        finally:
            torch.set_num_threads(1)
        say(f"  {sft.rows} demonstration steps, final loss {sft.final_loss:.3f}")
    stages.done("bc")

    runs = rl_runs(out, plan)
    budgets = {"Full": "full", "BudgetMix": "budgetmix"}
    train_jobs = [(run.name, "train", {"config": {**plan.overrides("rl"), "model": str(bc / "model"),
                                                  "budget": budgets[method], "seed": seed},
                                       "out": str(run)})
                  for (method, seed), run in runs.items() if not (run / "final" / "config.json").is_file()]
    if train_jobs:
        say(f"RL at the full budget (Full) and with BudgetMix from the BC checkpoint, {plan.rl['steps']} steps each, "
            f"RL seeds {', '.join(map(str, plan.rl_seeds))}: {len(runs)} runs, {plan.workers} at a time")
        status = training_status({run_label(*key): run for key, run in runs.items()}, plan.rl["steps"])
        with progress_bar(len(runs) * plan.rl["steps"], status()[0], progress, "RL", unit="steps") as update:
            run_workers(train_jobs, plan.workers, logs, poll=lambda: update(*status()))
    stages.done("rl")

    policies = {("Base", None): bc / "model", **{key: run / "final" for key, run in runs.items()}}
    folders = eval_folders(plan)
    targets = {(key, budget): out / "eval" / folders[key] / budget.rstrip("%")
               for budget in plan.budgets for key in policies}
    evals = [{"policy": f"hf:{policies[key]}", "budget": budget, "tasks": plan.eval_tasks,
              "samples": plan.eval_samples, "env": config_to_plain(plan.env), "prompt": config_to_plain(plan.prompt),
              "out": str(target)}
             for (key, budget), target in targets.items() if not (target / "passkt.csv").is_file()]
    if evals:
        say(f"evaluating Base and the {len(runs)} RL models on {plan.eval_tasks} held-out maps x {plan.eval_samples} "
            f"samples at {', '.join(plan.budgets)} of T_max (announced): {len(targets)} evaluations on "
            f"{plan.workers} processes")
        status = evaluation_status(list(targets.values()))
        with progress_bar(len(targets) * plan.eval_tasks * plan.eval_samples, status()[0], progress, "evaluation",
                          unit="trajectories") as update:
            # one process per worker, each taking every workers-th evaluation (a process start costs ~4 s of imports)
            run_workers([(f"eval-{w}", "eval", {"jobs": evals[w :: plan.workers]}) for w in range(plan.workers)
                          if evals[w :: plan.workers]], plan.workers, logs, poll=lambda: update(*status()))
    stages.done("eval")

    analysis = out / "analysis"
    sizes = demo_analysis_sizes(quick)
    full = ("Full", plan.rl_seeds[0])  # the step-level analyses compare Base with the first seed's Full run
    pair = [str(targets[(("Base", None), plan.budgets[-1])]), str(targets[(full, plan.budgets[-1])])]
    _stale_analysis(analysis, {"base": str(policies[("Base", None)]), "rl": str(policies[full])})
    analyses = [(f"analysis-{kind}", "analysis", {"kind": kind, "runs": pair, "base": f"hf:{policies[('Base', None)]}",
                                                  "rl": f"hf:{policies[full]}", "out": str(analysis),
                                                  "config": sizes[kind]})
                for kind in ("steps", "errors") if not (analysis / f"{kind}.md").is_file()]
    if analyses:
        say(f"step-level diagnostics of Base vs {run_label(*full)} at {plan.budgets[-1]} of T_max: matched-state step quality and "
            "continuation from error states")

        def finished() -> tuple[int, str]:
            done = [kind for kind in ("steps", "errors") if (analysis / f"{kind}.md").is_file()]
            return len(done), ", ".join(done)

        with progress_bar(2, finished()[0], progress, "diagnostics", unit="analyses") as update:
            run_workers(analyses, plan.workers, logs, poll=lambda: update(*finished()))
    stages.done("analysis")

    with progress_bar(2, 0, progress, "report", unit="parts") as update:
        tables = write_tables(out, plan, runs)
        update(1, "table.csv, passkt.png, training_dynamics.png")
        findings = demo_findings(tables.rows, tables.bound, base_r_single(runs))
        from arlkit.report.html import write_html_report

        write_html_report([out], out / "report.html", title="arlkit demo: RL at the full budget vs BudgetMix on the tiny model",
                          findings=[*findings, seed_caveat(plan.rl_seeds)],
                          names={folder: run_label(*key) for key, folder in eval_folders(plan).items()})
        update(2, "report.html")
    stages.done("report")
    seconds = stages.seconds
    write_summary(out, plan, tables, findings, analysis_readings(analysis), seconds, runs)
    atomic_write_text(out / "timing.json", json.dumps(seconds, indent=2) + "\n")
    say(final_message(out, seconds, findings, runs))
    return DemoResult(out, tables.rows, seconds)


def final_message(out: Path, seconds: dict[str, float], findings: list[str],
                  runs: Mapping[tuple[str, int], Path]) -> str:
    """The demo's last message: the wall time (the same line as ``summary.md``'s), the findings and the files."""
    folders = " ".join(f"{run.name}/" for run in runs.values())
    budgetmix = next(run for (method, _), run in runs.items() if method == "BudgetMix")
    several = len({seed for _, seed in runs}) > 1
    return "\n".join([
        f"demo finished in {wall_time(seconds)}; everything is in {out}/",
        *(f"  {line}" for line in findings),
        "  summary.md             the findings above, Pass@1 / Pass@8 per budget with 95% CIs, "
        + ("each RL seed, " if several else "") + "step-level readings",
        "  table.csv              the same numbers (every k" + (", each seed" if several else "")
        + ", and the paired differences)",
        "  passkt.png             Pass@T and Pass@K of Base, Full and BudgetMix",
        "  training_dynamics.png  R_multi, R_single and training success over the RL steps, one line per run",
        "  report.html            every evaluation, the diagnostics and the training curves in one page",
        "  analysis/              Base vs Full step by step: matched states (steps.*), error states (errors.*)",
        f"  bc/ {folders} eval/ logs/   the stages' run folders and the workers' logs",
        f"  check a BudgetMix run: arlkit budgetmix audit {budgetmix}",
    ])  # fmt: skip
