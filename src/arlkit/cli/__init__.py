"""The ``arlkit`` command line: a thin shell over the library.

Each sub-command lives in its own module of this package and exposes ``register(subparsers)``,
which adds its parser and sets ``handler`` (a function taking the parsed namespace and returning
an exit code). Errors a user can fix (unknown names, bad values) end in one line on stderr and exit
code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from arlkit.config import ConfigError
from arlkit.policies.protocol import PolicyError

__all__ = ["UsageError", "build_parser", "main"]

# Sub-command modules, in the order ``arlkit --help`` lists them.
COMMAND_MODULES = ("arlkit.cli.eval_cmd", "arlkit.cli.demo_cmd", "arlkit.cli.model_cmd", "arlkit.cli.analyze_cmd", "arlkit.cli.report_cmd", "arlkit.cli.sft_cmd", "arlkit.cli.train_cmd", "arlkit.cli.budgetmix_cmd")


class UsageError(Exception):
    """A user error found by a command handler; printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every registered sub-command."""
    parser = _Parser(prog="arlkit", description=__doc__.splitlines()[0] if __doc__ else None)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``arlkit`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (UsageError, ConfigError, PolicyError) as exc:
        print(f"arlkit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"arlkit {args.command}: interrupted; re-run the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
