"""``arlkit export``: an evaluation run's trajectories as a dataset (:mod:`arlkit.recipes.export`)."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="an eval run's trajectories as parquet or a Hugging Face dataset",
                              description=__doc__)  # fmt: skip
    p.add_argument("run", help="an `arlkit eval` run directory (it holds trajectories.jsonl)")
    p.add_argument("--format", default="parquet", choices=("parquet", "hf"), help="parquet (default) or hf (save_to_disk)")
    p.add_argument("--out", required=True, help="a new or empty folder")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from arlkit.recipes.export import export_run

    n, m = export_run(args.run, args.out, fmt=args.format)
    how = f'datasets.load_dataset("{args.out}", "turns")' if args.format == "parquet" else f'datasets.load_from_disk("{args.out}/turns")'
    print(f"exported {n} trajectories and {m} turns to {args.out}/ (load: {how})")
    return 0
