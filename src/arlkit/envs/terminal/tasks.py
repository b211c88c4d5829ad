"""Terminal tasks as data: arlkit's own layout, Terminal-Bench's and Harbor's (docs/environments.md#terminal).

arlkit's layout, one folder per task::

    task.yaml      instruction: ..., tier: files | text | build, session: stateless | persistent (optional)
    files/         the task folder's starting contents (optional)
    solution.sh    the reference solution: one command per line (blank lines and # comments skipped)
    check.yaml     the check run after ``submit``: a list of steps (:mod:`arlkit.envs.terminal.checker`)

A folder with a ``task.toml`` is a Harbor task, one with a ``task.yaml`` and no ``check.yaml`` a
Terminal-Bench task; :mod:`arlkit.envs.terminal.formats` reads both. A folder of task folders loads
tolerantly (:func:`load_task_set`): a task folder that cannot be loaded, or that needs what the
sandbox does not offer (the network, a GPU, other services), is skipped with a one-line reason,
logged as a warning and listed in the set's :class:`TaskSetReport`; only a set of which nothing
loads is an error.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import math
import os
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from arlkit.config import parse_yaml
from arlkit.envs.terminal.checker import CheckStep, decode_steps, encode_steps, parse_steps
from arlkit.envs.terminal.workspace import pack_folder

__all__ = [
    "SESSIONS", "SHIPPED_DIR", "TIERS", "SkippedTask", "TaskRefused", "TaskSetReport", "TerminalTask", "load_task",
    "load_task_set", "load_tasks", "split_tasks",
]

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "data" / "terminal"
TIERS = ("files", "text", "build")
BENCHMARK_SOURCES = ("terminal-bench", "harbor")
"""Where a benchmark's tasks come from: all of them are test tasks (:func:`split_tasks`)."""
"""The shipped tiers: file manipulation, text processing with standard tools, small build/debug/data tasks."""
SESSIONS = ("stateless", "persistent")
"""How a task's commands share a shell: each in a fresh one (arlkit's default), or one shell for the
whole episode, as Terminal-Bench's and Harbor's agents have it (the environment decides how)."""

_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())  # a library's warnings go where the application sends them, not to stderr


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
        support: files the checker needs outside the task folder (a tar archive, unpacked at
            ``/tests``), or empty.
        source: ``arlkit``, ``terminal-bench`` or ``harbor``.
        session: ``stateless`` or ``persistent`` (:data:`SESSIONS`).
        check_timeout_s: the task's own limit for its check (Terminal-Bench's
            ``max_test_timeout_sec``, Harbor's ``[verifier] timeout_sec``), or ``None``.
        agent_timeout_s: the task's own limit for the agent's whole episode, or ``None``.
    """

    name: str
    tier: str
    instruction: str
    archive: bytes
    solution: tuple[str, ...]
    check: tuple[CheckStep, ...]
    support: bytes = b""
    source: str = "arlkit"
    session: str = "stateless"
    check_timeout_s: float | None = None
    agent_timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.session not in SESSIONS:
            raise ValueError(f"session must be one of {', '.join(SESSIONS)}; got {self.session!r}")
        for key in ("check_timeout_s", "agent_timeout_s"):
            value = getattr(self, key)
            if value is not None and not _positive_seconds(value):
                raise ValueError(f"{key} must be a number of seconds > 0 (or absent); got {value!r}")

    @property
    def task_id(self) -> str:
        check = json.dumps(encode_steps(self.check), sort_keys=True).encode()
        session = b"" if self.session == "stateless" else f"\0session={self.session}".encode()
        digest = hashlib.sha256(self.archive + self.instruction.encode() + check + session).hexdigest()[:8]
        return f"{self.name}-{digest}"

    def to_payload(self) -> dict[str, Any]:
        return {
            "name": self.name, "tier": self.tier, "instruction": self.instruction, "solution": list(self.solution),
            "check": encode_steps(self.check), "source": self.source,
            "archive": base64.b64encode(self.archive).decode("ascii"),
            "support": base64.b64encode(self.support).decode("ascii"),
            "session": self.session, "check_timeout_s": self.check_timeout_s, "agent_timeout_s": self.agent_timeout_s,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> TerminalTask:
        return cls(
            name=str(payload["name"]), tier=str(payload["tier"]), instruction=str(payload["instruction"]),
            archive=base64.b64decode(payload["archive"]), solution=tuple(payload["solution"]),
            check=decode_steps(payload["check"]), support=base64.b64decode(payload.get("support", "")),
            source=str(payload.get("source", "arlkit")), session=str(payload.get("session", "stateless")),
            check_timeout_s=payload.get("check_timeout_s"), agent_timeout_s=payload.get("agent_timeout_s"),
        )

    def listing(self) -> list[str]:
        """The starting task folder's entries (folders end with ``/``), sorted."""
        with tarfile.open(fileobj=io.BytesIO(self.archive), mode="r:") as archive:
            return sorted(m.name + ("/" if m.isdir() else "") for m in archive.getmembers())


def _positive_seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


