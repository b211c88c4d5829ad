"""``arlkit demo``: RL at the full budget against BudgetMix on the embedded tiny model, compared across K and
T and below trajectory success, end to end on a CPU.

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
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from arlkit.config import ConfigError, config_to_plain
from arlkit.recipes.demo_outputs import (
    DemoTables, base_r_single, demo_findings, eval_folders, rl_runs, run_label, seed_caveat,
    write_tables,
)
from arlkit.recipes.readings import analysis_readings
from arlkit.recipes.demo_plan import DEMO_ENV, DemoPlan, demo_analysis_sizes, demo_plan
from arlkit.recipes.demo_summary import wall_time, write_summary
from arlkit.recipes.workers import evaluation_status, quiet, run_workers, training_status
from arlkit.rundir import atomic_write_json, atomic_write_text, claim_run_dir, holds_run_dir, run_record
from arlkit.train.tracking import progress_bar

__all__ = ["DEMO_ENV", "DemoPlan", "DemoResult", "demo_plan", "run_demo"]

Key = tuple[str, int | None]
"""A model of the demo: ``("Base", None)`` or ``(method, RL seed)``."""

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


def _claim(out: Path, plan: DemoPlan) -> None:
    """Record the plan in ``out/demo.json``; a directory holding a demo with another plan (say ``--quick``
    then the full demo) is refused rather than mixed (:func:`arlkit.rundir.claim_run_dir`). Only the RL
    seeds may change: each seed's runs and evaluations have their own folders, so a demo re-run with
    more seeds reuses its cloning and the seeds it has, and the tables pool the seeds now asked for."""
    identity = json.loads(json.dumps(asdict(plan)))
    if claim_run_dir(out, identity, record="demo.json", allowed=None, what="plan", volatile=("rl_seeds",)).resumed:
        atomic_write_json(out / "demo.json", run_record(identity))  # the seeds asked for now (a fresh claim wrote them)


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
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; give a folder (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)
    plan = plan or demo_plan(quick)
    _claim(out, plan)
    run = _DemoRun(out, plan, say, progress)
    base = run.build_model()
    stages.done("model")
    bc_model = run.clone(base)
    stages.done("bc")
    runs = run.train(bc_model)
    stages.done("rl")
    policies: dict[Key, Path] = {("Base", None): bc_model, **{key: r / "final" for key, r in runs.items()}}
    targets = run.evaluate(policies)
    stages.done("eval")
    analysis = run.analyse(policies, targets, quick)
    stages.done("analysis")
    tables, findings = run.report(runs)
    stages.done("report")
    seconds = stages.seconds
    write_summary(out, plan, tables, findings, analysis_readings(analysis), seconds, runs)
    atomic_write_text(out / "timing.json", json.dumps(seconds, indent=2) + "\n")
    say(final_message(out, seconds, findings, runs))
    return DemoResult(out, tables.rows, seconds)


@dataclass
class _DemoRun:
    """The demo's stages, each skipped where its outputs are on disk (a re-run resumes). Stages that run
    several jobs (RL runs, evaluations, analyses) run them on ``plan.workers`` processes, logging to ``logs/``."""

    out: Path
    plan: DemoPlan
    say: Callable[[str], None]
    progress: bool

    @property
    def logs(self) -> Path:
        logs = self.out / "logs"
        logs.mkdir(exist_ok=True)
        return logs

    def build_model(self) -> Path:
        """The nano model, built offline: a tokenizer trained on arlkit's prompts and random weights."""
        from arlkit.rollout.corpus import init_tiny_model

        base = self.out / "base_model"
        if not (base / "config.json").is_file():
            self.say("building the nano model offline (tokenizer + Qwen2-style LM, random weights)")
            init_tiny_model("nano", base, seed=0, overwrite=True)
        return base

    def clone(self, base: Path) -> Path:
        """Behaviour cloning from ``base``, alone on every core the plan's workers use; the cloned model."""
        import torch
        from arlkit.config import load_config
        from arlkit.recipes.sft import run_sft
        from arlkit.train import SFTConfig

        bc = self.out / "bc"
        if not (bc / "model" / "config.json").is_file():
            self.say(f"behaviour cloning: expert demonstrations on budget-fork FrozenLake, then "
                     f"{self.plan.sft['steps']} steps")
            torch.set_num_threads(self.plan.workers)
            try:
                config = load_config(SFTConfig, None, {**self.plan.overrides("sft"), "model": str(base)})
                sft = run_sft(config, bc, progress=self.progress)
            finally:
                torch.set_num_threads(1)
            self.say(f"  {sft.rows} demonstration steps, final loss {sft.final_loss:.3f}")
        return bc / "model"

    def train(self, bc_model: Path) -> dict[tuple[str, int], Path]:
        """RL at the full budget (Full) and with BudgetMix from ``bc_model``, once per RL seed; the run folders."""
        plan, runs = self.plan, rl_runs(self.out, self.plan)
        budgets = {"Full": "full", "BudgetMix": "budgetmix"}
        jobs = [(run.name, "train", {"config": {**plan.overrides("rl"), "model": str(bc_model),
                                                "budget": budgets[method], "seed": seed}, "out": str(run)})
                for (method, seed), run in runs.items() if not (run / "final" / "config.json").is_file()]
        if jobs:
            self.say(f"RL at the full budget (Full) and with BudgetMix from the BC checkpoint, {plan.rl['steps']} "
                     f"steps each, RL seeds {', '.join(map(str, plan.rl_seeds))}: {len(runs)} runs, {plan.workers} "
                     "at a time")
            status = training_status({run_label(*key): run for key, run in runs.items()}, plan.rl["steps"])
            with progress_bar(len(runs) * plan.rl["steps"], status()[0], self.progress, "RL", unit="steps") as update:
                run_workers(jobs, plan.workers, self.logs, poll=lambda: update(*status()))
        return runs

    def evaluate(self, policies: Mapping[Key, Path]) -> dict[tuple[Key, str], Path]:
        """Every model at every budget (announced) on the held-out maps; the evaluation folders."""
        plan, folders = self.plan, eval_folders(self.plan)
        targets = {(key, budget): self.out / "eval" / folders[key] / budget.rstrip("%")
                   for budget in plan.budgets for key in policies}
        evals = [{"policy": f"hf:{policies[key]}", "budget": budget, "tasks": plan.eval_tasks,
                  "samples": plan.eval_samples, "env": config_to_plain(plan.env), "prompt": config_to_plain(plan.prompt),
                  "out": str(target)}
                 for (key, budget), target in targets.items() if not (target / "passkt.csv").is_file()]
        if evals:
            self.say(f"evaluating Base and the {len(policies) - 1} RL models on {plan.eval_tasks} held-out maps x "
                     f"{plan.eval_samples} samples at {', '.join(plan.budgets)} of T_max (announced): {len(targets)} "
                     f"evaluations on {plan.workers} processes")
            status = evaluation_status(list(targets.values()))
            with progress_bar(len(targets) * plan.eval_tasks * plan.eval_samples, status()[0], self.progress,
                              "evaluation", unit="trajectories") as update:
                # one process per worker, each taking every workers-th evaluation (a process start costs ~4 s of imports)
                run_workers([(f"eval-{w}", "eval", {"jobs": evals[w :: plan.workers]}) for w in range(plan.workers)
                             if evals[w :: plan.workers]], plan.workers, self.logs, poll=lambda: update(*status()))
        return targets

    def analyse(self, policies: Mapping[Key, Path], targets: Mapping[tuple[Key, str], Path], quick: bool) -> Path:
        """Matched-state step quality and continuation from error states, Base vs the first seed's Full run
        on their T_max evaluations; the analysis folder."""
        plan, analysis, sizes = self.plan, self.out / "analysis", demo_analysis_sizes(quick)
        base, full = ("Base", None), ("Full", plan.rl_seeds[0])
        pair = [str(targets[(base, plan.budgets[-1])]), str(targets[(full, plan.budgets[-1])])]
        _stale_analysis(analysis, {"base": str(policies[base]), "rl": str(policies[full])})
        jobs = [(f"analysis-{kind}", "analysis", {"kind": kind, "runs": pair, "base": f"hf:{policies[base]}",
                                                  "rl": f"hf:{policies[full]}", "out": str(analysis),
                                                  "config": sizes[kind]})
                for kind in ("steps", "errors") if not (analysis / f"{kind}.md").is_file()]
        if jobs:
            self.say(f"step-level diagnostics of Base vs {run_label(*full)} at {plan.budgets[-1]} of T_max: "
                     "matched-state step quality and continuation from error states")

            def finished() -> tuple[int, str]:
                done = [kind for kind in ("steps", "errors") if (analysis / f"{kind}.md").is_file()]
                return len(done), ", ".join(done)

            with progress_bar(2, finished()[0], self.progress, "diagnostics", unit="analyses") as update:
                run_workers(jobs, plan.workers, self.logs, poll=lambda: update(*finished()))
        return analysis

    def report(self, runs: Mapping[tuple[str, int], Path]) -> tuple[DemoTables, list[str]]:
        """``table.csv``, the figures and ``report.html``; the tables and the findings."""
        from arlkit.report.html import write_html_report

        with progress_bar(2, 0, self.progress, "report", unit="parts") as update:
            tables = write_tables(self.out, self.plan, runs)
            update(1, "table.csv, passkt.png, training_dynamics.png")
            findings = demo_findings(tables.rows, tables.bound, base_r_single(runs))
            write_html_report([self.out], self.out / "report.html",
                              title="arlkit demo: RL at the full budget vs BudgetMix on the tiny model",
                              findings=[*findings, seed_caveat(self.plan.rl_seeds)],
                              names={folder: run_label(*key) for key, folder in eval_folders(self.plan).items()})
            update(2, "report.html")
        return tables, findings


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
