"""A job process ends with the process that started it, even when that one is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The "parent" starts a child that calls exit_with_parent and then sleeps for ten minutes, prints the
# child's pid, and sleeps too; the test kills the parent with SIGKILL (no cleanup can run there).
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", (
    "import time; from arlkit.recipes.jobs import exit_with_parent; "
    "exit_with_parent(0.05); print('ready', flush=True); time.sleep(600)")], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "ready"
print(child.pid, flush=True)
import time; time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its new parent) has ended too.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to tell a zombie from a live process")
def test_a_job_ends_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 60
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the job outlived its killed parent"
    finally:
        parent.kill()
        parent.wait()
        if "child" in locals() and _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_job_runs_while_its_parent_lives() -> None:
    # The watchdog must not end a job whose parent is alive.
    done = subprocess.run([sys.executable, "-c", (
        "import time; from arlkit.recipes.jobs import exit_with_parent; "
        "exit_with_parent(0.01); time.sleep(0.5); print('finished')")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "finished", done.stderr
