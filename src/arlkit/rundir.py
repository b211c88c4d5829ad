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

Keys listed in ``volatile`` (worker counts, timeouts, progress bars) may change between runs.
Files are written through a temporary sibling and a rename (:func:`atomic_path`), so a kill never
leaves half a file; a full disk raises ``OSError(ENOSPC)`` naming the file it was writing.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arlkit.config import ConfigError, config_diff

__all__ = [
    "RunClaim",
    "atomic_path",
    "atomic_write_json",
    "atomic_write_jsonl",
    "atomic_write_text",
    "check_run_dir",
    "claim_run_dir",
    "disk_full_named",
    "fsync_dir",
    "read_complete_jsonl",
]

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
        old.pop("forced_changes", None)  # the record of an earlier --force, not part of the identity
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
    if run.exists() and allowed is not None and any(p.name not in allowed for p in run.iterdir()):
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
        atomic_write_json(info, dict(identity), fsync=True)
        return RunClaim(resumed=False)
    if claim.changes:
        old = json.loads(info.read_text(encoding="utf-8")) if merge else {}
        atomic_write_json(info, {**old, **identity, "forced_changes": claim.changes}, fsync=True)
    return claim
