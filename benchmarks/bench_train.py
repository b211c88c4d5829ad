"""One multi-turn RL step: arlkit's trainer against TRL's GRPOTrainer driven through ``rollout_func``.

Both sides use the same tiny model, FrozenLake tasks, group size, number of tasks, turn budget, reply
length and sampling temperature, GRPO with a KL term to the reference, one update per rollout batch, and
one torch thread. Each side runs ``--steps`` steps; the first is a warm-up and the mean of the rest is
reported, with arlkit's rollout / update split.

- arlkit: ``arlkit.train.train`` with trajectory rows (RT's layout), full chat, counters after the
  observations (earlier messages never change, so rollouts reuse their KV caches), ``precision: auto``.
- TRL: ``GRPOTrainer`` with a ``rollout_func`` that plays the same episodes: per turn, one batched
  ``model.generate`` over the active trajectories (full chat re-encoded each turn, as a TRL user writes it);
  the completion is every reply plus the observations in between, with ``env_mask`` hiding observation
  tokens from the loss; the environment reward comes back as ``env_reward``.

TRL is optional (``pip install trl==1.16.*`` in a separate environment). Without it the TRL side is
skipped; ``--trl-python PATH`` runs the TRL side with another interpreter (``src/`` on its PYTHONPATH).
Usage: ``python benchmarks/bench_train.py [--model DIR] [--steps 3] [--tasks 8] [--group 8] [--budget 8]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV = {"size": 5, "t_max": 32, "success_rate": 0.8, "task_set": "budget_sensitive"}


def _model(args: argparse.Namespace, work: Path) -> Path:
    if args.model:
        return Path(args.model)
    from arlkit.rollout.corpus import init_tiny_model

    target = work / "nano"
    if not (target / "config.json").is_file():
        init_tiny_model("nano", target, seed=0, overwrite=True)
    return target


def run_arlkit(args: argparse.Namespace, model: Path, work: Path, precision: str) -> dict[str, float]:
    import torch

    torch.set_num_threads(1)
    from arlkit.config import load_config
    from arlkit.train import TrainConfig, read_metrics
    from arlkit.recipes import train

    out = work / f"arlkit-{precision}"
    config = load_config(TrainConfig, None, {
        "model": str(model), "env": {"name": "frozenlake", "args": ENV}, "train_tasks": 64, "steps": args.steps, "budget": str(args.budget),
        "tasks_per_step": args.tasks, "group_size": args.group, "prompt": {"history": None, "counters": "observation"},
        "sampling": {"temperature": 1.0, "max_new_tokens": args.reply_tokens}, "optim": {"lr": 1e-5},
        "algo": {"kl_coef": 0.01}, "validation": {"every": 0}, "model.precision": precision, "progress": False,
        "tensorboard": False, "checkpoint_every": 1000,
    })
    train(config, out)
    steps = read_metrics(out / "metrics.jsonl")[1:]  # drop the warm-up step
    mean = lambda key: sum(m[key] for m in steps) / len(steps)  # noqa: E731
    return {"step_s": mean("time/step_s"), "rollout_s": mean("time/rollout_s"), "update_s": mean("time/update_s"),
            "turns": mean("rollout/turns_mean")}


def run_trl(args: argparse.Namespace, model: Path, work: Path) -> dict[str, float]:
    import torch

    torch.set_num_threads(1)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from arlkit.envs import make
    from arlkit.rollout.prompts import PromptConfig, turn_messages

    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.padding_side = "left"
    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    policy.set_attn_implementation("sdpa")  # the faster of the two here (measured for rollouts)
    env0 = make("frozenlake", **ENV)
    tasks = env0.tasks("train", 64)
    prompt_cfg = PromptConfig("announced", None, "observation")

    def messages(env: Any, observations: list[str], replies: list[str]) -> list[dict[str, str]]:
        return turn_messages(env.name, *env.prompt_text(), budget=args.budget,
                             observations=observations, replies=replies, prompt=prompt_cfg)

    first_prompt = {}
    rows = []
    for task in tasks:
        env = make("frozenlake", **ENV)
        obs = env.reset(task, 0)
        text = tokenizer.apply_chat_template(messages(env, [obs], []), tokenize=False, add_generation_prompt=True)
        first_prompt[text] = task
        rows.append({"prompt": text})
    dataset = Dataset.from_list(rows)

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        # TRL's sampler already repeats each task num_generations times in the batch it passes (one group),
        # so the function plays one episode per prompt it receives.
        model_ = trainer.model
        episodes = []
        for k, prompt in enumerate(prompts):
            env = make("frozenlake", **ENV)
            obs = env.reset(first_prompt[prompt], 1000 + k)
            episodes.append({"env": env, "obs": [obs], "replies": [], "ids": [], "mask": [], "logp": [],
                             "done": False, "reward": 0.0, "prompt_ids": tokenizer(prompt, add_special_tokens=False)["input_ids"]})
        for turn in range(args.budget):
            active = [e for e in episodes if not e["done"]]
            if not active:
                break
            texts = [tokenizer.apply_chat_template(messages(e["env"], e["obs"], e["replies"]), tokenize=False,
                                                   add_generation_prompt=True) for e in active]
            batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                out = model_.generate(**batch, max_new_tokens=args.reply_tokens, do_sample=True, temperature=1.0,
                                      top_k=0, top_p=1.0, stop_strings=["</action>"], tokenizer=tokenizer,
                                      return_dict_in_generate=True, output_scores=True,
                                      pad_token_id=tokenizer.pad_token_id)
            new = out.sequences[:, batch["input_ids"].shape[1]:]
            scores = torch.stack(out.scores, dim=1).log_softmax(-1)
            for row, e in enumerate(active):
                ids = [int(t) for t in new[row] if int(t) != tokenizer.pad_token_id]
                logp = [float(scores[row, j, t]) for j, t in enumerate(ids)]
                reply = tokenizer.decode(ids, skip_special_tokens=True)
                parsed = e["env"].parse_action(reply)
                if parsed.action is not None:
                    result = e["env"].step(parsed.action)
                    observation, success, done = result.observation, result.success, result.done
                else:
                    observation, success, done = f"Invalid action.\n{e['env'].render()}", False, False
                e["replies"].append(reply)
                e["obs"].append(observation)
                e["ids"] += ids
                e["mask"] += [1] * len(ids)
                e["logp"] += logp
                if success:
                    e["reward"] = 1.0
                if done or turn + 1 == args.budget:
                    e["done"] = True
                else:  # the observation between this reply and the next, as the chat template renders it
                    head = tokenizer.apply_chat_template(messages(e["env"], e["obs"][:-1], e["replies"][:-1]),
                                                         tokenize=False, add_generation_prompt=True) + reply
                    full = tokenizer.apply_chat_template(messages(e["env"], e["obs"], e["replies"]), tokenize=False,
                                                         add_generation_prompt=True)
                    between = tokenizer(full[len(head):], add_special_tokens=False)["input_ids"]
                    e["ids"] += between
                    e["mask"] += [0] * len(between)
                    e["logp"] += [0.0] * len(between)
        return {"prompt_ids": [e["prompt_ids"] for e in episodes], "completion_ids": [e["ids"] for e in episodes],
                "logprobs": [e["logp"] for e in episodes], "env_mask": [e["mask"] for e in episodes],
                "env_reward": [e["reward"] for e in episodes]}

    def env_reward(completions: list[Any], env_reward: list[float], **kwargs: Any) -> list[float]:
        return env_reward

    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            times.append(time.perf_counter() - self.t0)

    n = args.tasks * args.group
    config = GRPOConfig(
        output_dir=str(work / "trl"), per_device_train_batch_size=n, gradient_accumulation_steps=1,
        num_generations=args.group, max_completion_length=args.budget * (args.reply_tokens + 60),
        learning_rate=1e-5, beta=0.01, num_iterations=1, max_steps=args.steps, logging_steps=1, report_to=[],
        use_cpu=True, bf16=False, save_strategy="no", temperature=1.0, seed=0, dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(model=policy, reward_funcs=[env_reward], args=config, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout_func, callbacks=[Timer()])
    trainer.train()
    rest = times[1:] or times
    return {"step_s": sum(rest) / len(rest)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model directory (default: build the nano model)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--reply-tokens", type=int, default=8)
    parser.add_argument("--trl-python", help="interpreter with trl installed, for the TRL side")
    parser.add_argument("--side", choices=["both", "arlkit", "trl"], default="both")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    work = Path(tempfile.mkdtemp(prefix="bench_train_"))
    model = _model(args, work)
    results: dict[str, Any] = {"setup": {k: getattr(args, k) for k in ("steps", "tasks", "group", "budget", "reply_tokens")}}
    if args.side in ("both", "arlkit"):
        for precision in ("auto",):  # auto = fp32 on CPU (bf16 measured slower there), bf16 on CUDA
            results[f"arlkit_{precision}"] = run_arlkit(args, model, work, precision)
            print(f"arlkit ({precision}): {json.dumps(results[f'arlkit_{precision}'])}", flush=True)
    if args.side in ("both", "trl"):
        if args.trl_python:
            out = work / "trl.json"
            cmd = [args.trl_python, __file__, "--side", "trl", "--model", str(model), "--json", str(out),
                   *[f"--{k.replace('_', '-')}={v}" for k, v in results["setup"].items()]]
            env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
            if subprocess.run(cmd, env=env, check=False).returncode == 0:
                results["trl"] = json.loads(out.read_text())["trl"]
        else:
            try:
                import trl  # noqa: F401
            except ImportError:
                print("TRL side skipped: trl is not installed (pip install 'trl==1.16.*', or pass --trl-python)")
            else:
                results["trl"] = run_trl(args, model, work)
        if "trl" in results:
            print(f"trl: {json.dumps(results['trl'])}", flush=True)
    if "trl" in results and "arlkit_auto" in results:
        for key in ("arlkit_auto",):
            ratio = results[key]["step_s"] / results["trl"]["step_s"]
            print(f"{key} step / TRL step = {ratio:.2f} (target <= 0.7)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
