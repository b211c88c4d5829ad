"""The ``arlkit`` command line: a thin shell over the library.

Each sub-command lives in its own module of this package and exposes ``register(subparsers)``,
which adds its parser and sets ``handler`` (a function taking the parsed namespace and returning
an exit code). Errors a user can fix (unknown names, bad values, an output path that cannot be
written, a run folder another run holds) end in one line on stderr and exit code 2, never a
traceback; a run that cannot go on (no usable checkpoint, a full disk) ends in one line and exit
code 1. arlkit's own warnings print as one line each.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any, TextIO

from arlkit.config import RunError
from arlkit.recipes.catalog import USER_ERRORS

__all__ = ["UsageError", "build_parser", "main"]

# Sub-command modules, in the order ``arlkit --help`` lists them.
COMMAND_MODULES = ("arlkit.cli.eval_cmd", "arlkit.cli.demo_cmd", "arlkit.cli.study_cmd", "arlkit.cli.model_cmd", "arlkit.cli.analyze_cmd", "arlkit.cli.report_cmd", "arlkit.cli.sft_cmd", "arlkit.cli.train_cmd", "arlkit.cli.budgetmix_cmd",
                   "arlkit.cli.verl_cmd", "arlkit.cli.arena_cmd", "arlkit.cli.export_cmd", "arlkit.cli.serve_cmd",
                   "arlkit.cli.init_cmd")


INTERRUPTED = {
    "eval": "interrupted; re-run the same command to resume",
    "sft": "interrupted; re-run the same command to resume",
    "demo": "interrupted; re-run the same command to resume",
    "study": "interrupted; re-run the same command to resume",
    "arena": "interrupted; re-run the same command to resume",
    "train": "interrupted; re-run it with --resume to continue from the last checkpoint",
    "serve": "stopped",
}
"""What Ctrl-C prints, by command: how to continue where a run can resume (others: ``interrupted``)."""


class UsageError(Exception):
    """A user error found by a command handler; printed as one line, exit code 2."""


_ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|obj|exc):`(~?)([^`]+)`")


def plain_text(text: str) -> str:
    """Docstring markup as plain text for ``--help``: ``:mod:`~a.b``` becomes ``b`` (``a.b`` without the
    tilde) and double backquotes go."""
    text = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), text)
    return text.replace("``", "")


class _PlainFormatter(argparse.HelpFormatter):
    """argparse's help layout over :func:`plain_text` (descriptions are the commands' module docstrings)."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain_text(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain_text(super()._expand_help(action))


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block), exit code 2, and help texts without markup."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _PlainFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every registered sub-command."""
    parser = _Parser(prog="arlkit", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"arlkit {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def _version() -> str:
    """The installed distribution's version (a source tree without one says so)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("arlkit")
    except PackageNotFoundError:
        return "(not installed: a source tree)"


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_CANNOT_WRITE = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR)
"""Errors of a path that cannot be used (a read-only file system, no permission, a file where a folder is
expected): bad input, one line and exit code 2, as is any error on ``--out`` itself, inside it or on one
of its parents (other than a full disk)."""


def _torch_write_failure(exc: RuntimeError) -> bool:
    """torch.save's C++ writer reports a failed write (a full disk, a vanished folder) as a RuntimeError
    from ``inline_container.cc`` that names neither the file nor the cause."""
    text = str(exc)
    return "inline_container.cc" in text or "PytorchStreamWriter failed" in text


_MAX_LINE = 2000


def _line(text: object) -> str:
    """``text`` as one line of at most ``_MAX_LINE`` characters (a message may quote what it was given)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= _MAX_LINE else f"{flat[:_MAX_LINE]}... ({len(flat) - _MAX_LINE} more characters)"


def _on_out_path(path: object, out: object) -> bool:
    """``path`` is ``out``, inside it, or one of its parents (a file where a folder is expected)."""
    if not path or not out:
        return False
    a, b = os.path.abspath(str(path)), os.path.abspath(str(out))
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep) or b.startswith(a.rstrip(os.sep) + os.sep)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``arlkit`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    name = f"arlkit {args.command}"

    def one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
        if category.__module__.startswith("arlkit"):
            print(f"{name}: warning: {_line(message)}", file=sys.stderr, flush=True)
        else:
            shown(message, category, filename, lineno, file, line)

    out: Any = getattr(args, "out", None)
    with warnings.catch_warnings():
        shown = warnings.showwarning
        warnings.showwarning = one_line
        warnings.filterwarnings("always", category=UserWarning, module="arlkit")
        try:
            return int(args.handler(args) or 0)
        except (UsageError, *USER_ERRORS) as exc:
            print(f"{name}: error: {_line(exc)}", file=sys.stderr)
            return 2
        except RunError as exc:
            print(f"{name}: error: {_line(exc)}", file=sys.stderr)
            return 1
        except BrokenPipeError:  # the reader of stdout went away (`arlkit ... | head -1`): nothing more to say
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
            return 0
        except OSError as exc:
            on_out = _on_out_path(exc.filename, out)
            if exc.filename and exc.errno not in _DISK_FULL and (exc.errno in _CANNOT_WRITE or on_out):
                not_a_folder = (on_out and exc.errno in (errno.EEXIST, errno.ENOTDIR) and os.path.exists(exc.filename)
                                and not os.path.isdir(exc.filename))
                text = f"{exc.filename} is not a folder" if not_a_folder else f"{exc.filename}: {exc.strerror or exc}"
                hint = "; choose another --out" if on_out else ""
                print(f"{name}: error: {_line(text + hint)}", file=sys.stderr)
                return 2
            if exc.errno not in _DISK_FULL:
                raise
            where = exc.filename or (f"a file under {out}" if out else "its output")
            print(f"{name}: error: {exc.strerror or 'no space left on device'} while writing {where}; "
                  "free some space and re-run the same command" + (" with --resume" if args.command == "train" else ""),
                  file=sys.stderr)
            return 1
        except RuntimeError as exc:
            if not _torch_write_failure(exc):
                raise
            where = f"a PyTorch file under {out}" if out else "a PyTorch file"
            print(f"{name}: error: writing {where} failed (is the disk full?): {str(exc).splitlines()[0][:200]}",
                  file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"{name}: {INTERRUPTED.get(args.command, 'interrupted')}", file=sys.stderr)
            return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
