"""Running one untrusted program: launch, watch, cap, kill, reap, clean up.

The parent keeps the wall clock (the child cannot ignore it), reads stdout and stderr as they come
(a program that writes a gigabyte is stopped at the cap), learns of the child's exit through a
pidfd, and on every path kills the whole process group, waits for it (no zombies), kills whatever
the slot's uid still owns, and removes the run's folder.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import BinaryIO

from arlkit.sandbox.cgroup import RunCgroup, find_parent
from arlkit.sandbox.config import SandboxConfig
from arlkit.sandbox.isolation import NestedProgram, build_plan, resolve_level, seccomp_filter
from arlkit.sandbox.process import SandboxProcess, kill_group
from arlkit.sandbox.result import SandboxError, SandboxResult, SandboxUnavailable, classify
from arlkit.sandbox.slots import acquire_uid

__all__ = ["Sandbox", "minimal_env"]

_READ_CHUNK = 65536
_WRAPPER_PIDS = 4  # sh/setpriv/unshare/bwrap and the namespace's init, beside max_processes
_DRAIN_GRACE_S = 0.2
_THREAD_VARS = (
    "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
)


def minimal_env(home: str) -> dict[str, str]:
    """The whole environment a sandboxed program gets: nothing is inherited from the parent."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": "/tmp" if home.startswith("/tmp/") else home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
    }
    env.update({name: "1" for name in _THREAD_VARS})
    return env


def _check_relative(name: str) -> str:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\x00" in name:
        raise ValueError(f"file names must be relative paths without '..', got {name!r}")
    return str(path)


