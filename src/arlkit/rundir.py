"""Run folders: claiming one for a run, resuming it, and writing its files atomically.

Every command that writes a run folder (``arlkit eval``, ``sft``, ``train``, ``demo``) records the
run's *identity* (the config values that decide its results) in a JSON file there and calls
:func:`claim_run_dir` before any work:

- a missing or empty folder is taken for a fresh run (the identity is written);
- a folder holding the same identity is resumed (finished work is kept, the rest is done);
- a folder holding another identity is refused with the differences listed, unless ``force``
  (the run is resumed anyway and the changes are recorded under ``forced_changes``);
- ``resume=False`` refuses any existing run (``arlkit train`` without ``--resume``); ``resume=True``
  continues one, or starts in an empty folder; ``resume=None`` (the default) decides from the folder.

A record starts with ``schema`` (:data:`RUN_SCHEMA`, the shape of the identities this arlkit writes)
and ``arlkit`` (the version that wrote it); a record of another shape is refused with one line naming
the arlkit that wrote it. Keys listed in ``volatile`` (worker counts, timeouts, progress bars) may change between runs.
Files are written through a temporary sibling and a rename (:func:`atomic_path`), so a kill never
leaves half a file; a full disk raises ``OSError(ENOSPC)`` naming the file it was writing.

A run folder has one writer at a time: :func:`hold_run_dir` (and the :func:`holds_run_dir` decorator
on each library function that writes one) takes an exclusive ``flock`` on ``.arlkit.lock`` inside the
folder for the run's life and removes the file when the run ends. The kernel releases the lock when the
process ends, however it ends, so a killed run never leaves a stale lock (only the file, which the next
run takes over); a second run on the same folder is refused with :class:`RunDirBusy`, naming the
holder's pid, command and start time.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import inspect
import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from arlkit import __version__
from arlkit.config import ConfigError, config_diff

__all__ = [
    "LOCK_NAME",
    "RUN_SCHEMA",
    "RunClaim",
    "RunDirBusy",
    "atomic_path",
    "atomic_write_json",
    "atomic_write_jsonl",
    "atomic_write_text",
    "check_run_dir",
    "claim_run_dir",
    "disk_full_named",
    "fsync_dir",
    "hold_run_dir",
    "holds_run_dir",
    "read_complete_jsonl",
    "run_record",
    "run_dir_entries",
]

RUN_SCHEMA = 1
"""The shape of run records: a change to any command's identity (its config's fields or sections)
raises it, so a folder written by another shape is refused instead of compared key by key."""

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_DISK_FULL_TEXT = ("No space left on device", "os error 28", "Disk quota exceeded")


def _is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
        return True
    return any(text in str(exc) for text in _DISK_FULL_TEXT)


@contextmanager
def disk_full_named(path: Path) -> Iterator[None]:
    """Re-raise a full disk inside the block as ``OSError(ENOSPC, ..., path)``, whatever library wrapped it
    (safetensors' ``SafetensorError``, an ``OSError`` without a file name)."""
    try:
        yield
    except Exception as exc:
        if not _is_disk_full(exc) or (isinstance(exc, OSError) and exc.filename):
            raise
        code = exc.errno if isinstance(exc, OSError) and exc.errno in _DISK_FULL else errno.ENOSPC
        raise OSError(code, os.strerror(code), str(path)) from exc


def fsync_dir(path: Path) -> None:
    """Flush a folder's entries (a rename) to disk; best effort."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | Path, *, fsync: bool = False) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write; renamed over ``path`` when the block ends normally,
    removed when it raises. ``fsync`` flushes the file and its folder to disk (checkpoints, run
    records). The temporary name keeps the suffix (``.x.tmp.png``), so writers that pick a format
    by suffix (matplotlib) still do."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        with disk_full_named(path):
            yield tmp
            if fsync:
                fd = os.open(tmp, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def atomic_write_text(path: str | Path, text: str, *, fsync: bool = False, errors: str = "strict") -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; ``errors="replace"`` for model text that may hold
    lone surrogates."""
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_bytes(text.encode("utf-8", errors=errors))


def atomic_write_json(path: str | Path, data: Any, *, fsync: bool = False, sort_keys: bool = False) -> None:
    """``data`` as indented JSON plus a newline, atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=sort_keys) + "\n", fsync=fsync)


def atomic_write_jsonl(path: str | Path, records: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object per line, atomically (a log rewritten on resume)."""
    atomic_write_text(path, "".join(json.dumps(dict(r)) + "\n" for r in records))


@dataclass(frozen=True)
class RunClaim:
    """The outcome of :func:`claim_run_dir`.

    Attributes:
        resumed: the folder held this run already (its finished work is to be kept).
        changes: with ``force``, the identity's differences from the run being resumed.
    """

    resumed: bool
    changes: list[str] = field(default_factory=list)


def read_complete_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The complete lines of a JSON-lines file written by appending (a half-written last line, left
    by a kill, is ignored); ``[]`` when the file does not exist."""
    p = Path(path)
    if not p.exists():
        return []
    raw = p.read_text(encoding="utf-8")
    lines = raw.split("\n")
    complete = lines[:-1] if not raw.endswith("\n") else lines
    return [json.loads(line) for line in complete if line.strip()]


def _without(identity: Mapping[str, Any], volatile: Sequence[str]) -> dict[str, Any]:
    """``identity`` less the dotted ``volatile`` keys."""
    out = json.loads(json.dumps(identity))  # a deep copy in the form the record takes
    for key in volatile:
        *path, last = key.split(".")
        node: Any = out
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return out


def check_run_dir(
    run: str | Path,
    identity: Mapping[str, Any],
    *,
    record: str = "run.json",
    resume: bool | None = None,
    force: bool = False,
    volatile: Sequence[str] = (),
    allowed: Sequence[str] | None = (),
    what: str = "run",
) -> RunClaim | None:
    """What :func:`claim_run_dir` would do, writing nothing: None for a fresh run, else the claim of the
    run being resumed. ``allowed`` names files a fresh run may find in the folder (a model built there
    by an earlier attempt; None: anything); ``what`` names the record in messages. Raises :class:`ConfigError` with one line naming the problem."""
    run = Path(run)
    info = run / record
    if info.exists():
        if resume is False:
            raise ConfigError(f"{run} already holds a run; pass --resume to continue it or choose another --out")
        try:
            old = json.loads(info.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ConfigError(f"{info} is not valid JSON; choose another --out") from None
        if not isinstance(old, dict):
            raise ConfigError(f"{info} does not hold a run record; choose another --out")
        if old.get("schema") != RUN_SCHEMA:
            writer = f"arlkit {old['arlkit']}" if "arlkit" in old else "another arlkit"
            raise ConfigError(f"{run} holds a run written by {writer} (record schema {old.get('schema', 'none')}; "
                              f"arlkit {__version__} reads schema {RUN_SCHEMA}); choose another --out")
        for key in ("schema", "arlkit", "forced_changes"):  # forced_changes: the record of an earlier --force
            old.pop(key, None)
        diff = config_diff(_without(old, volatile), _without(identity, volatile))
        if diff and not force:
            keys = ", ".join(dict.fromkeys(line.split(":", 1)[0] for line in diff))
            raise ConfigError(
                f"{run} holds a different {what} (differs in: {keys}): {'; '.join(diff)}; choose another --out or "
                "delete it"
                + (", or pass --force to resume it anyway" if resume else "")
            )
        return RunClaim(resumed=True, changes=diff)
    if run.exists() and not run.is_dir():
        raise ConfigError(f"{run} is a file; choose a directory for --out")
    if run.exists() and allowed is not None and any(p.name not in allowed for p in run_dir_entries(run)):
        if resume:
            raise ConfigError(f"{run} holds no {record}; nothing to resume")
        raise ConfigError(f"{run} is not empty and holds no {record}; choose another --out")
    return None  # a fresh run (with ``resume``, too: a run killed before it wrote its record starts over)


def claim_run_dir(
    run: str | Path,
    identity: Mapping[str, Any],
    *,
    record: str = "run.json",
    resume: bool | None = None,
    force: bool = False,
    volatile: Sequence[str] = (),
    allowed: Sequence[str] | None = (),
    what: str = "run",
    merge: bool = False,
) -> RunClaim:
    """Take ``run`` for the run described by ``identity`` (see the module docstring): write ``record``
    for a fresh run; for a forced resume, record the new identity and the changes. ``merge`` keeps the
    record's other keys (a run may store more than its identity there, as ``arlkit train`` does)."""
    run = Path(run)
    claim = check_run_dir(run, identity, record=record, resume=resume, force=force, volatile=volatile,
                          allowed=allowed, what=what)  # fmt: skip
    info = run / record
    if claim is None:
        run.mkdir(parents=True, exist_ok=True)
        atomic_write_json(info, run_record(identity), fsync=True)
        return RunClaim(resumed=False)
    if claim.changes:
        old = json.loads(info.read_text(encoding="utf-8")) if merge else {}
        atomic_write_json(info, {**old, **run_record(identity), "forced_changes": claim.changes}, fsync=True)
    return claim


def run_record(identity: Mapping[str, Any]) -> dict[str, Any]:
    """``identity`` as a run record: the schema and the writing arlkit first."""
    return {"schema": RUN_SCHEMA, "arlkit": __version__, **identity}


# -- one writer per run folder ----------------------------------------------------------------------

LOCK_NAME = ".arlkit.lock"
"""The lock file inside a run folder; it holds the holder's pid, command and start time as JSON."""

_F = TypeVar("_F", bound=Callable[..., Any])


class RunDirBusy(ConfigError):
    """Another run (another process, or another thread of this one) holds the run folder."""


@dataclass
class _Held:
    fd: int
    thread: int
    depth: int
    created: Path | None  # the topmost folder taking the lock created, or None


_HELD: dict[Path, _Held] = {}
_HELD_GUARD = threading.Lock()


def run_dir_entries(path: str | Path) -> list[Path]:
    """The entries of the folder ``path`` other than its lock file."""
    return [p for p in Path(path).iterdir() if p.name != LOCK_NAME]


def _holder_line() -> str:
    command = shlex.join([Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]])
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return json.dumps({"pid": os.getpid(), "command": command[:300], "started": started}) + "\n"


