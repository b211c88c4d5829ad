"""``arlkit demo``: arlkit's main job on the embedded default.

By default the seeds' central experiment (:mod:`arlkit.demo`): build the tiny model offline,
behaviour cloning on budget-sensitive FrozenLake maps, GRPO at the full budget and GRPO-BudgetMix from
the same checkpoint, and the evaluation of all three at 25/50/75/100% of T_max (<= 15 minutes on a
2-core CPU; ``--quick`` about 3).

``--scripted``: no model; a Pass@(K,T) evaluation of scripted policies of known quality (oracle, a noisy
oracle, random) on the same maps, the step-level diagnostics of the noisy vs the exact oracle, and
one HTML report (about a minute).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arlkit.cli.progress import progress_reporter
from arlkit.evaluation import EvalConfig, run_eval

__all__ = ["register"]

DEMO_ENV = {"size": 5, "t_max": 32, "success_rate": 0.8, "task_set": "budget_sensitive"}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run arlkit's main job on the embedded default", description=__doc__)
    p.add_argument("--out", default="runs/demo", help="output directory (default runs/demo)")
    p.add_argument("--quick", action="store_true", help="a smaller run for smoke tests")
    p.add_argument("--scripted", action="store_true",
                   help="evaluate scripted policies and run the diagnostics instead of training (no model)")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    if not args.scripted:
        from arlkit.demo import run_demo

        try:
            result = run_demo(Path(args.out), quick=args.quick)
        except RuntimeError as exc:  # a worker failed: its message names the job and its log
            print(f"arlkit demo: error: {exc}", file=sys.stderr)
            return 1
        print((result.out / "summary.md").read_text(encoding="utf-8"))
        print(f"demo results in {result.out}/")
        return 0
    from arlkit.analysis.api import analyze_run
    from arlkit.report.html import write_html_report

    out = Path(args.out)
    config = EvalConfig(
        env="frozenlake",
        env_args=dict(DEMO_ENV),
        policies=("oracle", "noisy-oracle:0.3", "random"),
        tasks=30 if args.quick else 100,
        samples=8,
        budgets=("25%", "50%", "75%", "100%"),
        budget_mode="announced",
    )
    with progress_reporter("demo trajectories") as update:
        run_eval(config, out / "eval", on_progress=update)
    print((out / "eval" / "summary.md").read_text(encoding="utf-8"))
    notes = analyze_run([out / "eval"], "noisy-oracle:0.3", "oracle", out / "analysis", quick=args.quick,
                        base_label="noisy-oracle:0.3", rl_label="oracle")  # fmt: skip
    for note in notes:
        print(note)
    report = out / "report.html"
    write_html_report([out], report, title="arlkit demo")
    print(
        f"demo results in {out}/:\n"
        f"  eval/summary.md, eval/passkt.csv, eval/passkt.png  Pass@(K,T) with CIs, upper bound and budget headroom\n"
        f"  analysis/                                         matched states, depth, error states, flows\n"
        f"  report.html                                       everything in one page"
    )
    return 0
