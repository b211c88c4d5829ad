"""Checkpoints that survive being killed at any moment, and the run-directory contract.

A checkpoint is one file ``checkpoints/step_NNNNNN.pt`` holding the trainable weights, the optimizer and
scheduler states (critic included), every RNG state (Python, NumPy, torch CPU and CUDA) and the step. It is
written to a temporary file, flushed to disk and renamed into place; the ``latest`` pointer is replaced
the same way, so a kill leaves either the previous or the new checkpoint, never half of one. Resuming
loads the newest loadable checkpoint.

``run.json`` records the run's config; resuming with a different config is refused with the
differences listed, unless forced.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from arlkit.config import ConfigError
from arlkit.train.config import RUNTIME_FIELDS, config_diff

__all__ = [
    "atomic_write_text",
    "claim_run_dir",
    "get_rng_state",
    "latest_checkpoint",
    "load_checkpoint",
    "save_checkpoint",
    "set_rng_state",
]


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
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
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


def save_checkpoint(run: Path, step: int, payload: Mapping[str, Any], *, keep: int = 2) -> Path:
    """Atomically write ``payload`` (plus the RNG states) as the checkpoint of ``step``; keep the
    newest ``keep`` checkpoints."""
    folder = run / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step_{step:06d}.pt"
    tmp = folder / f".step_{step:06d}.pt.tmp"
    data = {**payload, "step": step, "rng": get_rng_state()}
    with open(tmp, "wb") as handle:
        torch.save(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(folder)
    atomic_write_text(folder / "latest", path.name + "\n")
    for old in sorted(folder.glob("step_*.pt"))[:-keep]:
        old.unlink(missing_ok=True)
    for stale in folder.glob(".step_*.tmp"):
        stale.unlink(missing_ok=True)
    return path


def latest_checkpoint(run: Path) -> Path | None:
    """The newest checkpoint of ``run`` (the ``latest`` pointer, else the highest step), or None."""
    folder = run / "checkpoints"
    pointer = folder / "latest"
    if pointer.is_file():
        candidate = folder / pointer.read_text(encoding="utf-8").strip()
        if candidate.is_file():
            return candidate
    found = sorted(folder.glob("step_*.pt"))
    return found[-1] if found else None


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (arlkit's own files: full unpickling)."""
    return torch.load(path, map_location="cpu", weights_only=False)


def claim_run_dir(run: Path, identity: Mapping[str, Any], *, resume: bool, force: bool) -> bool:
    """Prepare ``run`` for a run described by ``identity`` (``{"config": ..., ...}``).

    Returns True when an existing run is being resumed. A fresh run needs an empty (or missing)
    directory; ``resume`` continues an existing one and refuses a different config (runtime fields
    such as ``checkpoint_every`` excepted) unless ``force``, listing the differences.
    """
    info = run / "run.json"
    if info.exists():
        if not resume:
            raise ConfigError(f"{run} already holds a run; pass --resume to continue it or choose another --out")
        try:
            old = json.loads(info.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise ConfigError(f"{info} is not valid JSON; cannot resume") from None
        old_cfg = {k: v for k, v in old.get("config", {}).items() if k not in RUNTIME_FIELDS}
        new_cfg = {k: v for k, v in identity["config"].items() if k not in RUNTIME_FIELDS}
        diff = config_diff(old_cfg, new_cfg)
        if diff and not force:
            raise ConfigError(
                "the config differs from the run being resumed (pass --force to resume anyway): " + "; ".join(diff)
            )
        if diff:
            atomic_write_text(info, json.dumps({**old, "config": identity["config"], "forced_changes": diff}, indent=2) + "\n")
        return True
    if run.exists() and any(p for p in run.iterdir() if p.name not in ("base_model",)):
        if resume:
            raise ConfigError(f"{run} holds no run.json; nothing to resume")
        raise ConfigError(f"{run} is not empty; choose another --out")
    run.mkdir(parents=True, exist_ok=True)
    atomic_write_text(info, json.dumps(dict(identity), indent=2) + "\n")
    return False