def _describe_holder(fd: int) -> str:
    """The holder recorded in the lock file open as ``fd`` (it writes it just after taking the lock,
    so an empty file is read again for a moment)."""
    deadline = time.monotonic() + 1.0
    while True:
        try:
            holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8", errors="replace"))
            return f"pid {int(holder['pid'])}, started {holder['started']}: {str(holder['command'])!r}"
        except (OSError, ValueError, KeyError, TypeError):
            if time.monotonic() > deadline:
                return "its pid and command are not recorded"
            time.sleep(0.02)


def _unusable(folder: Path, exc: OSError) -> ConfigError:
    if folder.exists() and not folder.is_dir():
        return ConfigError(f"{folder} is a file; choose a directory for --out")
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(folder) else ""
    return ConfigError(f"cannot write the run folder {folder}: {exc.strerror or exc}{where}; choose another --out")


def _lock(folder: Path) -> tuple[int, Path | None]:
    """An fd of ``folder``'s lock file holding an exclusive flock, and the topmost folder created for it."""
    created = next((p for p in reversed([folder, *folder.parents]) if not p.exists()), None)
    try:
        for _ in range(20):
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _describe_holder(fd)
                os.close(fd)
                raise RunDirBusy(f"{folder} is in use by another run ({holder}); wait for it to end or choose "
                                 "another --out") from None
            try:
                if os.stat(folder / LOCK_NAME).st_ino == os.fstat(fd).st_ino:  # not removed by its last holder
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, _holder_line().encode("utf-8"), 0)
                    return fd, created
            except FileNotFoundError:
                pass  # removed by its last holder after we opened it: take a new one
            except OSError:
                os.close(fd)
                raise
            os.close(fd)
    except OSError as exc:
        raise _unusable(folder, exc) from None
    raise RunDirBusy(f"{folder} is being taken and released by other runs; try again")


