"""``arlkit model init``: build the embedded tiny model offline (tokenizer + Qwen2-style LM)."""

from __future__ import annotations

import argparse
import errno
from pathlib import Path

from arlkit.cli import UsageError
from arlkit.recipes.model import init_model, tiny_sizes

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("model", help="build the embedded tiny model", description=__doc__)
    actions = p.add_subparsers(dest="model_command", metavar="ACTION", parser_class=type(p))
    actions.required = True
    init = actions.add_parser(
        "init",
        help="train the tokenizer on arlkit's own prompts and write a randomly initialised model",
        description="Train a byte-level BPE tokenizer on text rendered from arlkit's environments and "
        "prompts, build a Qwen2-style causal LM from a config, and save both to --out (loadable offline "
        "with from_pretrained, usable as --policy hf:DIR). The same command writes the same files.",
    )
    init.add_argument("--size", choices=tiny_sizes(), default="nano", help="nano (~1M parameters), micro (~10M) or small (~100M, for GPUs)")
    init.add_argument("--out", required=True, help="directory to create (must not exist or be empty)")
    init.add_argument("--seed", type=int, default=0, help="seed of the corpus rollouts and the weights")
    init.add_argument("--force", action="store_true", help="replace --out if it already holds files")
    init.set_defaults(handler=_handle_init)


def _handle_init(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        path = init_model(args.size, out, args.seed, overwrite=args.force)
    except FileExistsError:
        raise UsageError(f"{out} exists and is not an empty directory; use --force to replace it") from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise  # a full disk: one line and exit code 1 (arlkit.cli.main)
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(f"wrote the {args.size} model to {path} (use it as --policy hf:{path})")
    return 0
