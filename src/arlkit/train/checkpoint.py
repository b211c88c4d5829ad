"""Checkpoints that survive being killed at any moment, verified on resume, and the run-directory contract.

A checkpoint is one file ``checkpoints/step_NNNNNN.pt`` holding the trainable weights, the optimizer and
scheduler states (critic included), every RNG state (Python, NumPy, torch CPU and CUDA) and the step, plus
its manifest ``checkpoints/step_NNNNNN.manifest.json``: the SHA-256 and size of each file as written.
Both are written to temporary files, flushed to disk and renamed, the manifest first, so a kill leaves
either the previous or the new checkpoint, never half of one. The ``latest`` pointer is replaced the
same way (informational: resuming picks by step number).

Resuming verifies the newest checkpoint against its manifest before unpickling it. A checkpoint that
does not match (a flipped bit, a truncated or empty file) or cannot be read is reported in one
:class:`CheckpointWarning` line, set aside as ``*.corrupt``, and the next older one is tried; when
none is usable, :class:`CheckpointError` stops the run. A checkpoint without a manifest (written before
manifests existed) is loaded unverified with a warning (docs/training.md §5).

``run.json`` records the run's config; resuming with a different config is refused with the
differences listed, unless forced. A full disk while writing is an ``OSError(ENOSPC)`` naming the file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arlkit.config import ConfigError, RunError, config_diff
from arlkit.train.config import RUNTIME_FIELDS

__all__ = [
    "CheckpointError",
    "CheckpointWarning",
    "atomic_write_text",
    "check_run_dir",
    "checkpoint_problem",
    "claim_run_dir",
    "disk_full_named",
    "get_rng_state",
    "latest_checkpoint",
    "load_checkpoint",
    "load_latest_checkpoint",
    "save_checkpoint",
    "set_rng_state",
]

MANIFEST_FORMAT = 1
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_DISK_FULL_TEXT = ("No space left on device", "os error 28", "Disk quota exceeded")
_REQUIRED_KEYS = ("model", "step", "rng")


class CheckpointError(RunError):
    """No checkpoint of a run can be resumed from (or one does not fit the model); one line, exit 1."""


class CheckpointWarning(UserWarning):
    """A checkpoint was skipped (corrupt, truncated, empty) or loaded without verification."""


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


def _fsync_dir(path: Path) -> None:
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


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (the temporary file is removed
    when the write fails; a full disk raises ``OSError(ENOSPC)`` naming ``path``)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with disk_full_named(path), open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def get_rng_state() -> dict[str, Any]:
    """Every global RNG state a training step can touch."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore :func:`get_rng_state`'s result."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class _HashingWriter:
    """A file-like object for ``torch.save`` that hashes what it writes and keeps the file's own
    ``OSError`` (torch's writer turns a failed write, e.g. a full disk, into an uninformative
    ``inline_container.cc`` RuntimeError)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self.sha256 = hashlib.sha256()
        self.size = 0
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        view = memoryview(data)
        try:
            self._handle.write(view)
        except OSError as exc:
            self.error = exc
            raise
        self.sha256.update(view)
        self.size += view.nbytes
        return view.nbytes

    def take_error(self) -> OSError | None:
        """The failed write's error, forgotten here: torch's writer holds this object, and an exception kept
        on it would keep every frame of the failed save (and the run's open files) alive."""
        error, self.error = self.error, None
        return error

    def flush(self) -> None:
        self._handle.flush()


def _manifest_path(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(".pt") + ".manifest.json")


def save_checkpoint(run: Path, step: int, payload: Mapping[str, Any], *, keep: int = 2) -> Path:
    """Atomically write ``payload`` (plus the RNG states) as the checkpoint of ``step`` with its manifest;
    keep the newest ``keep`` checkpoints. A full disk raises ``OSError(ENOSPC)`` naming the checkpoint and
    leaves the earlier checkpoints as they were."""
    folder = run / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step_{step:06d}.pt"
    tmp = folder / f".{path.name}.tmp"
    data = {**payload, "step": step, "rng": get_rng_state()}
    try:
        with disk_full_named(path):
            with open(tmp, "wb") as handle:
                writer = _HashingWriter(handle)
                try:
                    torch.save(data, writer)
                except RuntimeError:
                    if writer.error is None:
                        raise
                    raise writer.take_error() from None
                handle.flush()
                os.fsync(handle.fileno())
            manifest = {"format": MANIFEST_FORMAT, "step": step,
                        "files": {path.name: {"sha256": writer.sha256.hexdigest(), "bytes": writer.size}}}
            # The manifest lands first: a checkpoint file without one can only predate manifests.
            atomic_write_text(_manifest_path(path), json.dumps(manifest, indent=2) + "\n")
            os.replace(tmp, path)
            _fsync_dir(folder)
            atomic_write_text(folder / "latest", path.name + "\n")
    finally:
        tmp.unlink(missing_ok=True)
    for old in _checkpoints(folder)[keep:]:
        old.unlink(missing_ok=True)
        _manifest_path(old).unlink(missing_ok=True)
    for orphan in folder.glob("step_*.manifest.json"):
        if not orphan.with_name(orphan.name.removesuffix(".manifest.json") + ".pt").exists():
            orphan.unlink(missing_ok=True)
    for stale in folder.glob(".step_*.tmp"):
        stale.unlink(missing_ok=True)
    return path


def _checkpoints(folder: Path) -> list[Path]:
    """The checkpoint files in ``folder``, newest (highest step) first."""
    return sorted(folder.glob("step_*.pt"), reverse=True)


def latest_checkpoint(run: Path) -> Path | None:
    """The newest checkpoint file of ``run`` (highest step), or None; not verified."""
    found = _checkpoints(run / "checkpoints")
    return found[0] if found else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def checkpoint_problem(path: Path) -> str | None:
    """What is wrong with the checkpoint ``path`` according to its manifest (None when it matches, or when
    it has no manifest: see :func:`load_checkpoint`). Reads the whole file once."""
    manifest_path = _manifest_path(path)
    if not manifest_path.exists():
        return None
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        entry = manifest["files"][path.name]
        want_sha, want_size = str(entry["sha256"]), int(entry["bytes"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        return f"its manifest {manifest_path.name} is unreadable ({type(exc).__name__}: {exc})"
    try:
        size = path.stat().st_size
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if size == 0:
        return f"is empty (0 of {want_size} bytes)"
    if size < want_size:
        return f"is truncated ({size} of {want_size} bytes)"
    if size > want_size:
        return f"has {size} bytes, its manifest says {want_size}"
    try:
        if _sha256(path) != want_sha:
            return "is corrupt: its SHA-256 differs from the manifest's (the content changed after it was written)"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`, verified against its manifest first (then
    unpickled in full: arlkit's own files). Raises :class:`CheckpointError` naming the file and what is
    wrong; a checkpoint without a manifest is read unverified with a :class:`CheckpointWarning`."""
    path = Path(path)
    problem = checkpoint_problem(path)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path} {problem}")
    if not _manifest_path(path).exists():
        warnings.warn(f"checkpoint {path} has no manifest (written before checkpoints recorded SHA-256 sums); "
                      "loading it unverified", CheckpointWarning, stacklevel=2)
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any failure to unpickle is a damaged file
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise CheckpointError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {first})") from None
    if not isinstance(state, dict) or any(key not in state for key in _REQUIRED_KEYS):
        raise CheckpointError(f"checkpoint {path} is not an arlkit checkpoint (needs the keys {', '.join(_REQUIRED_KEYS)})")
    return state


def load_latest_checkpoint(run: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest usable checkpoint of ``run`` and its state, or None when there is none at all.

    Each newer checkpoint that fails :func:`load_checkpoint` is renamed to ``*.corrupt`` (with its
    manifest) and reported in one :class:`CheckpointWarning` naming it, what is wrong and the checkpoint
    used instead. Raises :class:`CheckpointError` when checkpoints exist but none is usable.
    """
    folder = run / "checkpoints"
    problems: list[tuple[Path, str]] = []
    for path in _checkpoints(folder):
        try:
            state = load_checkpoint(path)
        except CheckpointError as exc:
            problems.append((path, str(exc)))
            continue
        for bad, problem in problems:
            for part in (bad, _manifest_path(bad)):
                if part.exists():
                    os.replace(part, part.with_name(part.name + ".corrupt"))
            warnings.warn(f"{problem}; resuming from {path.name} instead (set aside as {bad.name}.corrupt)",
                          CheckpointWarning, stacklevel=2)
        return path, state
    if problems:
        raise CheckpointError(
            f"no usable checkpoint in {folder}: " + "; ".join(p.removeprefix("checkpoint ") for _, p in problems)
            + f". Delete {folder} to restart the run from step 0, or train into another --out"
        )
    return None


def check_run_dir(run: Path, identity: Mapping[str, Any], *, resume: bool, force: bool) -> list[str] | None:
    """Whether ``run`` may take a run described by ``identity`` (``{"config": ..., ...}``), writing nothing.

    Returns None for a fresh run, else the config differences of the run being resumed (empty when
    none). A fresh run needs an empty (or missing) directory (a ``base_model`` built there by an
    earlier attempt is allowed); ``resume`` continues an existing one and refuses a different config
    (runtime fields such as ``checkpoint_every`` excepted) unless ``force``, listing the differences.
    Raises :class:`ConfigError`.
    """
    info = run / "run.json"
    if info.exists():
        if not resume:
            raise ConfigError(f"{run} already holds a run; pass --resume to continue it or choose another --out")
        try:
            old = json.loads(info.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ConfigError(f"{info} is not valid JSON; cannot resume") from None
        old_cfg = {k: v for k, v in old.get("config", {}).items() if k not in RUNTIME_FIELDS}
        new_cfg = {k: v for k, v in identity["config"].items() if k not in RUNTIME_FIELDS}
        diff = config_diff(old_cfg, new_cfg)
        if diff and not force:
            raise ConfigError(
                "the config differs from the run being resumed (pass --force to resume anyway): " + "; ".join(diff)
            )
        return diff
    if run.exists() and not run.is_dir():
        raise ConfigError(f"{run} is a file; choose a directory for --out")
    if run.exists() and any(p for p in run.iterdir() if p.name not in ("base_model",)):
        if resume:
            raise ConfigError(f"{run} holds no run.json; nothing to resume")
        raise ConfigError(f"{run} is not empty; choose another --out")
    return None


def claim_run_dir(run: Path, identity: Mapping[str, Any], *, resume: bool, force: bool) -> bool:
    """Take ``run`` for the run described by ``identity`` after :func:`check_run_dir`: write ``run.json``
    (a fresh run) or record the forced config changes (a resumed one). Returns True when resuming."""
    diff = check_run_dir(run, identity, resume=resume, force=force)
    info = run / "run.json"
    if diff is not None:
        if diff:
            old = json.loads(info.read_text(encoding="utf-8"))
            atomic_write_text(info, json.dumps({**old, "config": identity["config"], "forced_changes": diff}, indent=2) + "\n")
        return True
    run.mkdir(parents=True, exist_ok=True)
    atomic_write_text(info, json.dumps(dict(identity), indent=2) + "\n")
    return False
