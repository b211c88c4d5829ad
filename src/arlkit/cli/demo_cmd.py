"""``arlkit demo``: arlkit's main job on the embedded default.

Until the trainer lands this evaluates the oracle and the random policy on FrozenLake's held-out
maps at 25/50/75/100% of T_max (announced budgets) and says where the results are.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from arlkit.cli.progress import progress_reporter
from arlkit.evaluation import EvalConfig, run_eval

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run arlkit's main job on the embedded default", description=__doc__)
    p.add_argument("--out", default="runs/demo", help="output directory (default runs/demo)")
    p.add_argument("--quick", action="store_true", help="a smaller run for smoke tests")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    config = EvalConfig(
        env="frozenlake",
        policies=("oracle", "noisy-oracle:0.5", "random"),
        tasks=20 if args.quick else 100,
        samples=8,
        budgets=("25%", "50%", "75%", "100%"),
        budget_mode="announced",
    )
    out = Path(args.out) / "eval"
    with progress_reporter("demo trajectories") as update:
        run_eval(config, out, on_progress=update)
    print((out / "summary.md").read_text(encoding="utf-8"))
    print(f"demo results in {out}/: summary.md (table), passkt.csv, passkt.png (Pass@T and Pass@K), trajectories.jsonl")
    return 0
