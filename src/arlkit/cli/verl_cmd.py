"""``arlkit verl``: training data for verl's trainer from arlkit's environments, played there by arlkit's
agent loop (docs/scale-out.md)."""

from __future__ import annotations

import argparse
import json

from arlkit.cli import UsageError

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("verl", help="verl training data (docs/scale-out.md)", description=__doc__)
    actions = p.add_subparsers(dest="verl_command", metavar="ACTION", parser_class=type(p))
    actions.required = True
    data = actions.add_parser(
        "data", help="write verl-format parquet rows, one per task group",
        description="One row per task group: the task, its seeds, its turn budget (one BudgetMix draw per group "
        "with --budget budgetmix) and the engine's first prompt. `arlkit budgetmix audit FILE` checks it.",
    )
    data.add_argument("--env", required=True, help="environment")
    data.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE", help="environment option")
    data.add_argument("--budget", default="budgetmix", help="full, budgetmix, a percentage (25%%) or turns")
    data.add_argument("--groups", type=int, default=256, help="rows (task groups)")
    data.add_argument("--tasks", type=int, default=100, help="draw tasks from the split's first N")
    data.add_argument("--split", default="train", choices=("train", "test"))
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--budget-mode", default="announced", choices=("announced", "hidden"))
    data.add_argument("--prompt-profile", default="rt", choices=("rt", "compact"))
    data.add_argument("--counters", default="system", choices=("system", "observation"),
                      help="where announced counters go (the trajectory layout needs observation with the rt profile)")
    data.add_argument("--history", type=int, default=None, metavar="H",
                      help="show only the last H (action, observation) pairs (default: the whole conversation)")
    data.add_argument("--layout", default="step", choices=("step", "trajectory"),
                      help="one verl output per step (v1 trainer; GiGPO/EMPG) or per trajectory")
    data.add_argument("--reward", action="append", default=[], metavar="KEY=VALUE",
                      help="reward setting: success_reward, invalid_action_penalty, strict_format")
    data.add_argument("--out", required=True, help="the parquet file to write")
    data.set_defaults(handler=_data)


def _data(args: argparse.Namespace) -> int:
    from arlkit.config import parse_key_values
    from arlkit.recipes.verl import write_verl_data

    try:
        data = write_verl_data(
            args.out, args.env, parse_key_values(args.env_arg, option="--env-arg"), budget=args.budget,
            groups=args.groups, tasks=args.tasks, split=args.split, seed=args.seed, budget_mode=args.budget_mode,
            history=args.history, counters=args.counters, profile=args.prompt_profile, layout=args.layout,
            reward=parse_key_values(args.reward, option="--reward"))  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {data.rows} rows to {data.out} (env {args.env} {json.dumps(data.env_args)}, budgets {data.budgets}, "
          f"{args.layout} layout)")
    print("verl overrides for arlkit's agent loop (docs/scale-out.md):")
    for line in data.overrides:
        print(f"  {line}")
    return 0
