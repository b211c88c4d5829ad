"""Terminal tasks as data: arlkit's own layout and the Terminal-Bench layout (docs/environments.md#terminal).

arlkit's layout, one folder per task::

    task.yaml      instruction: ..., tier: files | text | build
    files/         the task folder's starting contents (optional)
    solution.sh    the reference solution: one command per line (blank lines and # comments skipped)
    check.yaml     the check run after ``submit``: a list of steps (:mod:`arlkit.envs.terminal.checker`)

Terminal-Bench's layout (``task.yaml`` with ``instruction``, ``solution.sh``, ``tests/``, a
``Dockerfile``): the folder's other files are the task folder's contents, ``solution.sh`` is sent
as one command, and the check is one step that runs ``tests/test_*.py`` with pytest (the
sandbox's interpreter, isolated: nothing in ``/app`` or the environment can shadow pytest, its
configuration or a module it imports) with ``$TEST_DIR`` pointing at the tests, which stay outside
the task folder and leave the disk once pytest has collected them. Docker is not used: what a
task's ``Dockerfile`` installs or a ``docker-compose.yaml`` starts is not there.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arlkit.config import parse_yaml
from arlkit.envs.terminal.checker import CheckStep, decode_steps, encode_steps, parse_steps
from arlkit.envs.terminal.workspace import pack_folder

__all__ = ["SHIPPED_DIR", "TIERS", "TerminalTask", "load_task", "load_tasks", "split_tasks"]

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "data" / "terminal"
TIERS = ("files", "text", "build")
"""The shipped tiers: file manipulation, text processing with standard tools, small build/debug/data tasks."""

_TB_META = {"task.yaml", "solution.sh", "solution.yaml", "run-tests.sh", "tests", "Dockerfile",
            "docker-compose.yaml", "docker-compose.yml"}
# Runs in a non-dumpable interpreter with -I (no cwd, user site or PYTHON* variables on its path)
# and -B (no bytecode written); the test sources are deleted once collected, so that a program the
# tests run cannot read what they expect. Written without single quotes: it is passed in them.
_TB_PYTEST = """
import ctypes, glob, os, sys
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
import pytest
tests = os.environ["TEST_DIR"]
class HideTests:
    def pytest_collection_finish(self, session):
        for folder, _, names in os.walk(tests):
            for name in names:
                if name.endswith((".py", ".pyc")):
                    os.remove(os.path.join(folder, name))
args = ["-q", "-p", "no:cacheprovider", "--rootdir", tests, "--confcutdir", tests, "-c", os.devnull]
sys.exit(pytest.main(args + sorted(glob.glob(tests + "/test_*.py")), plugins=[HideTests()]))
"""
_TB_CHECK = (CheckStep(f"exec \"$ARLKIT_PYTHON\" -I -B -c '{_TB_PYTEST}'"),)


@dataclass(frozen=True)
class TerminalTask:
    """One terminal task.

    Attributes:
        name: the task folder's name (unique within a task set).
        tier: ``files``, ``text``, ``build`` (shipped) or the task's own category.
        instruction: what the agent is asked to do.
        archive: the task folder's starting contents (a tar archive, :func:`pack_folder`).
        solution: the reference solution, one command per turn (``submit`` follows it).
        check: the check's steps (:mod:`arlkit.envs.terminal.checker`); all must pass.
        support: files the checker needs outside the task folder (a tar archive), or empty.
        source: ``arlkit`` or ``terminal-bench``.
    """

    name: str
    tier: str
    instruction: str
    archive: bytes
    solution: tuple[str, ...]
    check: tuple[CheckStep, ...]
    support: bytes = b""
    source: str = "arlkit"

    @property
    def task_id(self) -> str:
        check = json.dumps(encode_steps(self.check), sort_keys=True).encode()
        digest = hashlib.sha256(self.archive + self.instruction.encode() + check).hexdigest()[:8]
        return f"{self.name}-{digest}"

    def to_payload(self) -> dict[str, Any]:
        return {
            "name": self.name, "tier": self.tier, "instruction": self.instruction, "solution": list(self.solution),
            "check": encode_steps(self.check), "source": self.source,
            "archive": base64.b64encode(self.archive).decode("ascii"),
            "support": base64.b64encode(self.support).decode("ascii"),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> TerminalTask:
        return cls(
            name=str(payload["name"]), tier=str(payload["tier"]), instruction=str(payload["instruction"]),
            archive=base64.b64decode(payload["archive"]), solution=tuple(payload["solution"]),
            check=decode_steps(payload["check"]), support=base64.b64decode(payload.get("support", "")),
            source=str(payload.get("source", "arlkit")),
        )

    def listing(self) -> list[str]:
        """The starting task folder's entries (folders end with ``/``), sorted."""
        with tarfile.open(fileobj=io.BytesIO(self.archive), mode="r:") as archive:
            return sorted(m.name + ("/" if m.isdir() else "") for m in archive.getmembers())


