"""Checkpoints carry a SHA-256 manifest: a damaged newest checkpoint is reported in one line and the previous
one is used (the final model equals an uninterrupted run's); none usable stops the run in one line; a
planted pickle is never unpickled (loading is ``weights_only``); a full disk is one line naming the file,
exit 1."""

from __future__ import annotations

import errno
import gc
import json
import os
import shutil
import subprocess
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from arlkit.cli import main
from arlkit.train import read_metrics
from arlkit.rundir import disk_full_named
from arlkit.train.checkpoint import (
    CheckpointError,
    CheckpointWarning,
    checkpoint_problem,
    load_checkpoint,
    load_latest_checkpoint,
    save_checkpoint,
)

from .conftest import EASY_ENV


def _config(tmp: Path, model: Path, **extra: object) -> Path:
    config = {
        "model": str(model), "env": {"name": "frozenlake", "args": EASY_ENV}, "train_tasks": 4, "steps": 3, "tasks_per_step": 2,
        "group_size": 2, "prompt": {"history": 1}, "algo": {"step_rows": True}, "sampling": {"max_new_tokens": 8},
        "optim": {"lr": 1e-3}, "validation": {"every": 0}, "checkpoint_every": 1, "keep_checkpoints": 2,
        "progress": False, "tensorboard": False, **extra,
    }
    path = tmp / f"c-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def finished_run(nano_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 3-step run that was never interrupted (checkpoints of steps 2 and 3 kept) and its config."""
    tmp = tmp_path_factory.mktemp("ckpt")
    config = _config(tmp, nano_dir)
    assert main(["train", "--config", str(config), "--out", str(tmp / "run")]) == 0
    return tmp / "run", config


def _copy_run(reference: Path, tmp_path: Path) -> Path:
    """A copy of the finished run to damage (the module's reference run stays intact)."""
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    return run


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit in the middle of the file (tensor data)
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "flipped": (_flip, "SHA-256 differs"),
    "truncated": (_truncate, "is truncated"),
    "empty": (_empty, "is empty (0 of"),
}


def _comparable(run: Path) -> list[dict]:
    return [{k: v for k, v in m.items() if not k.startswith("time/")} for m in read_metrics(run / "metrics.jsonl")]


