"""`arlkit eval` as a user runs it: bad input, resume after SIGKILL, refusing a different run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ARLKIT = [sys.executable, "-m", "arlkit"]


@pytest.fixture
def run(run_child):  # type: ignore[no-untyped-def]
    """``run(*args) -> CompletedProcess``: ``arlkit *args`` in a child process, under the suite's deadline."""
    return lambda *args: run_child([*ARLKIT, *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--env", "chess"], "unknown environment 'chess'; valid choices: "),
        (["--policy", "gpt9"], "unknown policy 'gpt9'; valid choices: "),
        (["--policy", "noisy-oracle:abc"], "noisy-oracle:EPS needs a number"),
        (["--budgets", "0"], "budgets must be between 1 and T_max = 70"),
        (["--budgets", "71"], "budgets must be between 1 and T_max = 70"),
        (["--budgets", "25%,abc"], "budget 'abc' is not full (T_max), a percentage of T_max like 25% or a whole number"),
        (["--budgets", "budgetmix"], "budget 'budgetmix' is not full (T_max), a percentage"),
        (["--history", "-1"], "history must be >= 0"),
        (["--counters", "middle"], "invalid choice: 'middle'"),
        (["--config", "missing.yaml"], "config file 'missing.yaml' does not exist"),
        (["--samples", "4", "--k", "1,8"], "k = 8 is not between 1 and samples = 4"),
        (["--env-arg", "size"], "--env-arg: expected KEY=VALUE"),
        (["--env-arg", "colour=red"], "unknown key 'colour'; valid keys: "),
        (["--env-arg", "size=big"], "size: expected an integer"),
        (["--env-arg", "slippery=maybe"], "slippery: expected true or false"),
        (["--budget-mode", "secret"], "invalid choice: 'secret'"),
        (["--tasks", "0"], "tasks must be >= 1"),
        (["--temperature", "-1"], "temperature must be >= 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(  # type: ignore[no-untyped-def]
        tmp_path: Path, args: list[str], expected: str, run) -> None:
    proc = run("eval", "--out", str(tmp_path / "run"), "--tasks", "2", "--samples", "4", *args)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_different_command_on_an_existing_out_is_refused(tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    out = str(tmp_path / "run")
    first = run("eval", "--out", out, "--tasks", "2", "--samples", "2", "--policy", "random")
    assert first.returncode == 0, first.stderr
    again = run("eval", "--out", out, "--tasks", "2", "--samples", "2", "--policy", "random")
    assert again.returncode == 0 and "resumed: kept 16 finished trajectories" in again.stdout, again.stdout + again.stderr
    other = run("eval", "--out", out, "--tasks", "3", "--samples", "2", "--policy", "random")
    assert other.returncode == 2 and "holds a different run (differs in: tasks)" in other.stderr, other.stderr


def test_sigkill_then_resume_gives_the_same_passkt_csv(tmp_path: Path, run, child_deadline_s) -> None:  # type: ignore[no-untyped-def]
    args = ["eval", "--env", "frozenlake", "--env-arg", "size=8", "--policy", "random", "--policy", "noisy-oracle:0.3",
            "--tasks", "60", "--samples", "8", "--bootstrap", "500"]
    reference = run(*args, "--out", str(tmp_path / "ref"))
    assert reference.returncode == 0, reference.stderr

    out = tmp_path / "killed"
    proc = subprocess.Popen([*ARLKIT, *args, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lines_file = out / "trajectories.jsonl"
    deadline = time.monotonic() + child_deadline_s
    while time.monotonic() < deadline:
        if lines_file.exists() and lines_file.read_bytes().count(b"\n") >= 200:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    written = lines_file.read_bytes().count(b"\n")
    total = 2 * 4 * 60 * 8
    assert 200 <= written < total, "the run must be killed part-way"
    assert not (out / "passkt.csv").exists()
    # a crash can also leave a half-written line behind
    with open(lines_file, "ab") as handle:
        handle.write(b'{"env": "frozenlake", "task_id": "fl-trunc')

    resumed = run(*args, "--out", str(out))
    assert resumed.returncode == 0, resumed.stderr
    assert "half-written last line" in resumed.stderr
    assert f"resumed: kept {written} finished trajectories" in resumed.stdout
    assert (out / "passkt.csv").read_text() == (tmp_path / "ref" / "passkt.csv").read_text()
    assert lines_file.read_bytes().count(b"\n") == total


def test_help_lists_the_commands(run) -> None:  # type: ignore[no-untyped-def]
    proc = run("--help")
    assert proc.returncode == 0 and "eval" in proc.stdout and "demo" in proc.stdout, proc.stdout + proc.stderr
    env = dict(os.environ)
    assert env  # the subprocess inherits a normal environment


def test_scripted_demo_writes_the_evaluation_the_analyses_and_the_report(  # type: ignore[no-untyped-def]
        tmp_path: Path, run) -> None:
    out = tmp_path / "demo"
    proc = run("demo", "--scripted", "--quick", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    for name in ("eval/summary.md", "eval/passkt.csv", "eval/passkt.png", "eval/trajectories.jsonl", "report.html"):
        assert (out / name).stat().st_size > 0, name
    assert "budget headroom" in (out / "eval" / "summary.md").read_text()
    assert any((out / "analysis").glob("*.csv"))
    assert f"demo results in {out}" in proc.stdout
