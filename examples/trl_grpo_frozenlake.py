"""Train arlkit's nano model on FrozenLake with TRL's GRPOTrainer, on a CPU.

TRL drives the episodes through arlkit's environment (one ``act`` tool call per turn, one
announced budget per task drawn from ``--budgets``) and optimises GRPO on the episode reward
(FrozenLake: 1 at the goal, so its mean per step is the success rate at the row's budget). A few
steps on an untrained tiny model teach it little: this shows the path, not a result
(docs/integrations.md says what this path keeps and what it cannot).

Run: .venv/bin/python examples/trl_grpo_frozenlake.py --steps 20 --out runs/trl-frozenlake
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # TRL marks environment_factory experimental


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output folder (the model goes to OUT/model)")
    parser.add_argument("--model", default="", help="a Hugging Face model folder (default: build the nano model offline)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--budgets", default="4,8", help="turn budgets, one drawn per task (BudgetMix-style)")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from arlkit.integrations.trl import environment_factory, trl_dataset, use_tool_chat_template

    out = Path(args.out)
    torch.set_num_threads(1)
    model_dir = args.model
    if not model_dir:
        from arlkit.rollout.corpus import init_tiny_model

        model_dir = str(init_tiny_model("nano", out / "base", seed=0))
    env_args = {"size": 3, "slippery": False, "t_max": 8}
    tokenizer = use_tool_chat_template(AutoTokenizer.from_pretrained(model_dir))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    budgets = [int(b) for b in args.budgets.split(",")]
    dataset = trl_dataset("frozenlake", split="train", n=args.tasks, budget=budgets, **env_args)
    config = GRPOConfig(
        output_dir=str(out / "trl"), use_cpu=True, bf16=False, fp16=False, per_device_train_batch_size=4,
        num_generations=2, max_completion_length=48, max_tool_calling_iterations=max(budgets), max_steps=args.steps,
        learning_rate=1e-4, logging_steps=1, save_strategy="no", report_to="none", gradient_checkpointing=False,
        dataloader_num_workers=0, seed=0,
    )
    trainer = GRPOTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                          environment_factory=environment_factory("frozenlake", **env_args))
    start = time.perf_counter()
    trainer.train()
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    rewards = [h[k] for h in trainer.state.log_history for k in h if k.startswith("rewards/") and k.endswith("/mean")]
    print(f"trained {trainer.state.global_step} steps in {time.perf_counter() - start:.1f} s; "
          f"mean episode reward per step: {[round(r, 3) for r in rewards]}; model in {out / 'model'}")


if __name__ == "__main__":
    main()
