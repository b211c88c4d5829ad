"""A sandboxed program left running: the caller talks to it through its pipes and ends it.

:meth:`arlkit.sandbox.Sandbox.start` builds one. The program runs under the same isolation, limits
and seccomp filter as a :meth:`~arlkit.sandbox.Sandbox.run`, in its own process group, holding
its uid slot until :meth:`SandboxProcess.close`. Closing kills the whole group (the pid namespace
dies with its init), reaps it, releases the cgroup and the uid slot (whose leftovers are killed)
and removes the run's folder; a finalizer does the same if the object is dropped unclosed, and
the wrapper's parent-death signal ends everything if the calling process itself dies.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from arlkit.sandbox.cgroup import RunCgroup
    from arlkit.sandbox.isolation import NestedProgram
    from arlkit.sandbox.runner import Sandbox

__all__ = ["SandboxProcess", "kill_group"]

_STDERR_KEEP = 4096


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the wrapper's whole process group (a pid namespace then dies with its init)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _end(proc: subprocess.Popen[bytes], stack: contextlib.ExitStack, cgroup: RunCgroup | None, status_r: int) -> None:
    kill_group(proc)
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    if cgroup is not None:
        cgroup.close()
    with contextlib.suppress(OSError):
        os.close(status_r)
    stack.close()


class SandboxProcess:
    """A running sandboxed program (:meth:`arlkit.sandbox.Sandbox.start`).

    Attributes:
        isolation: the sandbox's isolation level.
    """

    def __init__(
        self, proc: subprocess.Popen[bytes], status_r: int, isolation: str, stack: contextlib.ExitStack,
        cgroup: RunCgroup | None,
    ) -> None:
        self._proc = proc
        self._status_r = status_r
        self.isolation = isolation
        self._finalizer = weakref.finalize(self, _end, proc, stack, cgroup, status_r)
        self._stderr = bytearray()
        self._lock = threading.Lock()

    @classmethod
    def launch(
        cls,
        sandbox: Sandbox,
        stack: contextlib.ExitStack,
        run_dir: str,
        argv: list[str],
        uid: int | None,
        nested: NestedProgram | None,
    ) -> SandboxProcess:
        """Start ``argv``; ``stack`` holds what :meth:`close` releases (the uid slot, the run folder)."""
        status_r, status_w = os.pipe()
        cgroup = None
        try:
            command, cwd, env, cgroup = sandbox._prepare(run_dir, argv, uid, status_w, nested)
            proc = subprocess.Popen(
                command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, start_new_session=True, pass_fds=(status_w,),
            )
        except BaseException:
            os.close(status_r)
            if cgroup is not None:
                cgroup.close()
            raise
        finally:
            os.close(status_w)
        os.set_blocking(status_r, False)
        return cls(proc, status_r, sandbox.isolation, stack, cgroup)

    @property
    def stdin(self):  # noqa: ANN201 - a binary file
        """The program's standard input (write, then flush)."""
        return self._proc.stdin

    @property
    def stdout(self):  # noqa: ANN201 - a binary file
        """The program's standard output."""
        return self._proc.stdout

    def alive(self) -> bool:
        return self._finalizer.alive and self._proc.poll() is None

    def failure(self) -> str:
        """Why the program is not running as asked: the launcher's setup error, or the end of its
        standard error; empty when neither says anything."""
        with contextlib.suppress(BlockingIOError, OSError):
            status = os.read(self._status_r, 4096)
            if status:
                return f"sandbox setup failed at level {self.isolation!r}: {status.decode(errors='replace')}"
        self._read_stderr()
        return bytes(self._stderr[-_STDERR_KEEP:]).decode("utf-8", "replace").strip()

    def _read_stderr(self) -> None:
        stream = self._proc.stderr
        if stream is None or stream.closed:
            return
        with self._lock:
            os.set_blocking(stream.fileno(), False)
            while select.select([stream.fileno()], [], [], 0)[0]:
                try:
                    chunk = os.read(stream.fileno(), 65536)
                except (BlockingIOError, OSError):
                    return
                if not chunk:
                    return
                self._stderr += chunk
                del self._stderr[:-_STDERR_KEEP]

    def close(self) -> None:
        """Kill the program and everything it started; release its uid slot and folder (idempotent)."""
        self._finalizer()

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
