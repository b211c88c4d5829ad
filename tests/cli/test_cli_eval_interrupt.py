"""``arlkit eval`` against a served model, stopped mid-run by SIGKILL or Ctrl-C (SIGINT) and re-run:
finished trajectories are on disk as they finish (in any order), and the resumed run ends with
exactly the trajectories and table of an uninterrupted run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from arlkit.policies.loopback import Latency, ScriptedServer

DEADLINE_S = 120.0
MOVES = ("Left", "Down", "Right", "Up")


def _reply(body: dict[str, Any]) -> str:
    turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return f"<think>go</think><action>{MOVES[(body['seed'] + turns) % 4]}</action>"


def _command(url: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "arlkit", "eval", "--env", "frozenlake", "--env-arg", "size=4",
            "--policy", f"openai:scripted@{url}", "--tasks", "24", "--samples", "4", "--budgets", "50%,100%",
            "--bootstrap", "100", "--max-concurrency", "8", "--out", str(out)]


def _default_sigint() -> None:
    """In the child before it starts: SIGINT's default disposition, as a terminal's Ctrl-C finds it.
    A shell without job control starts background commands (``make test &``) with SIGINT ignored,
    children inherit that, and an ignored SIGINT would leave nothing to test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _records(out: Path) -> list[str]:
    lines = (out / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted(json.dumps(json.loads(line), sort_keys=True) for line in lines)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_a_stopped_eval_resumes_to_the_uninterrupted_result(  # type: ignore[no-untyped-def]
        tmp_path: Path, how: signal.Signals, run_child, finish_child) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with ScriptedServer(_reply, Latency(median_s=0.03, sigma=0.3)) as server:
        clean = tmp_path / "clean"
        done = run_child(_command(server.base_url, clean), capture_output=True, env=env)
        assert done.returncode == 0, (done.stdout[-2000:] + done.stderr[-2000:]).decode(errors="replace")
        stopped = tmp_path / "stopped"
        proc = subprocess.Popen(_command(server.base_url, stopped), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, preexec_fn=_default_sigint)
        watchdog = threading.Timer(DEADLINE_S, proc.kill)  # the generous deadline: a hung run fails the test
        watchdog.start()
        try:
            # The event: the first progress line (printed on stderr at every tenth of the run's 192
            # trajectories, after they are written) that counts at least a quarter of them.
            for line in iter(proc.stderr.readline, b""):  # type: ignore[union-attr]
                found = re.match(rb"trajectories: (\d+)/192", line)
                if found and int(found.group(1)) >= 48:
                    break
        finally:
            watchdog.cancel()
        assert proc.poll() is None, "the run ended (or hung) before it could be stopped"
        written = _lines(stopped / "trajectories.jsonl")
        assert written >= 48
        proc.send_signal(how)
        _, err = finish_child(proc)
        if how == signal.SIGINT:
            said = err.decode(errors="replace")
            assert proc.returncode == 130 and "interrupted; re-run the same command to resume" in said, said[-2000:]
            assert "Traceback" not in said, said[-2000:]
        kept = _lines(stopped / "trajectories.jsonl")
        assert written <= kept < 24 * 4 * 2  # nothing written was lost, and the run was cut short
        resumed = run_child(_command(server.base_url, stopped), capture_output=True, env=env)
        said = (resumed.stdout[-2000:] + resumed.stderr[-2000:]).decode(errors="replace")
        assert resumed.returncode == 0 and b"resumed: kept" in resumed.stdout, said
    assert _records(stopped) == _records(clean)
    assert (stopped / "passkt.csv").read_bytes() == (clean / "passkt.csv").read_bytes()
