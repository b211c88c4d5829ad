"""``arlkit report``: one self-contained HTML file with every result found for some runs."""

from __future__ import annotations

import argparse

from arlkit.cli import UsageError
from arlkit.recipes.report import write_report

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="write an HTML report of runs and analyses", description=__doc__)
    p.add_argument("paths", nargs="+", metavar="RUN_DIR",
                   help="eval runs, `arlkit analyze` outputs or training runs (searched 3 levels deep)")  # fmt: skip
    p.add_argument("--out", default="report.html", help="the HTML file to write (default report.html)")
    p.add_argument("--title", default="arlkit report", help="the report's title")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    try:
        report = write_report(args.paths, args.out, title=args.title)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {report.path} with {len(report.sections)} sections: " + ", ".join(report.sections))
    if report.missing:
        print("not included (no inputs): " + ", ".join(report.missing))
    return 0
