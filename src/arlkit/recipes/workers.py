"""Worker processes: RL runs, evaluations and analyses (jobs), run several at a time with their logs.

The demo and the arena (:mod:`arlkit.recipes.demo`, :mod:`arlkit.recipes.arena`) run their stages as
``python -m arlkit.recipes.workers KIND JSON`` processes (:func:`run_workers`): fresh interpreters, not
multiprocessing, so that the caller's ``__main__`` is never re-imported; one torch thread each
(:func:`quiet`). Every job resumes: a finished RL run or evaluation is reused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arlkit.config import EnvSpec
from arlkit.rollout.prompts import PromptConfig

__all__ = [
    "JOBS", "analysis_job", "eval_job", "evaluation_status", "exit_with_parent", "quiet", "run_workers", "train_job",
    "training_status",
]


def quiet() -> None:
    """One torch thread, no tokenizer threads, no Hugging Face progress bars or warnings (a job's process)."""
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()

def train_job(config: dict[str, Any], out: str) -> str:
    """One RL run (``arlkit train``'s config as a dict) into ``out``, resumed when it was started; its final model."""
    quiet()
    from arlkit.config import load_config
    from arlkit.recipes import train
    from arlkit.train import TrainConfig

    result = train(load_config(TrainConfig, None, config), out, resume=True)
    return str(result.final_model)


def eval_job(jobs: list[dict[str, Any]]) -> None:
    """Evaluations ``{policy, budget, tasks, samples, env, prompt, out}`` (optionally ``budgets``, ``seed``,
    ``max_new_tokens``, ``bootstrap``), one after the other."""
    quiet()
    os.environ["ARLKIT_HF_ATTN"] = "arlkit"  # fixed, not probed: measured fastest for these rollouts (docs/policies.md)
    from arlkit.recipes.eval import EvalConfig, run_eval
    from arlkit.policies import SamplingConfig

    for job in jobs:
        config = EvalConfig(env=EnvSpec(**job["env"]), policies=(job["policy"],), tasks=job["tasks"],
                            samples=job["samples"], budgets=tuple(job.get("budgets") or (job["budget"],)),
                            prompt=PromptConfig(**job["prompt"]), seed=job.get("seed", 2024),
                            sampling=SamplingConfig(temperature=1.0, max_new_tokens=job.get("max_new_tokens", 8)),
                            bootstrap=job.get("bootstrap", 200))
        run_eval(config, job["out"])


def analysis_job(kind: str, runs: list[str], base: str, rl: str, out: str, config: dict[str, Any]) -> None:
    """One step-level analysis (``steps`` or ``errors``) of Base vs Full into ``out``."""
    quiet()
    os.environ["ARLKIT_HF_ATTN"] = "arlkit"  # as in the evaluations
    from arlkit.analysis.errors import ErrorsConfig
    from arlkit.analysis.steps import StepsConfig
    from arlkit.envs.capabilities import MissingCapability
    from arlkit.recipes.analyze import analyze_errors, analyze_steps

    analyze, make_config = {"steps": (analyze_steps, StepsConfig), "errors": (analyze_errors, ErrorsConfig)}[kind]
    try:
        analyze(runs, base, rl, out=out, config=make_config(**config))  # type: ignore[operator]
    except MissingCapability:  # the analysis wrote <kind>.md / .json saying why; the summary reports it
        pass



def training_status(runs: dict[str, Path], steps: int) -> Callable[[], tuple[int, str]]:
    """A poll of the runs' ``metrics.jsonl`` (name -> run folder): steps done in all and each run's latest
    step and training success."""
    from arlkit.train import read_metrics

    def status() -> tuple[int, str]:
        done, parts = 0, []
        for method, run in runs.items():
            lines = [m for m in read_metrics(run / "metrics.jsonl") if "reward/success" in m]
            step = min(int(lines[-1]["step"]), steps) if lines else 0
            done += step
            parts.append(f"{method} {step}/{steps}" + (f" success {lines[-1]['reward/success']:.2f}" if lines else ""))
        return done, ", ".join(parts)

    return status


def evaluation_status(folders: list[Path]) -> Callable[[], tuple[int, str]]:
    """A poll of the evaluation folders: trajectories written (``trajectories.jsonl`` lines, read
    incrementally) and evaluations finished (``passkt.csv``)."""
    seen: dict[Path, tuple[int, int]] = {}  # trajectories.jsonl -> (bytes read, complete lines)

    def lines(path: Path) -> int:
        offset, count = seen.get(path, (0, 0))
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return 0
        if size < offset:  # rewritten (a resumed evaluation sets errored trajectories aside)
            offset, count = 0, 0
        with open(path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read(size - offset)
        seen[path] = (offset + len(chunk), count + chunk.count(b"\n"))
        return seen[path][1]

    def status() -> tuple[int, str]:
        done = sum(lines(folder / "trajectories.jsonl") for folder in folders)
        finished = sum((folder / "passkt.csv").is_file() for folder in folders)
        return done, f"{finished}/{len(folders)} evaluations"

    return status


def run_workers(jobs: list[tuple[str, str, dict[str, Any]]], workers: int, logs: Path,
                 poll: Callable[[], None] | None = None, poll_every: float = 1.0) -> None:
    """Run each job ``(name, kind, arguments)`` as ``python -m arlkit.recipes.workers KIND JSON`` in a fresh process,
    at most ``workers`` at a time, output in ``logs/NAME.log``; ``poll`` (a progress update) is called every
    ``poll_every`` seconds and once at the end. Fresh interpreters (not multiprocessing)
    so that the caller's ``__main__`` is never re-imported: ``run_demo`` works from any script. A failed
    job stops the others and raises with the end of its log; so does an interrupt."""
    import arlkit

    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    source = str(Path(arlkit.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH", "")) if p)
    queue = list(jobs)
    running: dict[str, tuple[subprocess.Popen[bytes], Any]] = {}
    last_poll = time.monotonic()
    try:
        while queue or running:
            while queue and len(running) < workers:
                name, kind, arguments = queue.pop(0)
                log = open(logs / f"{name}.log", "wb")  # noqa: SIM115 - closed when the process ends
                command = [sys.executable, "-m", "arlkit.recipes.workers", kind, json.dumps(arguments)]
                running[name] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env), log)
            time.sleep(0.2)
            for name, (process, log) in list(running.items()):
                if process.poll() is None:
                    continue
                log.close()
                del running[name]
                if process.returncode != 0:
                    tail = (logs / f"{name}.log").read_text(encoding="utf-8", errors="replace")[-2000:]
                    raise RuntimeError(f"job {name} failed (exit code {process.returncode}); the end of "
                                       f"{logs / (name + '.log')}:\n{tail}")
            if poll is not None and time.monotonic() - last_poll >= poll_every:
                poll()
                last_poll = time.monotonic()
        if poll is not None:
            poll()
    finally:
        for process, log in running.values():
            process.kill()
            process.wait()
            log.close()


def exit_with_parent(poll_every: float = 1.0) -> None:
    """End this process when the one that started it is gone (a daemon thread checks every
    ``poll_every`` seconds whether the process was handed to another parent). :func:`run_workers`
    kills its jobs when it stops in any way it can see; a parent killed outright (SIGKILL, say a
    test's timeout) cannot, and its jobs would otherwise run on, burning the CPU, for minutes. An
    RL job killed this way resumes from its last checkpoint; an evaluation reruns."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_every)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _worker(kind: str, arguments: str) -> int:
    """Entry point of one job (``python -m arlkit.recipes.workers train|eval|analysis JSON``); it ends
    with its parent (:func:`exit_with_parent`)."""
    exit_with_parent()
    job = JOBS[kind]
    job(**json.loads(arguments))
    return 0


JOBS: dict[str, Callable[..., Any]] = {"train": train_job, "eval": eval_job, "analysis": analysis_job}
"""The job kinds :func:`run_workers` starts, by name."""

if __name__ == "__main__":
    sys.exit(_worker(*sys.argv[1:3]))
