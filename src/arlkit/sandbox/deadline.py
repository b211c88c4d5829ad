"""Calls that end by a deadline: a function run in a worker process that is killed when it runs too long.

Some library code runs without bound on hostile input and cannot be stopped from inside the process:
a big integer power or a binomial coefficient runs in C holding the interpreter lock, so neither a
thread left behind nor a signal ends it (math-verify's own timeouts are ``SIGALRM`` alarms, which
work only in the main thread and only between bytecodes). :class:`DeadlinePool` runs such calls in
worker processes (one call at a time each, kept between calls): the caller waits at most
``timeout_s`` for the answer, a worker that misses its deadline is killed and replaced, and the call
raises :class:`CallTimedOut`.

A worker is a fresh interpreter (``python -c``, not a fork of a threaded process, and not
multiprocessing's spawn, which would run the caller's ``__main__`` script again). It may allocate
``memory_mb`` beyond what it holds once warmed up (``RLIMIT_AS``), so a call that allocates without
bound fails inside it instead of exhausting the machine, and each call also gets a CPU-time limit
(``RLIMIT_CPU``, twice the deadline plus 5 s), so a call outlives no parent that died before
killing it. Workers left at exit are killed.

The function and its arguments travel by pickle: the function must be importable (module level),
and what it returns comes back as a copy. Waiting for a free worker, or for a new one to start and
warm up, is not part of the deadline.
"""

from __future__ import annotations

import atexit
import math
import os
import resource
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

__all__ = ["CallFailed", "CallTimedOut", "DeadlinePool", "address_space_bytes"]

_R = TypeVar("_R")
_START_TIMEOUT_S = 120.0  # a worker's start and warm-up (imports) on a slow, busy machine
_BOOT = "import sys; from arlkit.sandbox.deadline import _worker_main; _worker_main(int(sys.argv[1]))"
_POOLS: weakref.WeakSet[DeadlinePool] = weakref.WeakSet()


class CallFailed(RuntimeError):
    """A bounded call returned nothing: it raised in its worker (the message names the exception),
    its worker died, or it ran past its deadline (:class:`CallTimedOut`)."""


class CallTimedOut(CallFailed):
    """A bounded call ran past its deadline; its worker was killed."""


@dataclass(eq=False)
class _Worker:
    process: subprocess.Popen[bytes]
    conn: Connection

    def exit_code(self) -> int | None:
        """The exit code of a worker whose pipe closed (it may take a moment to be reaped)."""
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.conn.close()


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - str() of a hostile exception may itself fail
        text = ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def address_space_bytes() -> int:
    """This process's address-space size (``VmSize``), or 0 where ``/proc`` does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _set_soft_limit(which: int, soft: int) -> None:
    """Set a soft resource limit, never above the hard one."""
    hard = resource.getrlimit(which)[1]
    resource.setrlimit(which, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _worker_main(fd: int) -> None:
    """A worker's life: warm up, cap the address space, then answer calls until the pipe closes."""
    conn = Connection(fd)
    memory_mb, warm = conn.recv()
    try:
        if warm is not None:
            warm()
    except Exception:  # noqa: BLE001 - a failed warm-up shows again, with its message, in the first call
        pass
    if memory_mb is not None and address_space_bytes():
        _set_soft_limit(resource.RLIMIT_AS, address_space_bytes() + memory_mb * 2**20)
    conn.send("ready")
    while True:
        try:
            fn, args, timeout_s = conn.recv()
        except (EOFError, OSError):
            return  # the parent closed the pipe, or died
        except Exception as exc:  # noqa: BLE001 - a job that does not unpickle here (an import error)
            conn.send(("raised", _describe(exc)))
            continue
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _set_soft_limit(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime + 2 * timeout_s) + 5)
        try:
            answer = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - MemoryError and RecursionError included
            answer = ("raised", _describe(exc))
        try:
            conn.send(answer)
        except Exception as exc:  # noqa: BLE001 - a result that does not pickle
            conn.send(("raised", f"the result could not be sent back ({_describe(exc)})"))


class DeadlinePool:
    """Worker processes that run calls with a deadline (see the module docstring).

    Args:
        max_workers: most workers alive at once (default: the CPU count, at most 8); a call that
            finds them all busy waits for one.
        memory_mb: address space a worker may add beyond its warmed-up size (``None``: no cap).
        warm: run once in each new worker before its first call (imports, caches), so the deadline
            measures the call and not the worker's start; must be importable (module level).
    """

    def __init__(self, *, max_workers: int | None = None, memory_mb: int | None = 1024,
                 warm: Callable[[], None] | None = None) -> None:
        self.max_workers = max_workers or min(8, os.cpu_count() or 1)
        self.memory_mb, self.warm = memory_mb, warm
        self._idle: list[_Worker] = []
        self._workers: set[_Worker] = set()
        self._starting = 0
        self._cond = threading.Condition()
        _POOLS.add(self)

    def call(self, fn: Callable[..., _R], *args: Any, timeout_s: float) -> _R:
        """``fn(*args)`` in a worker; :class:`CallTimedOut` when it runs past ``timeout_s`` seconds,
        :class:`CallFailed` when it raises or its worker dies."""
        worker = self._take()
        healthy = False
        try:
            worker.conn.send((fn, args, timeout_s))
            if not worker.conn.poll(timeout_s):
                raise CallTimedOut(f"it ran past its {timeout_s:g} s deadline")
            kind, value = worker.conn.recv()
            healthy = True
        except (EOFError, OSError):
            raise CallFailed(f"its worker process died (exit code {worker.exit_code()})") from None
        finally:
            self._give_back(worker, healthy)
        if kind != "ok":
            raise CallFailed(str(value))
        return value  # type: ignore[no-any-return]

    @property
    def busy(self) -> int:
        """Calls running in a worker now."""
        with self._cond:
            return len(self._workers) - len(self._idle)

    def close(self) -> None:
        """Kill every worker, busy ones included (their calls fail)."""
        with self._cond:
            workers = list(self._workers)
            self._workers.difference_update(self._idle)  # busy ones leave when their call fails
            self._idle = []
            self._cond.notify_all()
        for worker in workers:
            worker.kill()

    def _take(self) -> _Worker:
        with self._cond:
            while True:
                while self._idle:
                    worker = self._idle.pop()
                    if worker.process.poll() is None:
                        return worker
                    self._workers.discard(worker)  # died while idle (killed from outside)
                if len(self._workers) + self._starting < self.max_workers:
                    break
                self._cond.wait()
            self._starting += 1
        try:
            worker = self._start()
        finally:
            with self._cond:
                self._starting -= 1
                self._cond.notify()
        with self._cond:
            self._workers.add(worker)
        return worker

    def _give_back(self, worker: _Worker, healthy: bool) -> None:
        if not healthy:
            worker.kill()
        with self._cond:
            if healthy:
                self._idle.append(worker)
            else:
                self._workers.discard(worker)
            self._cond.notify()

    def _start(self) -> _Worker:
        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with theirs:
            process = subprocess.Popen([sys.executable, "-c", _BOOT, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
        worker = _Worker(process, Connection(ours.detach()))
        try:
            worker.conn.send((self.memory_mb, self.warm))
            if worker.conn.poll(_START_TIMEOUT_S) and worker.conn.recv() == "ready":
                return worker
        except (EOFError, OSError):
            pass
        worker.kill()
        raise CallFailed(f"a worker process did not start within {_START_TIMEOUT_S:g} s (exit code {process.poll()})")


@atexit.register
def _kill_workers() -> None:
    for pool in list(_POOLS):
        pool.close()