def test_the_manifest_holds_each_files_sha256_and_size(finished_run: tuple[Path, Path]) -> None:
    run, _ = finished_run
    folder = run / "checkpoints"
    assert sorted(p.name for p in folder.glob("step_*")) == [
        "step_000002.manifest.json", "step_000002.pt", "step_000003.manifest.json", "step_000003.pt"]
    manifest = json.loads((folder / "step_000003.manifest.json").read_text())
    entry = manifest["files"]["step_000003.pt"]
    digest = subprocess.run(["sha256sum", str(folder / "step_000003.pt")], capture_output=True, text=True, check=True)
    assert entry["sha256"] == digest.stdout.split()[0]
    assert entry["bytes"] == (folder / "step_000003.pt").stat().st_size and manifest["step"] == 3
    assert checkpoint_problem(folder / "step_000003.pt") is None
    assert load_checkpoint(folder / "step_000003.pt")["step"] == 3


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(
    damage: str, finished_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reference, config = finished_run
    run = _copy_run(reference, tmp_path)
    spoil, problem = DAMAGE[damage]
    spoil(run / "checkpoints" / "step_000003.pt")
    capsys.readouterr()

    assert main(["train", "--config", str(config), "--out", str(run), "--resume"]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if "warning:" in line]
    assert len(warnings) == 1, captured.err
    assert "step_000003.pt" in warnings[0] and problem in warnings[0] and "resuming from step_000002.pt" in warnings[0]
    assert "Traceback" not in captured.err
    assert "resumed at step 2" in captured.out
    # the damaged file is set aside, step 3 re-run and checkpointed again, the result is the uninterrupted run's
    assert (run / "checkpoints" / "step_000003.pt.corrupt").exists()
    assert checkpoint_problem(run / "checkpoints" / "step_000003.pt") is None
    assert _comparable(run) == _comparable(reference)
    for name in ("model.safetensors", "config.json"):
        assert (run / "final" / name).read_bytes() == (reference / "final" / name).read_bytes()


def test_no_usable_checkpoint_stops_the_run_in_one_line(
    finished_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reference, config = finished_run
    run = _copy_run(reference, tmp_path)
    _flip(run / "checkpoints" / "step_000003.pt")
    _truncate(run / "checkpoints" / "step_000002.pt")
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    capsys.readouterr()

    assert main(["train", "--config", str(config), "--out", str(run), "--resume"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith("arlkit train: error: no usable checkpoint in ")
    assert "step_000003.pt is corrupt" in err and "step_000002.pt is truncated" in err and "restart" in err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before  # nothing set aside or overwritten
    with pytest.raises(CheckpointError, match="no usable checkpoint"):
        load_latest_checkpoint(run)


def test_a_checkpoint_without_manifest_is_set_aside(
    finished_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the manifest is written first, so a checkpoint without one is not arlkit's: it is never unpickled
    reference, config = finished_run
    run = _copy_run(reference, tmp_path)
    (run / "checkpoints" / "step_000003.manifest.json").unlink()
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--out", str(run), "--resume"]) == 0
    captured = capsys.readouterr()
    assert "resumed at step 2" in captured.out
    assert "step_000003.pt has no manifest step_000003.manifest.json" in captured.err
    assert (run / "checkpoints" / "step_000003.pt.corrupt").is_file()


class _Planted:
    """Unpickling it creates ``marker``: what a checkpoint planted by someone else could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (str(self.marker), "w")


@pytest.mark.parametrize("manifest", ["deleted", "rewritten"])
def test_a_planted_pickle_is_never_run_and_the_previous_checkpoint_is_used(
    manifest: str, finished_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    reference, config = finished_run
    run = _copy_run(reference, tmp_path)
    newest, marker = run / "checkpoints" / "step_000003.pt", tmp_path / "unpickled"
    state = load_checkpoint(newest)
    torch.save({**state, "extra": _Planted(marker)}, newest)  # every key resume needs, plus the object
    manifest_path = run / "checkpoints" / "step_000003.manifest.json"
    if manifest == "deleted":
        manifest_path.unlink()
    else:  # a manifest that matches the planted file
        digest = subprocess.run(["sha256sum", str(newest)], capture_output=True, text=True, check=True).stdout.split()[0]
        entry = {"sha256": digest, "bytes": newest.stat().st_size}
        manifest_path.write_text(json.dumps({"format": 1, "step": 3, "files": {newest.name: entry}}))
    capsys.readouterr()

    assert main(["train", "--config", str(config), "--out", str(run), "--resume"]) == 0
    captured = capsys.readouterr()
    assert not marker.exists()
    named = [line for line in captured.err.splitlines() if "step_000003.pt" in line and "warning:" in line]
    # refused for what it holds, or, without a manifest, before it is read at all
    why = "tensors and plain values" if manifest == "rewritten" else "has no manifest"
    assert any(why in line and "resuming from step_000002.pt" in line for line in named), captured.err
    assert "resumed at step 2" in captured.out and "Traceback" not in captured.err
    assert (run / "final" / "model.safetensors").read_bytes() == (reference / "final" / "model.safetensors").read_bytes()


@pytest.fixture()
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB tmpfs: a nano checkpoint (~12 MB) does not fit, the run's small files do."""
    where = tmp_path / "full"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a size-capped tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        gc.collect()  # the failed run's log files are closed when its frames (held by the exception) are freed
        subprocess.run(["umount", str(where)], check=True)


def _assert_disk_full_line(err: str, checkpoint: Path) -> None:
    line = err.strip()
    assert line.count("\n") == 0 and "Traceback" not in line and "inline_container" not in line, err
    assert line.startswith("arlkit train: error: No space left on device while writing ")
    assert str(checkpoint) in line and "--resume" in line


def test_a_full_disk_is_one_line_naming_the_checkpoint(
    full_disk: Path, nano_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = full_disk / "run"
    config = _config(tmp_path, nano_dir, steps=1)
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--out", str(run)]) == 1
    _assert_disk_full_line(capsys.readouterr().err, run / "checkpoints" / "step_000001.pt")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == []  # no temporary file left behind
    assert json.loads((run / "run.json").read_text())["config"]["steps"] == 1  # the run's files are intact


def test_a_full_disk_inside_torch_save_is_reported_with_the_os_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], nano_dir: Path
) -> None:
    # The same failure on any machine: the checkpoint's file handle refuses every write, as on a full disk;
    # torch.save wraps that in an inline_container.cc RuntimeError, which must not be what the user sees.
    import builtins

    import arlkit.train.checkpoint as checkpoint_module

    class NoSpace:
        def __init__(self, path: object) -> None:
            self._handle = builtins.open(path, "wb")  # type: ignore[call-overload]

        def write(self, data: object) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def flush(self) -> None:
            pass

        def fileno(self) -> int:
            return self._handle.fileno()

        def __enter__(self) -> NoSpace:
            return self

        def __exit__(self, *exc: object) -> None:
            self._handle.close()

    def open_on_a_full_disk(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if mode == "wb" and str(file).endswith(".pt.tmp"):
            return NoSpace(file)
        return builtins.open(file, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(checkpoint_module, "open", open_on_a_full_disk, raising=False)
    run = tmp_path / "run"
    config = _config(tmp_path, nano_dir, steps=1)
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--out", str(run)]) == 1
    _assert_disk_full_line(capsys.readouterr().err, run / "checkpoints" / "step_000001.pt")
    assert list((run / "checkpoints").iterdir()) == []


def test_save_checkpoint_keeps_earlier_checkpoints_when_the_disk_fills(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch

    first = save_checkpoint(tmp_path, 1, {"model": {"w": torch.ones(3)}})

    def no_space(obj: object, f: object, *args: object, **kwargs: object) -> None:
        f.write(b"partial")  # type: ignore[attr-defined]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", no_space)
    with pytest.raises(OSError, match="No space left") as info:
        save_checkpoint(tmp_path, 2, {"model": {"w": torch.zeros(3)}})
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "checkpoints" / "step_000002.pt")
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "latest", "step_000001.manifest.json", "step_000001.pt"]
    assert load_checkpoint(first)["model"]["w"].tolist() == [1.0, 1.0, 1.0]


def test_disk_full_named_names_the_path_whatever_wrapped_the_error(tmp_path: Path) -> None:
    class SafetensorError(Exception):  # how safetensors reports it: its own type, the OS error in the text
        pass

    with pytest.raises(OSError) as info, disk_full_named(tmp_path / "final"):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "final")
    with pytest.raises(ValueError, match="unrelated"), disk_full_named(tmp_path):
        raise ValueError("unrelated")


@pytest.mark.parametrize(
    ("failure", "wanted"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device while writing a file under "),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "Disk quota exceeded while writing a file under "),
        (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"),
         "writing a PyTorch file under "),
    ],
)
def test_the_cli_reports_write_failures_without_a_file_name_in_one_line(
    failure: Exception, wanted: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    # a write deep in a library (a log line, torch.save elsewhere) that names no file: the line names --out
    import arlkit.recipes.rl

    def fails(*args: object, **kwargs: object) -> None:
        raise failure

    monkeypatch.setattr(arlkit.recipes.rl, "train", fails)
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "validation.every=0"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and wanted + str(out) in err, err


def test_other_os_errors_are_not_disguised(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import arlkit.recipes.rl

    def fails(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(arlkit.recipes.rl, "train", fails)
    with pytest.raises(PermissionError):
        main(["train", "--out", str(tmp_path / "run"), "validation.every=0"])
