"""``arlkit demo``: arlkit's main job on the embedded default.

By default the seeds' central experiment (:mod:`arlkit.recipes.demo`): build the tiny model offline,
behaviour cloning on budget-fork FrozenLake maps (a mostly budget-unaware expert), RL at the full budget
and with BudgetMix from the same checkpoint, and the evaluation of all three at 25/50/75/100% of T_max
(10 minutes on a fast 2-core CPU; the previous recipe took 30 on a slow one; ``--quick`` a few).

``--scripted``: no model; a Pass@(K,T) evaluation of scripted policies of known quality (oracle, a noisy
oracle, random) on the same maps, the step-level diagnostics of the noisy vs the exact oracle, and
one HTML report (about a minute).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arlkit.cli.progress import progress_reporter

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run arlkit's main job on the embedded default", description=__doc__)
    p.add_argument("--out", default="runs/demo", help="output directory (default runs/demo)")
    p.add_argument("--quick", action="store_true", help="a smaller run for smoke tests")
    p.add_argument("--scripted", action="store_true",
                   help="evaluate scripted policies and run the diagnostics instead of training (no model)")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    if not args.scripted:
        from arlkit.recipes.demo import run_demo  # torch: only when the command runs

        try:
            run_demo(Path(args.out), quick=args.quick)  # its last message: the findings and where everything is
        except RuntimeError as exc:  # a worker failed: its message names the job and its log
            print(f"arlkit demo: error: {exc}", file=sys.stderr)
            return 1
        return 0
    from arlkit.recipes.demo_scripted import run_scripted_demo

    out = Path(args.out)
    with progress_reporter("demo trajectories") as update:
        result, notes, _ = run_scripted_demo(out, quick=args.quick, on_progress=update)
    print((result.out / "summary.md").read_text(encoding="utf-8"))
    for note in notes:
        print(note)
    print(
        f"demo results in {out}/:\n"
        f"  eval/summary.md, eval/passkt.csv, eval/passkt.png  Pass@(K,T) with CIs, upper bound and budget headroom\n"
        f"  analysis/                                         matched states, depth, error states, flows\n"
        f"  report.html                                       everything in one page"
    )
    return 0
