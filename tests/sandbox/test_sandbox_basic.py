"""The sandbox's ordinary behaviour: outputs, inputs, outcomes, config checks and level choice."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor

import pytest

from arlkit.config import ConfigError, build_config
from arlkit.sandbox import Sandbox, SandboxConfig, SandboxError, SandboxUnavailable, isolation
from arlkit.sandbox.result import classify


def test_hello_world_and_result_fields(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    result = Sandbox(sbx.config(level)).run_python("import sys\nprint('hi')\nprint('warn', file=sys.stderr)\n")
    assert result.outcome == "ok" and result.ok
    assert (result.stdout, result.stderr, result.exit_code, result.signal) == ("hi\n", "warn\n", 0, None)
    assert result.isolation == level and 0 < result.duration_s < 10


def test_stdin_files_and_args_reach_the_program(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    source = "import sys\nprint(sys.stdin.read().upper(), open('data/x.txt').read(), sys.argv[1:])\n"
    result = Sandbox(sbx.config(level)).run_python(source, stdin="abc", files={"data/x.txt": b"payload"}, args=["--flag"])
    assert result.stdout == "ABC payload ['--flag']\n"


def test_working_directory_is_writable_and_fresh(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    sandbox = Sandbox(sbx.config(level))
    source = "import os\nprint(sorted(os.listdir('.')))\nopen('out.txt', 'w').write('x')\n"
    first, second = sandbox.run_python(source), sandbox.run_python(source)
    assert first.stdout == second.stdout == "['main.py']\n"


def test_exit_status_and_exception_are_errors(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    sandbox = Sandbox(sbx.config(level))
    assert sandbox.run_python("import sys\nsys.exit(3)\n").exit_code == 3
    result = sandbox.run_python("raise ValueError('boom')\n")
    assert result.outcome == "error" and "ValueError: boom" in result.stderr
    syntax = sandbox.run_python("def (:\n")
    assert syntax.outcome == "error" and "SyntaxError" in syntax.stderr


def test_shell_scripts_run(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    result = Sandbox(sbx.config(level)).run_shell("echo $((6 * 7)); echo $HOME; pwd; exit 4\n")
    lines = result.stdout.split()
    assert lines[0] == "42" and lines[1] == lines[2] and result.exit_code == 4


def test_hash_seed_is_pinned_so_runs_repeat(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    sandbox = Sandbox(sbx.config(level))
    source = "print(hash('arlkit'), list({'a', 'b', 'c', 'd'}))\n"
    assert sandbox.run_python(source).stdout == sandbox.run_python(source).stdout


def test_numpy_imports_under_128_mib(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("numpy")
    result = Sandbox(sbx.config(level, memory_mb=128)).run_python("import numpy as np\nprint(np.arange(4).sum())\n")
    assert result.outcome == "ok" and result.stdout == "6\n", result.stderr[-500:]


def test_a_missing_executable_is_a_sandbox_error(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SandboxError, match="exec"):
        Sandbox(sbx.config(level)).run(["/nonexistent/binary"])


def test_bad_arguments_are_rejected(sbx) -> None:  # type: ignore[no-untyped-def]
    sandbox = Sandbox(sbx.config(sbx.working_levels[-1]))
    with pytest.raises(ValueError, match="absolute"):
        sandbox.run(["python3", "-c", "pass"])
    for name in ("/etc/passwd", "../up.txt", "a/../../b"):
        with pytest.raises(ValueError, match="relative"):
            sandbox.run_python("pass", files={name: "x"})


def test_per_call_overrides(sbx) -> None:  # type: ignore[no-untyped-def]
    sandbox = Sandbox(sbx.config(sbx.working_levels[-1], wall_time_s=30.0))
    assert sandbox.run_python("import time\ntime.sleep(5)\n", wall_time_s=0.5).outcome == "timeout"
    small = sandbox.run_python("print('y' * 5000)\n", max_output_bytes=2000)
    assert small.outcome == "output_limit" and len(small.stdout) == 2000


@pytest.mark.parametrize(
    "bad",
    [
        {"wall_time_s": 0},
        {"memory_mb": 0},
        {"max_processes": 2},
        {"max_output_bytes": 10},
        {"isolation": "docker"},
        {"min_isolation": "vm"},
        {"uid_base": 0},
        {"uid_slots": 0},
        {"hide_paths": ("relative/dir",)},
        {"hide_paths": ("/",)},
        {"hide_packages": ("../site-packages",)},
    ],
)
def test_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SandboxConfig(**bad)  # type: ignore[arg-type]


def test_config_builds_from_strings() -> None:
    config = build_config(SandboxConfig, {"wall_time_s": "3", "isolation": "unshare", "hide_paths": "/a,/b"})
    assert config.wall_time_s == 3.0 and config.isolation == "unshare" and config.hide_paths == ("/a", "/b")
    with pytest.raises(ConfigError, match="unknown key"):
        build_config(SandboxConfig, {"walltime": "3"})


def test_classify_order() -> None:
    # output cap first, then timeouts (wall clock or SIGXCPU), memory, other signals, exit status.
    assert classify(0, None, "", timed_out=True, output_exceeded=True) == "output_limit"
    assert classify(None, signal.SIGKILL, "", timed_out=True, output_exceeded=False) == "timeout"
    assert classify(None, signal.SIGXCPU, "", timed_out=False, output_exceeded=False) == "timeout"
    assert classify(1, None, "Traceback...\nMemoryError\n", timed_out=False, output_exceeded=False) == "memory"
    assert classify(0, None, "MemoryError", timed_out=False, output_exceeded=False) == "ok"
    assert classify(None, signal.SIGSEGV, "", timed_out=False, output_exceeded=False) == "killed"
    assert classify(2, None, "", timed_out=False, output_exceeded=False) == "error"
    assert classify(0, None, "", timed_out=False, output_exceeded=False) == "ok"


def test_min_isolation_is_enforced(monkeypatch: pytest.MonkeyPatch, sbx) -> None:  # type: ignore[no-untyped-def]
    # Pretend only level none works here: auto then refuses unless the minimum allows it.
    fake = {"none": None, "unshare": "pretend: missing", "bwrap": "pretend: missing"}
    monkeypatch.setattr(isolation, "available_levels", lambda config=None: dict(fake))
    with pytest.raises(SandboxUnavailable, match="min_isolation"):
        Sandbox(SandboxConfig(min_isolation="unshare"))
    with pytest.raises(SandboxUnavailable, match="not available"):
        Sandbox(SandboxConfig(isolation="bwrap", min_isolation="none"))
    assert Sandbox(SandboxConfig(min_isolation="none")).isolation == "none"


def test_auto_falls_back_when_bubblewrap_is_missing(monkeypatch: pytest.MonkeyPatch, sbx) -> None:  # type: ignore[no-untyped-def]
    if sbx.available["unshare"] is not None:
        pytest.skip(f"the unshare level does not work here: {sbx.available['unshare']}")
    fake = {"none": None, "unshare": None, "bwrap": "bwrap is not installed"}
    monkeypatch.setattr(isolation, "available_levels", lambda config=None: dict(fake))
    sandbox = Sandbox(sbx.config("auto", min_isolation="unshare"))
    assert sandbox.isolation == "unshare"
    assert sandbox.run_python("print(1)").isolation == "unshare"


def test_auto_picks_the_strongest_working_level(sbx) -> None:  # type: ignore[no-untyped-def]
    assert Sandbox(sbx.config("auto")).isolation == sbx.working_levels[-1]


def test_runs_in_parallel_threads_do_not_mix(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    sandbox = Sandbox(sbx.config(level))
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: sandbox.run_python(f"print({i} * {i})"), range(12)))
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(12)]


def test_scratch_dirs_are_private_writable_folders(level: str, sbx) -> None:  # type: ignore[no-untyped-def]
    if level == "none":
        with pytest.raises(SandboxUnavailable, match="need a namespaced isolation level"):
            Sandbox(sbx.config(level, scratch_dirs=("/app",)))
        return
    sandbox = Sandbox(sbx.config(level, scratch_dirs=("/app",)))
    first = sandbox.run_shell("cd /app && ls -A && echo x > f && cat f; touch /usr/nope 2>&1 | grep -c Read-only")
    assert first.stdout == "x\n1\n", first.stderr
    assert sandbox.run_shell("ls -A /app").stdout == ""  # nothing carries over to the next run
    for bad in ("/usr", "/tmp", "app", "/a/b", "/"):
        with pytest.raises(ValueError, match="scratch_dirs"):
            SandboxConfig(scratch_dirs=(bad,))
