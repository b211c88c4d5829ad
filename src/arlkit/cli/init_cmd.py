"""``arlkit init``: write the README's starter files (``configs/``, ``examples/``) into a folder, so the
README's commands run outside arlkit's checkout (:mod:`arlkit.recipes.starter`)."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("init", help="write the README's configs/ and examples/ into a folder",
                              description=__doc__)  # fmt: skip
    p.add_argument("folder", nargs="?", default=".", help="where to write them (default: here); never overwrites")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from arlkit.recipes.starter import STARTER, init_folder

    written = init_folder(args.folder)
    print(f"wrote {len(written)} files into {args.folder}: {', '.join(f'{name}/' for name in STARTER)} "
          f"(e.g. arlkit eval --config {args.folder.rstrip('/') or '.'}/configs/eval_frozenlake.yaml --out runs/fl)")
    return 0