def _unlock(folder: Path, held: _Held) -> None:
    """Remove the lock file and release the lock (a run that opened the file meanwhile finds it
    removed and takes a new one); a folder this run created and left empty (a refused run) is removed."""
    try:
        (folder / LOCK_NAME).unlink(missing_ok=True)
        if held.created is not None and not any(folder.iterdir()):
            for part in [folder, *folder.parents]:
                part.rmdir()
                if part == held.created:
                    break
    except OSError:
        pass  # the folder is in use after all (or gone): leave it
    finally:
        os.close(held.fd)


@contextmanager
def hold_run_dir(path: str | Path) -> Iterator[Path]:
    """Hold an exclusive lock on the run folder ``path`` (created if needed) for the block.

    Another process holding it, or another thread of this one, raises :class:`RunDirBusy` naming the
    holder; the same thread may take it again (a run calling another on its own folder). A folder that
    cannot be created or written raises :class:`ConfigError` in one line. When the block ends, a folder
    the lock created and nothing else wrote to is removed again, so a refused run leaves no trace."""
    folder = Path(os.path.abspath(path))
    with _HELD_GUARD:
        held = _HELD.get(folder)
        if held is not None and held.thread != threading.get_ident():
            raise RunDirBusy(f"{folder} is in use by another run of this process (pid {os.getpid()}); wait for it "
                             "to end or choose another --out")
        if held is None:
            fd, created = _lock(folder)
            held = _HELD[folder] = _Held(fd, threading.get_ident(), 0, created)
        held.depth += 1
    try:
        yield folder
    finally:
        with _HELD_GUARD:
            held.depth -= 1
            if held.depth == 0:
                del _HELD[folder]
                _unlock(folder, held)


def holds_run_dir(param: str = "out") -> Callable[[_F], _F]:
    """Decorate a function that writes the run folder given as its argument ``param``: the call holds
    :func:`hold_run_dir` on it (no lock when the argument is ``None``)."""

    def decorate(fn: _F) -> _F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind_partial(*args, **kwargs)
            folder = bound.arguments.get(param, signature.parameters[param].default)
            if folder is None or folder is inspect.Parameter.empty:
                return fn(*args, **kwargs)
            with hold_run_dir(folder):
                return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return decorate
