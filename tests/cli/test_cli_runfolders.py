"""Run folders as ``arlkit eval`` users meet them: a second run on a folder another run is writing is
refused (and the first run's data is intact), duplicated records never change a score on resume,
and an ``--out`` that cannot be written is one line and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from arlkit.cli import main
from arlkit.policies.loopback import ScriptedServer
from arlkit.rundir import LOCK_NAME

ARLKIT = [sys.executable, "-m", "arlkit"]
DEADLINE_S = 120.0


def _eval_args(url: str, out: Path) -> list[str]:
    return ["eval", "--env", "frozenlake", "--env-arg", "size=4", "--policy", f"openai:scripted@{url}", "--tasks", "3",
            "--samples", "2", "--budgets", "100%", "--bootstrap", "100", "--out", str(out)]


def _wait_for(condition: Any, what: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert proc.poll() is None, f"it ended (exit {proc.returncode}) before {what}: {proc.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _holder_pid(out: Path) -> int | None:
    try:
        return int(json.loads((out / LOCK_NAME).read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def test_a_second_eval_on_the_same_out_is_refused_and_the_first_finishes_intact(  # type: ignore[no-untyped-def]
        tmp_path: Path, run_child, finish_child) -> None:
    gate, reached = threading.Event(), threading.Event()

    def reply(body: dict[str, Any]) -> str:  # the first run's requests wait here until the second was tried
        reached.set()
        gate.wait(DEADLINE_S)
        return "<think>go</think><action>Right</action>"

    out = tmp_path / "run"
    with ScriptedServer(reply) as server:
        first = subprocess.Popen([*ARLKIT, *_eval_args(server.base_url, out)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            _wait_for(lambda: _holder_pid(out) == first.pid and reached.is_set(), "the first run held --out", first)
            second = run_child([*ARLKIT, *_eval_args(server.base_url, out)], capture_output=True, text=True)
        finally:
            gate.set()
            stdout, stderr = finish_child(first)
    lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
    assert second.returncode == 2 and len(lines) == 1, second.stderr
    assert f"pid {first.pid}" in lines[0] and "arlkit eval" in lines[0] and "started " in lines[0]
    assert first.returncode == 0, stderr
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    keys = [(r["policy"], r["budget"], r["task_id"], r["sample"]) for r in records]
    assert len(keys) == 3 * 2 and len(set(keys)) == len(keys)  # every trajectory once


def test_duplicated_records_change_no_score_on_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    args = ["eval", "--env", "frozenlake", "--env-arg", "size=4", "--policy", "noisy-oracle:0.6", "--tasks", "8",
            "--samples", "2", "--budgets", "50%,100%", "--bootstrap", "100", "--out", str(out)]
    assert main(args) == 0
    table = (out / "passkt.csv").read_text()
    path = out / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    solved = next(line for line in lines if json.loads(line)["success"])
    path.write_text("\n".join(lines + [solved] * 20) + "\n")
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "warning" in line]
    assert len(warned) == 1 and "20 duplicate trajectory records" in warned[0], err
    assert (out / "passkt.csv").read_text() == table
    assert path.read_text().splitlines() == lines  # written once more without them: the next read is clean


@pytest.mark.parametrize("where", ["/proc/arlkit-probe/run", "a-file/run"])
def test_an_out_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path, where: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    out = where if where.startswith("/") else str(tmp_path / where)
    assert main(["eval", "--tasks", "2", "--samples", "2", "--policy", "random", "--out", out]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and out in err and "Traceback" not in err, err
    assert (tmp_path / "a-file").read_text() == "not a folder"
