"""How to install an optional extra, said so that it works where arlkit is installed.

arlkit is installed from a checkout (``pip install -e .`` or ``make``) or from a wheel built from one;
it is not on a package index, so ``pip install 'arlkit[X]'`` alone fails. :func:`install_hint` names
the command for the installation at hand: the checkout's folder for an editable install, the wheel
otherwise.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
from pathlib import Path

__all__ = ["checkout", "install_hint"]


@functools.cache
def checkout() -> Path | None:
    """The source checkout arlkit is installed from in editable mode (``None`` for a wheel)."""
    try:
        direct = importlib.metadata.distribution("arlkit").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        direct = None
    if direct:
        try:
            info = json.loads(direct)
        except ValueError:
            info = {}
        url = info.get("url", "")
        if info.get("dir_info", {}).get("editable") and url.startswith("file://"):
            return Path(url.removeprefix("file://"))
    root = Path(__file__).resolve().parents[2]  # src/arlkit/extras.py -> the checkout, when run from one
    return root if (root / "pyproject.toml").is_file() and (root / "src" / "arlkit").is_dir() else None


def install_hint(extra: str, *, make_target: str = "") -> str:
    """The command that adds the ``extra`` to this installation, e.g. ``pip install -e '/src/arlkit[gem]'``
    (``make_target``: the Makefile target that installs it too, named for checkouts)."""
    root = checkout()
    if root is not None:
        made = f" or `make {make_target}` there" if make_target else ""
        return f"pip install -e '{root}[{extra}]'{made}"
    try:
        version = importlib.metadata.version("arlkit")
    except importlib.metadata.PackageNotFoundError:
        version = "VERSION"
    return f"pip install 'PATH/arlkit-{version}-py3-none-any.whl[{extra}]' (the wheel arlkit is installed from)"
