"""A job process ends with the process that started it, even when that one is killed outright."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

import pytest

# The "parent" starts a child that calls exit_with_parent and then blocks for good, prints the child's
# pid, and blocks too; the test kills the parent with SIGKILL (no cleanup can run there).
PARENT = """
import subprocess, sys, threading
child = subprocess.Popen([sys.executable, "-c", (
    "import threading; from arlkit.recipes.workers import exit_with_parent; "
    "exit_with_parent(0.05); print('ready', flush=True); threading.Event().wait()")], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "ready"
print(child.pid, flush=True)
threading.Event().wait()
"""


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits for the grandchild's exit through a pidfd (Linux)")
def test_a_job_ends_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        exited = os.pidfd_open(child)  # readable once the process has exited
        try:
            assert select.select([exited], [], [], 0)[0] == []
            parent.send_signal(signal.SIGKILL)
            parent.wait()
            assert select.select([exited], [], [], 120)[0] == [exited], "the job outlived its killed parent"
        finally:
            os.close(exited)
        child = None
    finally:
        parent.kill()
        parent.wait()
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


# The child counts the watchdog's checks (its calls of os.getppid) and finishes after 20 of them.
LIVE_PARENT = """
import os, threading
from arlkit.recipes.workers import exit_with_parent
checks, enough, real = [0], threading.Event(), os.getppid
def counted():
    checks[0] += 1
    if checks[0] >= 21:  # the first call records the parent
        enough.set()
    return real()
os.getppid = counted
exit_with_parent(0.01)
assert enough.wait(100), "the watchdog stopped checking"
print('finished')
"""


def test_a_job_runs_while_its_parent_lives(run_child) -> None:  # type: ignore[no-untyped-def]
    # Twenty checks of a live parent must not end the job.
    done = run_child([sys.executable, "-c", LIVE_PARENT], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "finished", done.stdout + done.stderr
