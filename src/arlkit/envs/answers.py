"""Folders a sandboxed program must not read: where a task set keeps its answers.

Environments that run model-written programs (``code``, ``terminal``, ``math-tir``) hide these
through :attr:`arlkit.sandbox.SandboxConfig.hide_paths`: the task data itself, any user dataset,
and the source checkout around arlkit (its git objects hold the same files). The sandbox mounts
the interpreter back if it lives inside one of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["answer_folders"]

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
