"""Checkpoints that survive being killed at any moment, verified on resume.

A checkpoint is one file ``checkpoints/step_NNNNNN.pt`` holding the trainable weights, the optimizer and
scheduler states (critic included), every RNG state (Python, NumPy, torch CPU and CUDA) and the step, plus
its manifest ``checkpoints/step_NNNNNN.manifest.json``: the SHA-256 and size of each file as written.
Both are written to temporary files, flushed to disk and renamed, the manifest first, so a kill leaves
either the previous or the new checkpoint, never half of one. The ``latest`` pointer is replaced the
same way (informational: resuming picks by step number).

Resuming verifies the newest checkpoint against its manifest, then reads it with
``torch.load(weights_only=True)``: tensors and plain Python values only, so reading a checkpoint never
runs code, whatever a manifest says (a file and its manifest can both be replaced). Every value a
checkpoint holds is of those types (the NumPy RNG state is stored as plain numbers). A checkpoint
that does not match (a flipped bit, a truncated or empty file), cannot be read, or holds anything
else (a pickled object) is reported in one :class:`CheckpointWarning` line, set aside as ``*.corrupt``,
and the next older one is tried; when none is usable, :class:`CheckpointError` stops the run. A
checkpoint without a manifest is loaded unverified with a warning (docs/training.md#checkpoints-and-resume).

The run folder itself (``run.json``, resume, ``--force``) is :mod:`arlkit.rundir`'s. A full disk while
writing is an ``OSError(ENOSPC)`` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arlkit.config import RunError
from arlkit.rundir import atomic_write_text, disk_full_named, fsync_dir

__all__ = [
    "CheckpointError",
    "CheckpointWarning",
    "checkpoint_problem",
    "get_rng_state",
    "latest_checkpoint",
    "load_checkpoint",
    "load_latest_checkpoint",
    "save_checkpoint",
    "restore_state",
    "set_rng_state",
]

MANIFEST_FORMAT = 1
_REQUIRED_KEYS = ("model", "step", "rng")


class CheckpointError(RunError):
    """No checkpoint of a run can be resumed from (or one does not fit the model); one line, exit 1."""


class CheckpointWarning(UserWarning):
    """A checkpoint was skipped (no manifest, corrupt, truncated, empty)."""


def get_rng_state() -> dict[str, Any]:
    """Every global RNG state a training step can touch, as tensors and plain Python values (what
    ``torch.load(weights_only=True)`` reads)."""
    name, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {"name": str(name), "keys": [int(k) for k in keys], "pos": int(pos), "has_gauss": int(has_gauss),
                  "gauss": float(gauss)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore :func:`get_rng_state`'s result."""
    random.setstate(state["python"])
    legacy = state["numpy"]
    np.random.set_state((legacy["name"], np.array(legacy["keys"], dtype=np.uint32), legacy["pos"], legacy["has_gauss"],
                         legacy["gauss"]))
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
            atomic_write_text(_manifest_path(path), json.dumps(manifest, indent=2) + "\n", fsync=True)
            os.replace(tmp, path)
            fsync_dir(folder)
            atomic_write_text(folder / "latest", path.name + "\n", fsync=True)
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
    """What is wrong with the checkpoint ``path`` according to its manifest (None when it matches). A
    checkpoint without one is refused: :func:`save_checkpoint` writes the manifest first. Reads the whole
    file once."""
    manifest_path = _manifest_path(path)
    if not manifest_path.exists():
        return f"has no manifest {manifest_path.name}, so it cannot be verified"
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
    """Read a checkpoint written by :func:`save_checkpoint`, verified against its manifest first, with
    ``weights_only=True`` (tensors and plain values: nothing that runs code). Raises :class:`CheckpointError`
    naming the file and what is wrong (no manifest, a mismatch, a pickled object)."""
    path = Path(path)
    problem = checkpoint_problem(path)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path} {problem}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f" (a pickled {found.group(1)[:120]})" if found else ""
        raise CheckpointError(f"checkpoint {path} holds something other than tensors and plain values{what}; "
                              "not loaded, since unpickling it could run code") from None
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


def restore_state(checkpoint: Path, state: Mapping[str, Any], parts: Mapping[str, Any], *,
                  partial: tuple[str, ...] = ()) -> None:
    """Load ``state[name]`` into each object of ``parts`` (a model, optimizer, scheduler: anything with
    ``load_state_dict``) and restore the RNG states. Names in ``partial`` may lack keys (LoRA: only the
    adapters are saved) but not have extra ones. A state that does not fit raises
    :class:`CheckpointError` naming the checkpoint."""
    try:
        for name, obj in parts.items():
            if name in partial:
                loaded = obj.load_state_dict(state[name], strict=False)
                if loaded.unexpected_keys:
                    raise ValueError(f"unexpected keys {loaded.unexpected_keys[:3]}")
            else:
                obj.load_state_dict(state[name])
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise CheckpointError(f"checkpoint {checkpoint} does not fit this run's model ({first})") from None
    set_rng_state(state["rng"])
