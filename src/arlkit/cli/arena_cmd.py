"""``arlkit arena``: ARLArena's policy-optimisation comparison in one command (docs/arena.md).

Every variant (``--presets``) is trained from the same checkpoint with the same seeds, budget
distribution and step count, in parallel processes; every final model is evaluated with
Pass@(K,T) on the same held-out tasks; each run gets ARLArena's stability verdict. ``arena.md``
holds one table in the shape of ARLArena's Table 3. A re-run with the same options resumes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arlkit.cli import UsageError

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("arena", help="every policy-optimisation preset on one testbed (ARLArena Table 3)",
                              description=__doc__)  # fmt: skip
    p.add_argument("--env", default="frozenlake",
                   help="environment (default frozenlake: without --env-arg, the budget-sensitive 5x5 maps)")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE", help="environment option")
    p.add_argument("--presets", default=None, metavar="A,B,...",
                   help="arena variants (default: AA Table 3's twelve: grpo,grpo-st,gspo,cispo,cispo-sm,sapo,sapo-sm,"
                        "gigpo,empg,dapo-grpo,dapo-gigpo,sampo)")  # fmt: skip
    p.add_argument("--steps", type=int, default=None, help="RL steps per run (default 60; --quick 4)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per variant (default 3; --quick 1)")
    p.add_argument("--model", default="tiny:nano", help="starting model (default: the embedded tiny model)")
    p.add_argument("--bc-steps", type=int, default=None, help="behaviour-cloning steps first (0: start from --model)")
    p.add_argument("--eval-tasks", type=int, default=None, help="held-out tasks of the final evaluation (default 50; --quick 8)")
    p.add_argument("--eval-samples", type=int, default=None, help="samples per task and budget (default 8; --quick 4)")
    p.add_argument("--budgets", default="50%,100%", help="evaluation budgets, percentages of T_max (default 50%%,100%%)")
    p.add_argument("--prompt-profile", default="compact", choices=("compact", "rt"),
                   help="compact (default, for the tiny model) or rt (the full system prompt, for real LLMs)")
    p.add_argument("--workers", type=int, default=2, help="parallel processes")
    p.add_argument("--quick", action="store_true", help="tiny sizes (<= 10 minutes on a 2-core CPU)")
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from arlkit.config import parse_key_values
    from arlkit.recipes.arena import ARENA_VARIANTS, DEFAULT_VARIANTS, arena_env, arena_plan, arena_prompt, run_arena

    try:
        env = arena_env(args.env, parse_key_values(args.env_arg, option="--env-arg"))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    variants = tuple(v.strip() for v in args.presets.split(",") if v.strip()) if args.presets else DEFAULT_VARIANTS
    unknown = [v for v in variants if v not in ARENA_VARIANTS]
    if unknown or not variants:
        raise UsageError(f"unknown arena preset(s) {', '.join(unknown) or '(none)'}; valid choices: {', '.join(ARENA_VARIANTS)}")
    for name, value, low in (("--steps", args.steps, 1), ("--seeds", args.seeds, 1), ("--workers", args.workers, 1),
                             ("--bc-steps", args.bc_steps, 0), ("--eval-tasks", args.eval_tasks, 1),
                             ("--eval-samples", args.eval_samples, 1)):  # fmt: skip
        if value is not None and value < low:
            raise UsageError(f"{name} must be >= {low}, got {value}")
    seeds = tuple(range(args.seeds if args.seeds is not None else (1 if args.quick else 3)))
    budgets = tuple(b.strip() for b in args.budgets.split(",") if b.strip())
    bad = [b for b in budgets if not (b.endswith("%") and b[:-1].isdigit() and 0 < int(b[:-1]) <= 100)]
    if bad or not budgets:
        raise UsageError(f"--budgets: {', '.join(bad) or '(none)'} is not a percentage of T_max like 50%")
    try:
        plan = arena_plan(env, variants, seeds=seeds, steps=args.steps, quick=args.quick, model=args.model,
                          workers=args.workers, bc_steps=args.bc_steps, budgets=budgets, eval_tasks=args.eval_tasks,
                          eval_samples=args.eval_samples, prompt=arena_prompt(args.prompt_profile))  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        run_arena(args.out, plan)
    except RuntimeError as exc:  # a worker failed: the message names the job and its log
        print(f"arlkit arena: error: {exc}", file=sys.stderr)
        return 1
    print((Path(args.out) / "arena.md").read_text(encoding="utf-8"))
    return 0
