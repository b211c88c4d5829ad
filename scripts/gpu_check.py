"""GPU check of arlkit's own trainer and ``hf`` backend (run by ``scripts/gpu_check.sh``).

On one CUDA GPU, with only torch and transformers (and arlkit with its ``lora`` extra) installed, no vLLM
and no network: build the ``small`` model (~100M parameters) offline, then ``arlkit train`` a few GRPO
steps at the full budget, with BudgetMix, and with LoRA adapters (bf16 autocast, FrozenLake's
budget-fork maps, the demo's prompts), and ``arlkit eval`` the first one with the ``hf`` backend on the
GPU. Prints a timing table (step, rollout and update seconds, rollout turns/s and reply tokens/s, peak
GPU memory) and writes it to ``WORK/gpu_check.json``. Without a GPU (or with ``DEVICE=cpu``) the same
runs go on the CPU with the ``nano`` model and smaller batches: what ``make test`` runs
(tests/test_gpu_check.py).

It fails (exit 1) unless every step of every run logged a finite policy loss and gradient norm, every
run wrote a final model whose weights differ from the base model's (the LoRA run's merged adapters
included), and the evaluation finished every trajectory.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _metrics(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def _changed(base: Path, final: Path) -> bool:
    """Whether ``final`` holds a model whose weights differ from ``base``'s (LoRA runs save the merged model)."""
    from safetensors.torch import load_file

    if not (final / "model.safetensors").is_file():
        return False
    before, after = load_file(str(base / "model.safetensors")), load_file(str(final / "model.safetensors"))
    return before.keys() == after.keys() and any(not before[k].equal(after[k].to(before[k].dtype)) for k in before)


def _peak_memory_mib(torch: Any, cuda: bool) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**20 if cuda else None


def main(work: Path) -> int:
    if os.environ.get("DEVICE") == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch initialises CUDA
    import torch

    from arlkit.config import load_config
    from arlkit.recipes.eval import EvalConfig, run_eval
    from arlkit.recipes.rl import train
    from arlkit.rollout.corpus import init_tiny_model
    from arlkit.train import TrainConfig

    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if cuda else "CPU"
    size, steps, tasks_per_step, group = ("small", 3, 8, 8) if cuda else ("nano", 2, 2, 4)
    work.mkdir(parents=True, exist_ok=True)
    print(f"gpu_check: {device}; the {size} model; work folder {work}", flush=True)
    model = work / f"model-{size}"
    if not (model / "config.json").is_file():
        init_tiny_model(size, model, seed=0, overwrite=True)

    common = {"model": str(model), "steps": steps, "tasks_per_step": tasks_per_step, "group_size": group,
              "validation.every": 0, "checkpoint_every": steps, "progress": False}
    if not cuda:  # small random maps: an untrained model plays every turn of the budget
        common.update({"env.args.task_set": "random", "env.args.size": 4, "env.args.t_max": 8})
    runs = {"grpo-full": {"budget": "full"}, "grpo-budgetmix": {"budget": "budgetmix"},
            "grpo-lora": {"budget": "full", "lora.enabled": True, "optim.lr": 1e-4}}
    rows, failures = [], []
    for name, overrides in runs.items():
        config = load_config(TrainConfig, ROOT / "configs" / "grpo_frozenlake.yaml", {**common, **overrides})
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.monotonic()
        result = train(config, work / name, resume=(work / name / "run.json").is_file())
        wall = time.monotonic() - start
        lines = _metrics(work / name)
        finite = all(math.isfinite(m["actor/pg_loss"]) and math.isfinite(m["optim/grad_norm"]) for m in lines)
        if len(lines) != steps or not finite:
            failures.append(f"{name}: {len(lines)} of {steps} steps logged, finite losses: {finite}")
        if not _changed(model, result.final_model):
            failures.append(f"{name}: the final model in {result.final_model} is missing or equals the base model")
        trajectories = tasks_per_step * group
        turns = sum(m["rollout/turns_mean"] for m in lines) * trajectories
        tokens = sum(m["rollout/turns_mean"] * m["rollout/reply_tokens_mean"] for m in lines) * trajectories
        rollout_s = sum(m["time/rollout_s"] for m in lines)
        rows.append({"run": name, "steps": len(lines), "wall_s": wall,
                     "step_s": sum(m["time/step_s"] for m in lines) / max(len(lines), 1),
                     "rollout_s": rollout_s / max(len(lines), 1),
                     "update_s": sum(m["time/update_s"] for m in lines) / max(len(lines), 1),
                     "turns_per_s": turns / rollout_s if rollout_s else 0.0,
                     "tokens_per_s": tokens / rollout_s if rollout_s else 0.0,
                     "peak_mib": _peak_memory_mib(torch, cuda)})
        print(f"gpu_check: {name} done in {wall:.1f} s", flush=True)

    trained = work / "grpo-full" / "final"
    tasks, samples = (16, 4) if cuda else (2, 2)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.monotonic()
    evaluated = run_eval(EvalConfig(env=config.env, policies=(f"hf:{trained}",), tasks=tasks, samples=samples, budgets=("full",),
                                    bootstrap=100), work / "eval")
    wall = time.monotonic() - start
    done = evaluated.trajectories
    turns = sum(len(t.turns) for t in done)
    tokens = sum(len(turn.token_ids or ()) or (turn.usage or {}).get("completion_tokens", 0) for t in done for turn in t.turns)
    if len(done) != tasks * samples:
        failures.append(f"eval: {len(done)} of {tasks * samples} trajectories finished")
    rows.append({"run": "eval hf", "steps": len(done), "wall_s": wall, "step_s": None, "rollout_s": wall,
                 "update_s": None, "turns_per_s": turns / wall, "tokens_per_s": tokens / wall,
                 "peak_mib": _peak_memory_mib(torch, cuda)})

    def cell(value: Any, digits: int = 2) -> str:
        return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    print(f"\n| {device} | steps/trajectories | wall s | step s | rollout s | update s | turns/s | tokens/s | peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['steps']} | {cell(r['wall_s'], 1)} | {cell(r['step_s'])} | {cell(r['rollout_s'])} | "
              f"{cell(r['update_s'])} | {cell(r['turns_per_s'], 1)} | {cell(r['tokens_per_s'], 1)} | {cell(r['peak_mib'], 0)} |")
    (work / "gpu_check.json").write_text(json.dumps({"device": device, "model": size, "rows": rows,
                                                     "failures": failures}, indent=2), encoding="utf-8")
    for failure in failures:
        print(f"gpu_check: FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
