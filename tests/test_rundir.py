"""Run folders (:mod:`arlkit.rundir`): claim, identity check, resume, --force, atomic writes, and one
writer at a time (the lock)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from arlkit import __version__
from arlkit.config import ConfigError
from arlkit.rundir import (
    LOCK_NAME, RUN_SCHEMA, RunDirBusy, atomic_path, atomic_write_json, atomic_write_text, check_run_dir, claim_run_dir, hold_run_dir,
)

DEADLINE_S = 60.0

IDENTITY = {"config": {"lr": 0.1, "steps": 10, "progress": True}, "version": 1}
RECORD = {"schema": RUN_SCHEMA, "arlkit": __version__, **IDENTITY}
"""What ``run.json`` holds for ``IDENTITY``: the record's schema and the writing arlkit first."""


def test_a_fresh_folder_is_claimed_and_the_same_identity_resumes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert claim_run_dir(run, IDENTITY).resumed is False
    assert json.loads((run / "run.json").read_text()) == RECORD
    again = claim_run_dir(run, IDENTITY)
    assert again.resumed is True and again.changes == []


@pytest.mark.parametrize("record", [{"schema": RUN_SCHEMA + 1, "arlkit": "9.0.0"}, {}])
def test_a_record_of_another_schema_is_refused_naming_its_writer(tmp_path: Path, record: dict) -> None:
    (tmp_path / "run.json").write_text(json.dumps({**record, **IDENTITY}))
    writer = "arlkit 9.0.0" if record else "another arlkit"
    with pytest.raises(ConfigError, match=rf"holds a run written by {writer} \(record schema") as refused:
        claim_run_dir(tmp_path, IDENTITY, force=True)
    assert f"reads schema {RUN_SCHEMA}" in str(refused.value) and "\n" not in str(refused.value)
    assert json.loads((tmp_path / "run.json").read_text()) == {**record, **IDENTITY}  # nothing written


def test_another_identity_is_refused_naming_the_difference(tmp_path: Path) -> None:
    claim_run_dir(tmp_path, IDENTITY)
    other = {**IDENTITY, "config": {**IDENTITY["config"], "lr": 0.2}}
    with pytest.raises(ConfigError, match=r"holds a different run \(differs in: config\.lr\)"):
        claim_run_dir(tmp_path, other)
    assert json.loads((tmp_path / "run.json").read_text()) == RECORD  # nothing written


def test_volatile_keys_may_change_and_force_records_the_changes(tmp_path: Path) -> None:
    claim_run_dir(tmp_path, IDENTITY, resume=False)
    quiet = {**IDENTITY, "config": {**IDENTITY["config"], "progress": False}}
    assert claim_run_dir(tmp_path, quiet, resume=True, volatile=("config.progress",)).changes == []
    other = {**IDENTITY, "config": {**IDENTITY["config"], "steps": 20}}
    with pytest.raises(ConfigError, match="pass --force"):
        claim_run_dir(tmp_path, other, resume=True)
    forced = claim_run_dir(tmp_path, other, resume=True, force=True)
    assert forced.resumed and forced.changes == ["config.steps: 10 -> 20"]
    assert json.loads((tmp_path / "run.json").read_text())["forced_changes"] == ["config.steps: 10 -> 20"]


def test_explicit_resume_modes(tmp_path: Path) -> None:
    assert check_run_dir(tmp_path / "missing", IDENTITY, resume=True) is None  # nothing yet: a fresh run
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds no run.json; nothing to resume"):
        check_run_dir(tmp_path / "other", IDENTITY, resume=True)
    claim_run_dir(tmp_path / "run", IDENTITY)
    with pytest.raises(ConfigError, match="already holds a run; pass --resume"):
        check_run_dir(tmp_path / "run", IDENTITY, resume=False)


def test_foreign_files_and_bad_records_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not empty and holds no run.json"):
        claim_run_dir(tmp_path, IDENTITY)
    assert claim_run_dir(tmp_path, IDENTITY, allowed=None).resumed is False  # a folder that may hold anything
    (tmp_path / "run.json").write_text("{broken")
    with pytest.raises(ConfigError, match="not valid JSON"):
        claim_run_dir(tmp_path, IDENTITY)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        claim_run_dir(tmp_path / "file", IDENTITY)


def test_atomic_writes_leave_the_old_file_when_the_writer_fails(tmp_path: Path) -> None:
    path = tmp_path / "out" / "table.csv"
    atomic_write_text(path, "old\n")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert path.read_text() == "old\n" and sorted(p.name for p in path.parent.iterdir()) == ["table.csv"]
    atomic_write_json(path.with_name("x.json"), {"a": 1}, fsync=True)
    assert json.loads(path.with_name("x.json").read_text()) == {"a": 1}
    with atomic_path(path.with_name("plot.png")) as tmp:
        assert tmp.suffix == ".png"  # writers that choose a format by suffix still can
        tmp.write_bytes(b"png")


def _holder(folder: Path) -> subprocess.Popen[str]:
    """Another process holding ``folder`` until its stdin closes, once it has said so."""
    code = (f"import sys\nfrom arlkit.rundir import hold_run_dir\nwith hold_run_dir({str(folder)!r}):\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"  # blocks until the lock is held
    return proc


def test_a_second_holder_is_refused_naming_the_first_and_a_killed_one_leaves_no_lock(  # type: ignore[no-untyped-def]
        tmp_path: Path, finish_child) -> None:
    run = tmp_path / "run"
    claim_run_dir(run, IDENTITY)
    holder = _holder(run)
    try:
        with pytest.raises(RunDirBusy) as refused, hold_run_dir(run):
            pass
        message = str(refused.value)
        assert f"pid {holder.pid}" in message and "started " in message and "'-c'" in message  # its command
        assert "\n" not in message
        assert json.loads((run / "run.json").read_text()) == RECORD
    finally:
        holder.kill()  # SIGKILL: no clean-up runs; the kernel releases the lock
        finish_child(holder)
    with hold_run_dir(run) as held:
        assert json.loads((held / LOCK_NAME).read_text())["pid"] != holder.pid


def test_the_same_thread_may_take_it_again_another_thread_may_not(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def other() -> None:
        try:
            with hold_run_dir(tmp_path):
                pass
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with hold_run_dir(tmp_path), hold_run_dir(tmp_path / "."):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(timeout=DEADLINE_S)
    assert len(errors) == 1 and isinstance(errors[0], RunDirBusy) and "this process" in str(errors[0])
    with hold_run_dir(tmp_path):  # released by the outer block
        pass


def test_a_folder_the_lock_created_and_nothing_used_is_removed(tmp_path: Path) -> None:
    with hold_run_dir(tmp_path / "a" / "b") as held:
        assert held.is_dir() and (held / LOCK_NAME).is_file()
    assert not (tmp_path / "a").exists()
    with hold_run_dir(tmp_path / "kept") as held:
        (held / "run.json").write_text("{}")
    assert (tmp_path / "kept" / "run.json").is_file()
    with hold_run_dir(tmp_path / "fresh") as held:  # a folder holding only its lock file is a fresh one
        assert claim_run_dir(held, IDENTITY).resumed is False


@pytest.mark.parametrize("where", ["/proc/arlkit-nope", "file/sub", "file"])
def test_a_folder_that_cannot_be_written_is_one_line(tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_text("x")
    path = where if where.startswith("/") else tmp_path / where
    with pytest.raises(ConfigError) as refused, hold_run_dir(path):
        pass
    assert "\n" not in str(refused.value) and str(path) in str(refused.value) and "--out" in str(refused.value)
