"""``arlkit demo``: arlkit's main job on the embedded default.

By default RL at the full budget against BudgetMix, compared across K and T (:mod:`arlkit.recipes.demo`):
build the tiny model offline,
behaviour cloning on budget-fork FrozenLake maps (a mostly budget-unaware expert), RL at the full budget
and with BudgetMix from the same checkpoint, and the evaluation of all three at 25/50/75/100% of T_max
(12-15 minutes on 2 CPU cores with AVX512 kernels, over 30 on slow AVX2 ones; ``--quick`` a few).

``--rl-seeds 0,1,2,3``: train Full and BudgetMix once per RL seed and pool each method's runs in the
tables (default: one seed, 0; ``--quick`` two). The findings' CIs cover the held-out maps, not the RL
seed, which moves Full's and BudgetMix's differences by several points; more seeds narrow that. Re-run
into the same ``--out`` with more seeds: the cloning and the seeds already there are reused.

``--scripted``: no model; a Pass@(K,T) evaluation of scripted policies of known quality (oracle, a noisy
oracle, random) on the same maps, the step-level diagnostics of the noisy vs the exact oracle, and
one HTML report (about a minute).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arlkit.cli import UsageError
from arlkit.cli.progress import progress_reporter

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run arlkit's main job on the embedded default", description=__doc__)
    p.add_argument("--out", default="runs/demo", help="output directory (default runs/demo)")
    p.add_argument("--quick", action="store_true", help="a smaller run for smoke tests")
    p.add_argument("--rl-seeds", metavar="SEEDS",
                   help="comma-separated RL seeds, pooled per method (default 0; --quick 0,1), e.g. 0,1,2,3")
    p.add_argument("--scripted", action="store_true",
                   help="evaluate scripted policies and run the diagnostics instead of training (no model)")
    p.set_defaults(handler=_handle)


def rl_seeds(text: str) -> tuple[int, ...]:
    """``--rl-seeds``: non-negative integers separated by commas (``DemoPlan`` refuses repeats)."""
    seeds = [part.strip() for part in text.split(",")]
    if not all(part.isascii() and part.isdigit() for part in seeds):
        raise UsageError(f"--rl-seeds {text!r}: give non-negative integers separated by commas, e.g. 0,1,2,3")
    return tuple(map(int, seeds))


def _handle(args: argparse.Namespace) -> int:
    if args.scripted and args.rl_seeds is not None:
        raise UsageError("--rl-seeds trains RL runs; --scripted evaluates scripted policies without training: choose one")
    if not args.scripted:
        seeds = None if args.rl_seeds is None else rl_seeds(args.rl_seeds)
        from arlkit.recipes.demo import demo_plan, run_demo  # torch: only when the command runs

        try:  # its last message: the findings and where everything is
            run_demo(Path(args.out), quick=args.quick, plan=demo_plan(args.quick, rl_seeds=seeds))
        except RuntimeError as exc:  # a worker failed: its message names the job and its log
            print(f"arlkit demo: error: {exc}", file=sys.stderr)
            return 1
        return 0
    from arlkit.recipes.demo_scripted import run_scripted_demo
    from arlkit.recipes.eval import EngineStats

    out = Path(args.out)
    stats = EngineStats()
    with progress_reporter("demo trajectories", stats=stats) as update:
        result, notes, _ = run_scripted_demo(out, quick=args.quick, on_progress=update, stats=stats)
    print((result.out / "summary.md").read_text(encoding="utf-8"))
    for note in notes:
        print(note)
    print(
        f"demo results in {out}/:\n"
        f"  eval/summary.md, eval/passkt.csv, eval/passkt.png  Pass@(K,T) with CIs, expected optimum and budget headroom\n"
        f"  analysis/                                         matched states, depth, error states, flows\n"
        f"  report.html                                       everything in one page"
    )
    return 0
