"""``arlkit sft``: behaviour cloning on expert demonstrations through the agent's own prompts."""

from __future__ import annotations

import argparse
import json

from arlkit.config import load_config, parse_key_values

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sft",
        help="behaviour cloning (the warm start before RL)",
        description="Collect demonstrations with an expert (oracle, noisy-oracle:EPS or hf:PATH) through the "
        "agent's prompts and fine-tune on the reply tokens only. The config is a YAML serialisation of "
        "arlkit.train.SFTConfig; KEY=VALUE pairs override it. Writes OUT/model, OUT/sft.json, OUT/metrics.jsonl.",
    )
    p.add_argument("--config", help="YAML config file (omit to use the defaults plus overrides)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--check", action="store_true",
                   help="validate the config (environment, budgets, model and expert paths), print it resolved, and exit")
    p.add_argument("--wandb", metavar="PROJECT", default=None,
                   help="also log to this Weights & Biases project (the wandb extra; WANDB_MODE=offline works)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from arlkit.recipes.sft import SFTConfig, check_sft, run_sft  # torch: only when the command runs

    config = load_config(SFTConfig, args.config, parse_key_values([*args.overrides, *([f"wandb={args.wandb}"] if args.wandb else [])], option="override"))
    if args.check:
        print(json.dumps(check_sft(config), indent=2))
        return 0
    result = run_sft(config, args.out)
    print(f"behaviour cloning: {result.kept}/{result.demonstrations} demonstrations kept ({result.rows} steps, "
          f"expert success {100 * result.demo_success:.1f}%), final loss {result.final_loss:.4f}, "
          f"{result.seconds:.0f}s; model in {result.model_dir}")
    return 0