def _read_yaml(path: Path) -> Any:
    """The YAML of ``path`` (arlkit's bounded reader; a ConfigError, a ValueError, in one line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it: {exc}") from exc
    return parse_yaml(text, where=str(path), unique_keys=False)


def _instruction(data: Mapping[str, Any], where: Path) -> str:
    text = data.get("instruction")
    if not text and isinstance(data.get("descriptions"), list):  # older Terminal-Bench tasks
        text = next((d.get("description") for d in data["descriptions"] if d.get("key") == "base"), None)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: task.yaml has no 'instruction'")
    return text.strip()


def _commands(script: str) -> tuple[str, ...]:
    return tuple(ln.strip() for ln in script.splitlines() if ln.strip() and not ln.strip().startswith("#"))


def _pack_files(folder: Path | None, keep: Callable[[str], bool] = lambda name: True) -> bytes:
    """``folder``'s top-level entries for which ``keep(name)`` holds (``folder`` ``None``: none), as a
    task-folder archive. They are copied to a staging folder first with their modes normalised (0755
    for folders and executables, 0644 for other files), so that the archive, and the task id hashed
    from it, is the same on every checkout whatever its umask."""
    with tempfile.TemporaryDirectory(prefix="arlkit-task-") as staging:
        if folder is not None:
            _copy_into(folder, Path(staging), keep)
        return pack_folder(staging)


def _copy_into(src: Path, dst: Path, keep: Callable[[str], bool] = lambda name: True) -> None:
    for entry in sorted(src.iterdir()):
        if not keep(entry.name):
            continue
        target = dst / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            target.mkdir()
            os.chmod(target, 0o755)
            _copy_into(entry, target)
        else:
            target.write_bytes(entry.read_bytes())
            os.chmod(target, 0o755 if os.access(entry, os.X_OK) else 0o644)


def load_task(folder: str | Path) -> TerminalTask:
    """The task in ``folder`` (either layout; ``ValueError`` naming what is missing)."""
    folder = Path(folder)
    data = _read_yaml(folder / "task.yaml")
    if not isinstance(data, dict):
        raise ValueError(f"{folder / 'task.yaml'}: expected a mapping with an 'instruction'")
    instruction = _instruction(data, folder)
    solution_path = folder / "solution.sh"
    if not solution_path.is_file():
        raise ValueError(f"{folder}: no solution.sh (the reference solution)")
    solution = solution_path.read_text(encoding="utf-8")
    if (folder / "check.yaml").is_file():
        files = folder / "files"
        archive = _pack_files(files if files.is_dir() else None)
        tier = str(data.get("tier", "files"))
        check = parse_steps(_read_yaml(folder / "check.yaml"), str(folder / "check.yaml"))
        return TerminalTask(folder.name, tier, instruction, archive, _commands(solution), check)
    tests = folder / "tests"
    if not tests.is_dir():
        raise ValueError(f"{folder}: neither check.yaml (arlkit layout) nor tests/ (Terminal-Bench layout)")
    support = _pack_files(folder, lambda name: name == "tests")
    tier = str(data.get("category") or data.get("tier") or "terminal-bench")
    archive = _pack_files(folder, lambda name: name not in _TB_META)
    return TerminalTask(folder.name, tier, instruction, archive, (solution.strip(),), _TB_CHECK, support, "terminal-bench")


def load_tasks(root: str | Path | None = None) -> list[TerminalTask]:
    """Every task under ``root`` (default: arlkit's shipped tasks), sorted by name."""
    root = Path(root) if root else SHIPPED_DIR
    if (root / "task.yaml").is_file():
        return [load_task(root)]
    if not root.is_dir():
        raise ValueError(f"no task folder at {root}")
    tasks = [load_task(d) for d in sorted(root.iterdir()) if (d / "task.yaml").is_file()]
    if not tasks:
        raise ValueError(f"no task folders (with a task.yaml) under {root}")
    return tasks


def split_tasks(tasks: list[TerminalTask], split: str, seed: int, test_fraction: float) -> list[TerminalTask]:
    """The tasks of ``split``: within each tier, tasks ordered by a seeded hash of their name; the
    first ``round(test_fraction * n)`` are the test split, the rest train (disjoint by name); the
    split's tasks come in hash order."""
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; valid choices: train, test")
    def rank(task: TerminalTask) -> str:
        return hashlib.sha256(f"{seed}:{task.name}".encode()).hexdigest()

    chosen: list[TerminalTask] = []
    for tier in sorted({t.tier for t in tasks}):
        ranked = sorted((t for t in tasks if t.tier == tier), key=rank)
        n_test = round(test_fraction * len(ranked))
        chosen += ranked[:n_test] if split == "test" else ranked[n_test:]
    return sorted(chosen, key=rank)  # tiers mixed: the first n of a split cover every tier
