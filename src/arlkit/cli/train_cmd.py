"""``arlkit train``: multi-turn RL from a YAML config (``key=value`` overrides after it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from arlkit.config import load_config, parse_key_values

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="multi-turn RL with any preset (GRPO, PPO, GiGPO, ...), full budget or BudgetMix",
        description="Train a policy with multi-turn RL. The config is a YAML serialisation of "
        "arlkit.train.TrainConfig; KEY=VALUE pairs override it (dotted keys for sections: optim.lr=3e-4, "
        "algo.kl_coef=0.02, env.args.size=5, prompt.history=0). A killed run continues with --resume.",
    )
    p.add_argument("--config", help="YAML config file (omit to use the defaults plus overrides)")
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its latest checkpoint (with the config it recorded, "
                        "unless --config is given; KEY=VALUE overrides apply on top)")
    p.add_argument("--force", action="store_true", help="resume even though the config changed (the differences are listed)")
    p.add_argument("--check", action="store_true", help="validate the config, print it whole and resolved, and exit")
    p.add_argument("--wandb", metavar="PROJECT", default=None,
                   help="also log to this Weights & Biases project (the wandb extra; WANDB_MODE=offline works)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from arlkit.recipes.rl import TrainConfig, check_train, train  # torch: only when the command runs

    config_file = args.config
    recorded = Path(args.out) / "config.yaml"
    if args.resume and config_file is None and recorded.is_file():
        config_file = str(recorded)  # the run folder holds the config it was started with
    overrides = [*args.overrides, *([f"wandb={args.wandb}"] if args.wandb else [])]
    config = load_config(TrainConfig, config_file, parse_key_values(overrides, option="override"))
    checked = check_train(config)
    if args.check:
        print(json.dumps(checked, indent=2, default=str))
        return 0
    result = train(config, args.out, resume=args.resume, force=args.force)
    where = f"resumed at step {result.resumed_from}; " if result.resumed_from is not None else ""
    print(f"trained {result.steps} steps ({where}run in {result.run}): metrics.jsonl, rollouts.jsonl, tb/, "
          f"checkpoints/, final model in {result.final_model}")
    return 0
