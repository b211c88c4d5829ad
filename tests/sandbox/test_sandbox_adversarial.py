"""The adversarial bar: hostile programs end within limits with a classified outcome, leave nothing
behind (processes, descriptors, temp folders) and never see the parent's secret.

Every test runs at every isolation level that works on this machine. A case that needs a
namespace (a pid namespace to catch a double-forked orphan, a mount namespace to stop writes
outside the working directory, ...) is skipped at level ``none`` with the reason spelled out.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from arlkit.sandbox.slots import pids_of_uid

from .conftest import SECRET, RunContained, needs_namespace, wait_until


def test_infinite_loop_times_out(level: str, run_contained: RunContained) -> None:
    result = run_contained(level, "while True:\n    pass\n")
    assert result.outcome == "timeout" and result.exit_code is None


def test_cpu_limit_stops_a_spinner_before_the_wall_clock(level: str, run_contained: RunContained) -> None:
    result = run_contained(level, "while True:\n    pass\n", wall_time_s=8.0, cpu_time_s=1)
    assert result.outcome == "timeout" and result.duration_s < 5.0


def test_fork_bomb_is_contained(level: str, run_contained: RunContained) -> None:
    needs_namespace(level, "it runs the program as the caller, and root ignores RLIMIT_NPROC")
    source = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result = run_contained(level, source)
    assert result.outcome in ("timeout", "killed", "error")


def test_memory_bomb_hits_the_memory_limit(level: str, run_contained: RunContained) -> None:
    source = "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))\n"
    result = run_contained(level, source)
    assert result.outcome == "memory"


def test_a_gigabyte_of_output_is_cut_off(level: str, run_contained: RunContained) -> None:
    source = "import sys\nblock = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(block)\n"
    result = run_contained(level, source)
    assert result.outcome == "output_limit" and result.stdout_truncated
    assert len(result.stdout) <= 100_000


def test_writes_outside_the_working_directory_do_not_land(level: str, run_contained: RunContained, tmp_path: Path) -> None:
    needs_namespace(level, "without a mount namespace the program writes wherever the caller can")
    marker = f"arlkit-escape-{os.getpid()}"
    targets = [f"/tmp/{marker}", f"/var/tmp/{marker}", f"/dev/shm/{marker}", str(tmp_path / marker), f"/{marker}"]
    targets.append(str(Path(__file__).resolve().parent / marker))
    source = (
        "import os\n"
        f"for path in {targets!r} + ['../' + {marker!r}, '../../' + {marker!r}]:\n"
        "    try:\n"
        "        with open(path, 'w') as fh:\n"
        "            fh.write('escaped')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, type(exc).__name__)\n"
    )
    result = run_contained(level, source)
    assert result.outcome == "ok"
    for path in targets + [f"/tmp/{marker}", f"/{marker}"]:
        assert not os.path.exists(path), f"{path} was written on the host"


def test_parent_secret_is_not_in_the_environment(level: str, run_contained: RunContained) -> None:
    source = "import os\nprint(sorted(os.environ.items()))\nprint(os.environ.get('ARLKIT_FAKE_SECRET'))\n"
    result = run_contained(level, source)
    assert result.outcome == "ok" and "None" in result.stdout and "HOME" in result.stdout


def test_parent_secret_is_not_readable_through_proc(level: str, run_contained: RunContained) -> None:
    needs_namespace(level, "without a pid namespace /proc/<pid>/environ of the caller's processes is readable")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", SECRET],
        env={**os.environ, "ARLKIT_FAKE_SECRET": SECRET},
    )
    try:
        source = (
            "import glob\n"
            "for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):\n"
            "    try:\n"
            "        print(path, open(path, 'rb').read())\n"
            "    except OSError:\n"
            "        pass\n"
        )
        result = run_contained(level, source)
        assert result.outcome == "ok"
    finally:
        holder.kill()
        holder.wait()


def test_network_connections_are_refused(level: str, run_contained: RunContained) -> None:
    needs_namespace(level, "without a network namespace the loopback interface is shared")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    source = (
        "import socket\n"
        f"for addr in [('127.0.0.1', {port}), ('1.1.1.1', 80), ('8.8.8.8', 53)]:\n"
        "    try:\n"
        "        socket.create_connection(addr, timeout=1).close()\n"
        "        print('connected', addr)\n"
        "    except OSError as exc:\n"
        "        print('blocked', addr, exc)\n"
    )
    try:
        result = run_contained(level, source)
        assert result.outcome == "ok" and "connected" not in result.stdout
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()


def test_a_child_that_outlives_the_program_is_killed(level: str, run_contained: RunContained) -> None:
    needs_namespace(level, "a double-forked setsid grandchild escapes the process group; only a pid namespace takes it down")
    marker = f"arlkit-orphan-{os.getpid()}"
    source = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
        "print('parent done')\n"
    )
    result = run_contained(level, source)
    assert result.outcome == "ok" and "parent done" in result.stdout
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            assert marker.encode() not in cmdline, f"orphan {entry} survived"


def test_rm_rf_home_only_reaches_the_sandbox(level: str, run_contained: RunContained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    canary = home / "canary.txt"
    canary.write_text("still here")
    monkeypatch.setenv("HOME", str(home))
    result = run_contained(level, "import os\nprint(os.system('rm -rf ~'))\nprint(os.path.expanduser('~'))\n")
    assert result.outcome == "ok"
    assert canary.read_text() == "still here"
    assert str(home) not in result.stdout


def test_deep_recursion_ends_classified(level: str, run_contained: RunContained) -> None:
    source = "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n"
    result = run_contained(level, source)
    assert result.outcome in ("timeout", "memory", "killed", "error")


def test_default_recursion_limit_is_an_error(level: str, run_contained: RunContained) -> None:
    result = run_contained(level, "def f(n):\n    return f(n + 1)\nf(0)\n")
    assert result.outcome == "error" and "RecursionError" in result.stderr


def test_closing_stdout_then_spinning_times_out(level: str, run_contained: RunContained) -> None:
    result = run_contained(level, "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass\n")
    assert result.outcome == "timeout"


def test_closing_stdout_then_printing_is_an_error(level: str, run_contained: RunContained) -> None:
    result = run_contained(level, "import os\nos.close(1)\nprint('lost')\n")
    assert result.outcome == "error"


def test_hidden_paths_are_empty_inside(level: str, run_contained: RunContained, tmp_path: Path) -> None:
    needs_namespace(level, "hiding a folder needs a mount namespace")
    secret_dir = tmp_path / "answers"
    secret_dir.mkdir()
    (secret_dir / "hidden_tests.json").write_text(SECRET)
    source = f"import os\nprint(os.listdir({str(secret_dir)!r}) if os.path.isdir({str(secret_dir)!r}) else 'absent')\n"
    result = run_contained(level, source, hide_paths=(str(secret_dir),))
    assert result.outcome == "ok" and "hidden_tests" not in result.stdout


def test_signal_to_itself_is_killed(level: str, run_contained: RunContained) -> None:
    result = run_contained(level, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    # As the init of a pid namespace a process cannot SIGKILL itself from inside: the kernel
    # ignores the signal and the program simply ends; everywhere else the signal kills it.
    assert result.outcome in ("killed", "ok")


def _payload_pids(uid: int, marker: bytes) -> list[int]:
    """Processes of ``uid`` whose command line holds ``marker`` (the sandbox's trial runs of its
    level probe use the same slot uid, so the uid alone does not tell the payload apart)."""
    found = []
    for pid in pids_of_uid(uid):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def test_killing_the_parent_mid_run_takes_the_sandbox_down(level: str, sbx, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    needs_namespace(level, "without a pid namespace nothing kills the program when its parent dies")
    if os.geteuid() != 0:
        pytest.skip("the test finds the program by its slot uid, which only a root parent uses")
    uid_base = sbx.uid_base + sbx.uid_slots - 1  # a slot of our own range, used by the child process only
    code = (
        "import sys\n"
        "from arlkit.sandbox import Sandbox, SandboxConfig\n"
        f"config = SandboxConfig(isolation={level!r}, wall_time_s=600, cpu_time_s=600, uid_base={uid_base}, uid_slots=1)\n"
        "result = Sandbox(config).run_python('import signal\\nprint(\"started\", flush=True)\\nsignal.pause()')\n"
        "print('the sandboxed run returned before the parent was killed:', result, file=sys.stderr)\n"
    )
    log_path = tmp_path / "parent.log"
    with open(log_path, "wb") as log:
        parent = subprocess.Popen(
            [sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp_path)}, stdout=log, stderr=log
        )
    try:
        # Wait for the event itself (the payload running, or the parent ending without it), with a
        # deadline only a hung machine reaches: the parent first probes its level with trial runs.
        wait_until(lambda: _payload_pids(uid_base, b"main.py") or parent.poll() is not None, 300)
        running = _payload_pids(uid_base, b"main.py")
        output = log_path.read_text(errors="replace")[-3000:]
        assert running, f"the sandboxed program never started (parent exit status {parent.poll()}); its output:\n{output}"
    finally:
        parent.kill()
        parent.wait()
    assert wait_until(lambda: not pids_of_uid(uid_base), 60), f"left running: {pids_of_uid(uid_base)}"


def test_filling_the_working_directory_with_files_is_capped(level: str, run_contained: RunContained) -> None:
    needs_namespace(level, "the working directory is on the host's disk")
    if level == "bwrap" and os.geteuid() != 0:
        pytest.skip("a non-root bubblewrap cannot cap the number of files (no nr_inodes option)")
    source = (
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        open(f'f{n}', 'w').close()\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print(n, exc.errno)\n"
    )
    result = run_contained(level, source, wall_time_s=10.0, cpu_time_s=10)
    count, errno = result.stdout.split()
    assert result.outcome == "ok" and int(count) <= 65536 and errno == "28"  # ENOSPC