class Sandbox:
    """Runs untrusted programs under :class:`SandboxConfig` limits; safe to share between threads.

    The isolation level is decided once, when the sandbox is built (``SandboxUnavailable`` if it
    is below ``config.min_isolation``), and recorded in every result; so is the memory bound,
    described in :attr:`memory_guard`.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.isolation = resolve_level(self.config)
        parent, why = find_parent(self.config.cgroup_parent)
        if parent is None and self.config.cgroup_parent not in ("auto", "off"):
            raise SandboxUnavailable(f"cgroup_parent {self.config.cgroup_parent!r} cannot be used: {why}")
        if self.config.scratch_dirs and self.isolation == "none":
            raise SandboxUnavailable(
                f"scratch_dirs {', '.join(self.config.scratch_dirs)} need a namespaced isolation level; "
                "this sandbox runs at level 'none'"
            )
        self._cgroup_parent = parent
        if parent is not None:
            self.memory_guard = f"cgroup: memory.max {self.config.memory_mb} MiB per run under {parent}"
        elif seccomp_filter():
            self.memory_guard = (
                "fallback: seccomp refuses memfd_create and SysV shm, tmpfs sizes capped "
                f"(no cgroup: {why})"
            )
        else:
            self.memory_guard = f"RLIMIT_AS per process and tmpfs caps only (no cgroup: {why}; no seccomp table here)"

    # -- public entry points ---------------------------------------------------------------------
    def run_python(
        self,
        source: str,
        *,
        stdin: str | bytes = b"",
        files: Mapping[str, str | bytes] | None = None,
        args: Sequence[str] = (),
        wall_time_s: float | None = None,
        max_output_bytes: int | None = None,
    ) -> SandboxResult:
        """Run Python ``source`` (saved as ``main.py`` in the working directory)."""
        python = self.config.python or sys.executable
        all_files = dict(files or {})
        all_files["main.py"] = source
        argv = [python, "-s", "main.py", *args]
        return self.run(argv, files=all_files, stdin=stdin, wall_time_s=wall_time_s, max_output_bytes=max_output_bytes)

    def run_shell(
        self,
        script: str,
        *,
        stdin: str | bytes = b"",
        files: Mapping[str, str | bytes] | None = None,
        wall_time_s: float | None = None,
        max_output_bytes: int | None = None,
    ) -> SandboxResult:
        """Run a POSIX shell ``script`` (saved as ``main.sh``) with ``/bin/sh``."""
        all_files = dict(files or {})
        all_files["main.sh"] = script
        argv = ["/bin/sh", "main.sh"]
        return self.run(argv, files=all_files, stdin=stdin, wall_time_s=wall_time_s, max_output_bytes=max_output_bytes)

    def run(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, str | bytes] | None = None,
        stdin: str | bytes = b"",
        wall_time_s: float | None = None,
        max_output_bytes: int | None = None,
    ) -> SandboxResult:
        """Run ``argv`` (an absolute executable path first) in a fresh working directory holding
        ``files``, with ``stdin`` as standard input."""
        if not argv or not os.path.isabs(argv[0]):
            raise ValueError(f"argv[0] must be an absolute path, got {list(argv)[:1]!r}")
        wall = self.config.wall_time_s if wall_time_s is None else float(wall_time_s)
        cap = self.config.max_output_bytes if max_output_bytes is None else int(max_output_bytes)
        run_dir = tempfile.mkdtemp(prefix="arlkit-sbx-")
        try:
            stdin_path = self._stage(run_dir, files or {}, stdin)
            with acquire_uid(self.config, self.isolation) as uid, open(stdin_path, "rb") as stdin_file:
                return self._launch(run_dir, list(argv), uid, stdin_file, wall, cap)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)

    def start(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, str | bytes] | None = None,
        nested: NestedProgram | None = None,
    ) -> SandboxProcess:
        """Start ``argv`` (as :meth:`run` does) and leave it running: the caller talks to it
        through its standard input and output and ends it with :meth:`SandboxProcess.close`.
        No wall clock applies; the caller keeps its own deadlines. With ``nested``, the launcher
        also starts that program in pid and mount namespaces of its own
        (:class:`~arlkit.sandbox.isolation.NestedProgram`); ``argv`` reaches it through the
        pipes named in ``$ARLKIT_NEST_FDS``."""
        if not argv or not os.path.isabs(argv[0]):
            raise ValueError(f"argv[0] must be an absolute path, got {list(argv)[:1]!r}")
        run_dir = tempfile.mkdtemp(prefix="arlkit-sbx-")
        stack = contextlib.ExitStack()
        stack.callback(shutil.rmtree, run_dir, ignore_errors=True)
        try:
            self._stage(run_dir, files or {}, b"")
            uid = stack.enter_context(acquire_uid(self.config, self.isolation))
            return SandboxProcess.launch(self, stack, run_dir, list(argv), uid, nested)
        except BaseException:
            stack.close()
            raise

    # -- internals -------------------------------------------------------------------------------
    def _prepare(
        self, run_dir: str, argv: list[str], uid: int | None, status_fd: int, nested: NestedProgram | None = None
    ) -> tuple[list[str], str, dict[str, str], RunCgroup | None]:
        """The command line, its working directory and environment, and the run's cgroup (or ``None``)."""
        env = minimal_env("/tmp/work" if self.isolation != "none" else os.path.join(run_dir, "in"))
        plan = build_plan(self.isolation, self.config, run_dir, argv, env, uid, status_fd, nested)
        if self._cgroup_parent is None:
            return plan.argv, plan.cwd, env, None
        try:
            pids = self.config.max_processes + _WRAPPER_PIDS * (2 if nested else 1)
            cgroup = RunCgroup(self._cgroup_parent, self.config.memory_mb * 1024 * 1024, pids)
        except OSError as exc:
            raise SandboxError(f"cannot create the run's cgroup under {self._cgroup_parent}: {exc}") from exc
        return cgroup.join_prefix() + plan.argv, plan.cwd, env, cgroup

    def _stage(self, run_dir: str, files: Mapping[str, str | bytes], stdin: str | bytes) -> str:
        os.chmod(run_dir, 0o700)
        input_dir = os.path.join(run_dir, "in")
        os.mkdir(input_dir, 0o755)
        for name, content in files.items():
            rel = _check_relative(name)
            target = os.path.join(input_dir, rel)
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            # Model-written text may hold lone surrogates, which UTF-8 cannot encode: they become "?".
            data = content.encode("utf-8", "replace") if isinstance(content, str) else bytes(content)
            with open(target, "wb") as fh:
                fh.write(data)
            os.chmod(target, 0o644)
        stdin_path = os.path.join(run_dir, "stdin")
        with open(stdin_path, "wb") as fh:
            fh.write(stdin.encode("utf-8", "replace") if isinstance(stdin, str) else bytes(stdin))
        return stdin_path

    def _launch(
        self, run_dir: str, argv: list[str], uid: int | None, stdin_file: BinaryIO, wall: float, cap: int
    ) -> SandboxResult:
        status_r, status_w = os.pipe()
        cgroup: RunCgroup | None = None
        oom_killed = False
        try:
            command, cwd, env, cgroup = self._prepare(run_dir, argv, uid, status_w)
            start = time.monotonic()
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                stdin=stdin_file,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
                pass_fds=(status_w,),
            )
            os.close(status_w)
            status_w = -1
            try:
                out, err, timed_out, exceeded = self._watch(proc, start + wall, cap)
            finally:
                kill_group(proc)
                proc.wait()
                assert proc.stdout is not None and proc.stderr is not None
                proc.stdout.close()
                proc.stderr.close()
                if cgroup is not None:
                    oom_killed = cgroup.oom_killed()
                    cgroup.close()
                    cgroup = None
            os.set_blocking(status_r, False)
            try:
                status = os.read(status_r, 4096)
            except BlockingIOError:
                status = b""
            if status:
                raise SandboxError(f"sandbox setup failed at level {self.isolation!r}: {status.decode(errors='replace')}")
        finally:
            os.close(status_r)
            if status_w >= 0:
                os.close(status_w)
            if cgroup is not None:
                cgroup.close()
        code = proc.returncode
        exit_code, signum = _decode_status(code, self.isolation)
        stderr_text = bytes(err[:cap]).decode("utf-8", errors="replace")
        outcome = classify(exit_code, signum, stderr_text, timed_out=timed_out, output_exceeded=exceeded)
        if oom_killed and outcome not in ("timeout", "output_limit"):
            outcome = "memory"  # the kernel killed the run at memory.max
        if timed_out or exceeded:
            exit_code, signum = None, signal.SIGKILL
        return SandboxResult(
            stdout=bytes(out[:cap]).decode("utf-8", errors="replace"),
            stderr=stderr_text,
            exit_code=exit_code,
            signal=signum,
            outcome=outcome,
            isolation=self.isolation,
            duration_s=time.monotonic() - start,
            stdout_truncated=len(out) > cap,
            stderr_truncated=len(err) > cap,
        )

    def _watch(self, proc: subprocess.Popen[bytes], deadline: float, cap: int) -> tuple[bytearray, bytearray, bool, bool]:
        """Read both pipes until the program ends; ``(stdout, stderr, timed_out, exceeded)``."""
        assert proc.stdout is not None and proc.stderr is not None
        buffers = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
        sel = selectors.DefaultSelector()
        for fd in buffers:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        pidfd = _pidfd(proc.pid)
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ)
        exited_at: float | None = None
        timed_out = exceeded = False
        try:
            while not exceeded:
                now = time.monotonic()
                if exited_at is None and pidfd is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and not any(fd in sel.get_map() for fd in buffers):
                    break  # exited and both pipes drained
                limit = deadline if exited_at is None else min(deadline, exited_at + _DRAIN_GRACE_S)
                if now >= limit:
                    timed_out = exited_at is None
                    break
                wait = limit - now if pidfd is not None else min(limit - now, 0.01)
                for key, _ in sel.select(wait):
                    if key.fd == pidfd:
                        sel.unregister(pidfd)
                        exited_at = time.monotonic()
                        continue
                    try:
                        chunk = os.read(key.fd, _READ_CHUNK)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        sel.unregister(key.fd)
                        continue
                    buffers[key.fd] += chunk
                    exceeded = exceeded or len(buffers[key.fd]) > cap
        finally:
            sel.close()
            if pidfd is not None:
                os.close(pidfd)
        return buffers[proc.stdout.fileno()], buffers[proc.stderr.fileno()], timed_out, exceeded


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _decode_status(code: int | None, level: str) -> tuple[int | None, int | None]:
    """``(exit_code, signal)`` from the wrapper's status (bubblewrap and the namespace init of the
    unshare level report a signal as 128 + n)."""
    if code is None:
        return None, signal.SIGKILL
    if code < 0:
        return None, -code
    if level != "none" and 128 < code < 128 + 65:
        return None, code - 128
    return code, None
