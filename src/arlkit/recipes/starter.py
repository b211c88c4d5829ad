"""``arlkit init``: the README's starter files (``configs/``, ``examples/``) written into a folder, so its
commands run outside arlkit's checkout.

A wheel carries them as package data (``arlkit/data/starter``, put there by ``setup.py``); an editable
install reads them from its checkout. Existing files are never overwritten.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from arlkit.config import ConfigError
from arlkit.extras import checkout

__all__ = ["STARTER", "init_folder", "starter_root"]

STARTER = ("configs", "examples")
"""The folders written, as the README names them."""


def starter_root() -> Path:
    """Where the starter folders are: the package's data in a wheel, the checkout in an editable install."""
    packaged = Path(__file__).resolve().parents[1] / "data" / "starter"
    if (packaged / STARTER[0]).is_dir():
        return packaged
    root = checkout()
    if root is not None and (root / STARTER[0]).is_dir():
        return root
    raise ConfigError("this arlkit installation has no starter files (a wheel built without setup.py's hook?); "
                      "take configs/ and examples/ from arlkit's source")


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for name in STARTER for p in (root / name).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def init_folder(out: str | Path = ".") -> list[Path]:
    """Write the starter files into ``out`` (created if missing); the paths written. A file that exists
    already is refused (one line naming it) before anything is written."""
    out, root = Path(out), starter_root()
    files = _files(root)
    if out.resolve() == root.resolve():
        raise ConfigError(f"{out} is arlkit's own checkout: its configs/ and examples/ are already there")
    clashes = [f for f in files if (out / f).exists()]
    if clashes:
        more = f" and {len(clashes) - 1} more" if len(clashes) > 1 else ""
        raise ConfigError(f"{out / clashes[0]} exists{more}; arlkit init never overwrites: choose an empty folder")
    for f in files:
        (out / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f, out / f)
    return [out / f for f in files]
