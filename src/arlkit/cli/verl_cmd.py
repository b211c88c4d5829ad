"""``arlkit verl``: training data for verl's trainer from arlkit's environments, played there by arlkit's
agent loop (docs/scale-out.md)."""

from __future__ import annotations

import argparse
import importlib.util
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
    from arlkit.algos import RewardConfig
    from arlkit.budgets import TRAIN_BUDGETS, check_budget
    from arlkit.config import ConfigError, build_config, parse_key_values
    from arlkit.envs import list_envs
    from arlkit.envs.registry import env_config
    from arlkit.rollout.prompts import PromptConfig

    if args.env not in list_envs():
        raise UsageError(f"unknown environment {args.env!r}; valid choices: {', '.join(list_envs())}")
    try:
        check_budget(args.budget, TRAIN_BUDGETS)
        overrides = parse_key_values(args.env_arg, option="--env-arg")
        typed = env_config(args.env, overrides)
        reward = build_config(RewardConfig, parse_key_values(args.reward, option="--reward"), where="--reward")
        prompt = PromptConfig(args.budget_mode, args.history, args.counters, args.prompt_profile)
    except (ConfigError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    env_args = {k: getattr(typed, k) for k in overrides}
    if importlib.util.find_spec("pyarrow") is None:  # checked before any work
        raise UsageError("arlkit verl data needs pyarrow; pip install 'arlkit[verl]'")
    from arlkit.integrations.verl_data import build_rows, write_rows

    try:
        rows = build_rows(args.env, env_args, budget=args.budget, groups=args.groups, split=args.split,
                          tasks=args.tasks, seed=args.seed, prompt=prompt, layout=args.layout, reward=reward)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = write_rows(rows, args.out)
    budgets = sorted({r["extra_info"]["budget"] for r in rows})
    print(f"wrote {len(rows)} rows to {out} (env {args.env} {json.dumps(env_args)}, budgets {budgets}, "
          f"{args.layout} layout)")
    print("verl overrides for arlkit's agent loop (docs/scale-out.md):")
    for line in launch_overrides(args.layout):
        print(f"  {line}")
    return 0


def launch_overrides(layout: str) -> list[str]:
    """The Hydra overrides a verl launch needs for rows of ``layout`` (printed after ``verl data``)."""
    from arlkit.integrations.verl_data import AGENT_LOOP_CONFIG

    lines = [f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_CONFIG}"]
    if layout == "step":
        lines.append("trainer.use_v1=true trainer.v1.trainer_mode=arlkit   # one row per step; GiGPO, EMPG need it")
    return lines
