"""A program started beside a nested one (:class:`arlkit.sandbox.NestedProgram`): what each side
sees of the other, what they share, and that both end with the sandbox."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import textwrap

import pytest

from arlkit.sandbox import NestedProgram, Sandbox
from tests.sandbox.conftest import NAMESPACED_LEVELS, config

# Each side reports what it sees as one JSON line; the nested side then serves its pid list on
# 127.0.0.1 until its standard input closes.
_NESTED = textwrap.dedent(r'''
    import ctypes, json, os, socket, sys, threading
    open("/app/from_nested", "w").write("n")
    def refused(path):
        try:
            open(path, "w").write("x")
            return False
        except OSError:
            return True
    libc = ctypes.CDLL(None, use_errno=True)
    seen = {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "tmp": sorted(os.listdir("/tmp")),
            "private": sorted(os.listdir("/tests")), "proc_read_only": refused("/proc/1/comm"),
            "new_user_ns_refused": libc.unshare(0x10000000) != 0}
    server = socket.socket()
    server.bind(("127.0.0.1", 8765))
    server.listen()
    def serve():
        while True:
            conn, _ = server.accept()
            conn.sendall(json.dumps(seen["pids"]).encode())
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    print(json.dumps(seen), flush=True)
    sys.stdin.read()
''')

_OUTER = textwrap.dedent(r'''
    import json, os, socket, sys
    open("/tests/secret", "w").write("s")
    to_nested, from_nested = (int(fd) for fd in os.environ["ARLKIT_NEST_FDS"].split(","))
    nested = json.loads(os.fdopen(from_nested).readline())  # printed once its server listens
    with socket.create_connection(("127.0.0.1", 8765), timeout=60) as conn:
        served = json.loads(conn.recv(65536))
    try:
        open("/proc/1/comm", "w").write("x")
        read_only = False
    except OSError:
        read_only = True
    mine = {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "app": sorted(os.listdir("/app")),
            "proc_read_only": read_only, "served": served}
    print(json.dumps({"nested": nested, "outer": mine}), flush=True)
''')


def _both_sides(sandbox: Sandbox) -> dict:
    python = sys.executable
    nested = NestedProgram((python, "-I", "-c", _NESTED), {"PATH": "/usr/bin:/bin"}, ("/tests",))
    with sandbox.start([python, "-I", "-c", _OUTER], nested=nested) as process:
        assert process.stdin is not None and process.stdout is not None
        line = process.stdout.readline()
        assert line, process.failure()
        return json.loads(line)


@pytest.mark.parametrize("level", NAMESPACED_LEVELS)
def test_each_side_sees_only_its_own_processes_and_private_folders(level: str) -> None:
    seen = _both_sides(Sandbox(config(level, scratch_dirs=("/app", "/tests"), wall_time_s=30.0, cpu_time_s=30)))
    nested, outer = seen["nested"], seen["outer"]
    # each side is in a pid namespace of its own: its init and itself (and, for the outer side,
    # nothing of the nested one, whose pids it cannot name either)
    assert nested["pids"] == [1, 2] and outer["pids"] == [1, 2]
    assert nested["tmp"] == [] and nested["private"] == []  # the outer side's /tmp and /tests are not there
    assert outer["app"] == ["from_nested"]  # the task folder is shared
    assert outer["served"] == [1, 2]  # and so is the network namespace (127.0.0.1)
    assert nested["proc_read_only"] and outer["proc_read_only"]
    assert nested["new_user_ns_refused"]  # the seccomp filter applies on the nested side too


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("bwrap")
                    or not os.path.exists("/usr/bin/python3"),
                    reason="needs root (to become a normal user), setpriv, bwrap and /usr/bin/python3")
def test_a_normal_user_gets_the_same_separation_through_user_namespaces(run_child) -> None:  # type: ignore[no-untyped-def]
    """Without root, the launcher makes a user namespace for each side (to mount its /proc)."""
    src = os.path.dirname(os.path.dirname(os.path.abspath(__import__("arlkit").__file__)))
    script = textwrap.dedent(f'''
        import json, sys
        sys.path.insert(0, {src!r})
        from arlkit.sandbox import NestedProgram, Sandbox, SandboxConfig
        sandbox = Sandbox(SandboxConfig(isolation="bwrap", scratch_dirs=("/app", "/tests"), wall_time_s=30.0, cpu_time_s=30))
        nested = NestedProgram((sys.executable, "-I", "-c", {_NESTED!r}), {{"PATH": "/usr/bin:/bin"}}, ("/tests",))
        with sandbox.start([sys.executable, "-I", "-c", {_OUTER!r}], nested=nested) as process:
            line = process.stdout.readline()
            print(line.decode() if line else "FAILED " + process.failure())
    ''')
    home = tempfile.mkdtemp(prefix="arlkit-nobody-")
    os.chmod(home, 0o777)
    as_nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "/usr/bin/python3", "-c"]
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "XDG_CACHE_HOME": home}
    try:
        probe = run_child([*as_nobody, f"import sys; sys.path.insert(0, {src!r}); import arlkit.sandbox"],
                          capture_output=True, text=True, env=env)
        if probe.returncode != 0:
            pytest.skip(f"a normal user cannot import arlkit.sandbox from {src}: {probe.stderr.strip()[-200:]}")
        result = run_child([*as_nobody, script], capture_output=True, text=True, env=env)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if "bwrap" in result.stderr and "not available" in result.stderr:
        pytest.skip(f"bubblewrap does not work for a normal user here: {result.stderr.strip()[-200:]}")
    assert result.returncode == 0 and not result.stdout.startswith("FAILED"), result.stdout + result.stderr
    seen = json.loads(result.stdout)
    assert seen["nested"]["pids"] == [1, 2] and seen["outer"]["pids"] == [1, 2]
    assert seen["nested"]["tmp"] == [] and seen["nested"]["private"] == []
    assert seen["outer"]["app"] == ["from_nested"] and seen["outer"]["served"] == [1, 2]
    assert seen["nested"]["proc_read_only"] and seen["outer"]["proc_read_only"]