class TaskRefused(ValueError):
    """A task folder that is not loaded: ``reason`` says why in one line, ``kind`` groups it
    (:data:`KINDS`) for the set's report."""

    def __init__(self, folder: Path, reason: str, kind: str = "unreadable") -> None:
        super().__init__(f"{folder}: {reason}")
        self.reason, self.kind = reason, kind


KINDS: dict[str, tuple[str, str]] = {
    "network": ("needs the network", "need the network"),
    "image": ("needs its own Docker image", "need their own Docker image"),
    "gpu": ("asks for a GPU", "ask for GPUs"),
    "services": ("needs services arlkit does not start", "need services arlkit does not start"),
    "no-tests": ("has no tests/", "have no tests/"),
    "no-solution": ("has no reference solution", "have no reference solution"),
    "unsupported": ("uses a feature arlkit does not read", "use features arlkit does not read"),
    "unreadable": ("cannot be read", "cannot be read"),
}
"""Why a task folder is skipped, as '1 ... / 2 ...' phrases for the report's first line."""


class SkippedTask(NamedTuple):
    """A task folder left out of a set: its name, why (one line) and the kind of reason (:data:`KINDS`)."""

    name: str
    reason: str
    kind: str = "unreadable"


@dataclass(frozen=True)
class TaskSetReport:
    """What loading a task set did: how many tasks loaded from ``root``, and each folder skipped."""

    root: str
    loaded: int
    skipped: tuple[SkippedTask, ...] = ()

    def counts(self) -> list[tuple[str, int]]:
        """``(kind, number of folders skipped for it)``, most frequent first."""
        kinds = [s.kind for s in self.skipped]
        order = list(KINDS)
        return sorted(((k, kinds.count(k)) for k in set(kinds)), key=lambda kc: (-kc[1], order.index(kc[0])))

    def headline(self) -> str:
        """``5 tasks loaded from DIR, 3 skipped (2 need the network, 1 has no tests/)``."""
        line = f"{self.loaded} task{'s' if self.loaded != 1 else ''} loaded from {self.root}"
        if not self.skipped:
            return line
        parts = [f"{n} {KINDS[kind][0 if n == 1 else 1]}" for kind, n in self.counts()]
        return f"{line}, {len(self.skipped)} skipped ({', '.join(parts)})"

    def lines(self, limit: int | None = 10) -> list[str]:
        """The headline, then one line per skipped folder (the first ``limit``, then how many more)."""
        shown = self.skipped if limit is None else self.skipped[:limit]
        out = [self.headline(), *(f"  skipped {s.name}: {s.reason}" for s in shown)]
        if len(shown) < len(self.skipped):
            out.append(f"  ... and {len(self.skipped) - len(shown)} more")
        return out


def _read_yaml(path: Path) -> Any:
    """The YAML of ``path`` (arlkit's bounded reader; a ConfigError, a ValueError, in one line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it: {exc}") from exc
    return parse_yaml(text, where=str(path), unique_keys=False)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it: {exc}") from exc


def _instruction(data: Mapping[str, Any], where: Path) -> str:
    text = data.get("instruction")
    if not text and isinstance(data.get("descriptions"), list):  # older Terminal-Bench tasks
        text = next((d.get("description") for d in data["descriptions"] if isinstance(d, dict) and d.get("key") == "base"),
                    None)
    if not isinstance(text, str) or not text.strip():
        raise TaskRefused(where, "task.yaml has no 'instruction'")
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


def _pack_entries(entries: Iterable[tuple[Path, str]]) -> bytes:
    """An archive of ``(source, place)`` entries, in order (a later one overwrites an earlier one): a
    folder's contents are merged into ``place`` (a path inside the archive, ``""`` for its top), a
    file is written at ``place``. Modes are normalised as :func:`_pack_files` does."""
    with tempfile.TemporaryDirectory(prefix="arlkit-task-") as staging:
        root = Path(staging)
        for source, place in entries:
            target = root / place if place else root
            if source.is_dir() and not source.is_symlink():
                _make_dirs(root, target)
                _copy_into(source, target)
            else:
                _make_dirs(root, target.parent)
                _copy_entry(source, target)
        return pack_folder(staging)


def _make_dirs(root: Path, folder: Path) -> None:
    for part in [*reversed(folder.relative_to(root).parents), folder.relative_to(root)]:
        if str(part) not in ("", "."):
            (root / part).mkdir(exist_ok=True)
            os.chmod(root / part, 0o755)


def _copy_into(src: Path, dst: Path, keep: Callable[[str], bool] = lambda name: True) -> None:
    for entry in sorted(src.iterdir()):
        if keep(entry.name):
            _copy_entry(entry, dst / entry.name)


def _copy_entry(entry: Path, target: Path) -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        target.unlink()
    if entry.is_symlink():
        os.symlink(os.readlink(entry), target)
    elif entry.is_dir():
        target.mkdir(exist_ok=True)
        os.chmod(target, 0o755)
        _copy_into(entry, target)
    elif not target.is_dir():
        target.write_bytes(entry.read_bytes())
        os.chmod(target, 0o755 if os.access(entry, os.X_OK) else 0o644)


def _session(data: Mapping[str, Any], folder: Path) -> str:
    session = data.get("session", "stateless")
    if session not in SESSIONS:
        raise TaskRefused(folder, f"task.yaml: session must be one of {', '.join(SESSIONS)}; got {session!r}")
    return str(session)


def is_task_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a task (a ``task.yaml``: arlkit or Terminal-Bench; a ``task.toml``: Harbor)."""
    return (folder / "task.yaml").is_file() or (folder / "task.toml").is_file()


def load_task(folder: str | Path) -> TerminalTask:
    """The task in ``folder``, whichever its layout; a :class:`TaskRefused` (a ``ValueError``) says
    in one line why it is not loaded."""
    from arlkit.envs.terminal import formats  # it builds on this module's task and packing helpers

    folder = Path(folder)
    if (folder / "task.toml").is_file():
        return formats.load_harbor(folder)
    data = _read_yaml(folder / "task.yaml")
    if not isinstance(data, dict):
        raise TaskRefused(folder, "task.yaml: expected a mapping with an 'instruction'")
    if not (folder / "check.yaml").is_file():
        return formats.load_terminal_bench(folder, data)
    instruction = _instruction(data, folder)
    session = _session(data, folder)
    solution_path = folder / "solution.sh"
    if not solution_path.is_file():
        raise TaskRefused(folder, "no solution.sh (the reference solution)", "no-solution")
    files = folder / "files"
    archive = _pack_files(files if files.is_dir() else None)
    tier = str(data.get("tier", "files"))
    check = parse_steps(_read_yaml(folder / "check.yaml"), str(folder / "check.yaml"))
    return TerminalTask(folder.name, tier, instruction, archive, _commands(_read_text(solution_path)), check,
                        session=session)


def _reason(exc: Exception, folder: Path) -> str:
    """``exc``'s message, one line, with ``folder``'s path left out (the report names the folder)."""
    text = exc.reason if isinstance(exc, TaskRefused) else str(exc)
    text = " ".join(text.replace(f"{folder}/", "").split())
    return text.removeprefix(f"{folder}: ").removeprefix(f"{folder.name}: ")


def load_task_set(root: str | Path | None = None) -> tuple[list[TerminalTask], TaskSetReport]:
    """Every task under ``root`` (default: arlkit's shipped tasks), sorted by name, and the report of
    what loaded and what was skipped. ``root`` is a folder of task folders or one task folder (which
    must load). A task folder that cannot load is skipped and logged; a ``ValueError`` only when
    nothing loads, naming the first reasons."""
    root = Path(root) if root else SHIPPED_DIR
    if is_task_folder(root):
        return [load_task(root)], TaskSetReport(str(root), 1)
    if not root.is_dir():
        raise ValueError(f"no task folder at {root}")
    tasks: list[TerminalTask] = []
    skipped: list[SkippedTask] = []
    for folder in sorted(d for d in root.iterdir() if d.is_dir() and is_task_folder(d)):
        try:
            tasks.append(load_task(folder))
        except (ValueError, OSError) as exc:  # a TaskRefused, bad YAML, an unreadable file ...
            kind = exc.kind if isinstance(exc, TaskRefused) else "unreadable"
            skipped.append(SkippedTask(folder.name, _reason(exc, folder), kind))
            _log.warning("terminal task %s skipped: %s", folder, skipped[-1].reason)
    if not tasks:
        if not skipped:
            raise ValueError(f"no task folders (with a task.yaml or task.toml) under {root}")
        first = "; ".join(f"{s.name}: {s.reason}" for s in skipped[:3])
        more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        raise ValueError(f"none of the {len(skipped)} task folders under {root} can be loaded ({first}{more})")
    return tasks, TaskSetReport(str(root), len(tasks), tuple(skipped))


def load_tasks(root: str | Path | None = None) -> list[TerminalTask]:
    """Every task under ``root`` that loads (:func:`load_task_set` without its report)."""
    return load_task_set(root)[0]


def split_tasks(tasks: list[TerminalTask], split: str, seed: int, test_fraction: float) -> list[TerminalTask]:
    """The tasks of ``split``. Benchmark tasks (Terminal-Bench, Harbor) are all test tasks. The
    others, within each tier, are ordered by a seeded hash of their name: the first
    ``round(test_fraction * n)`` are the test split, the rest train (disjoint by name). The
    split's tasks come in hash order."""
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; valid choices: train, test")
    def rank(task: TerminalTask) -> str:
        return hashlib.sha256(f"{seed}:{task.name}".encode()).hexdigest()

    chosen = [t for t in tasks if t.source in BENCHMARK_SOURCES] if split == "test" else []
    own = [t for t in tasks if t.source not in BENCHMARK_SOURCES]
    for tier in sorted({t.tier for t in own}):
        ranked = sorted((t for t in own if t.tier == tier), key=rank)
        n_test = round(test_fraction * len(ranked))
        chosen += ranked[:n_test] if split == "test" else ranked[n_test:]
    return sorted(chosen, key=rank)  # tiers mixed: the first n of a split cover every tier
