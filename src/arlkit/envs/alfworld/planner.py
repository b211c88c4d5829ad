"""Fast-downward's search from a game's current state, bounded in time and memory.

TextWorld's planner (``PddlState.replan``) runs fast-downward's search in the calling process, in C,
with no limit of its own; on a few real games it searches for many minutes while its memory grows
to gigabytes, and nothing inside the process can stop it. :func:`search` runs it in a child
process instead and reads back the plan's operator names:

- The child is a fork of this process taken under the engine lock, so it holds the game's exact
  state (fast-downward's library is copied with the rest of memory; nothing is loaded or replayed)
  and no other thread is inside TextWorld. It runs the search and writes its answer to a pipe,
  nothing else: no Python cleanup, no handler it inherited (``os._exit``), its standard streams on
  ``/dev/null``, and no other file descriptor of the parent open.
- Memory: the child may add ``memory_mb`` to the address space it had at the fork
  (``RLIMIT_AS``); past it an allocation fails and the search ends without a plan.
- Time: the parent waits ``timeout_s`` from the fork and kills the child past it (``SIGKILL``).
  A child whose parent dies is killed too (Linux's parent-death signal), and its CPU time is capped
  at twice the limit where that signal does not exist.
- At most one search per CPU core runs at once (waiting for one is not part of the deadline); the
  engine lock is not held while the search runs, so other games step meanwhile.

A search that ends without an answer raises :class:`PlannerLimit`, whose message says why.
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import select
import signal
import threading
import time
import warnings
from contextlib import AbstractContextManager
from typing import Any

from arlkit.sandbox.deadline import address_space_bytes

__all__ = ["DEFAULT_MEMORY_MB", "DEFAULT_TIMEOUT_S", "PlannerLimit", "search"]

DEFAULT_TIMEOUT_S = 120.0
"""Seconds one search may run (``AlfworldConfig.planner_timeout_s``): the shipped games' searches
from the start take milliseconds to about 20 s on a 2-core machine."""
DEFAULT_MEMORY_MB = 2048
"""Memory one search may add (``AlfworldConfig.planner_memory_mb``): the shipped games' largest
searches need 256-512 MB."""
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_SLOTS = threading.BoundedSemaphore(max(1, _CORES))
_OK, _NONE = b"plan\n", b"none\n"  # the child's answer: a plan (operator names, one a line), or none exists
_OUT_OF_MEMORY = 22  # the child's exit code on a MemoryError (fast-downward's SEARCH_OUT_OF_MEMORY)


class PlannerLimit(RuntimeError):
    """The planner gave no answer within its limits (time, memory), or its process failed."""


def _replan(lib: Any) -> list[str] | None:
    """Fast-downward's search from the library's current state, as ``PddlState.replan`` runs it:
    the plan's operator names, or ``None`` when no plan exists."""
    import fast_downward

    if not lib.replan(False):
        return None
    operators = (fast_downward.Operator * lib.get_last_plan_length())()
    lib.get_last_plan(operators)
    return [op.name for op in operators]


def _prctl() -> Any:
    """libc's ``prctl``, looked up in the parent (a child of a threaded process must not load symbols)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _prctl()
_PR_SET_PDEATHSIG = 1


def _lower(which: int, soft: int) -> None:
    hard = resource.getrlimit(which)[1]
    resource.setrlimit(which, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _child(write_fd: int, lib: Any, timeout_s: float, memory: int, parent: int) -> None:
    """The forked child's whole life: limits (``memory``: the address space it may reach, in bytes; 0:
    unknown), the search, the answer, ``os._exit``."""
    code = 1
    try:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the signal was asked for
            raise SystemExit
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a Ctrl-C to the process group ends it too
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, write_fd)
        os.closerange(write_fd + 1, max(write_fd + 2, os.sysconf("SC_OPEN_MAX")))
        if memory:
            _lower(resource.RLIMIT_AS, memory)
        _lower(resource.RLIMIT_CPU, math.ceil(2 * timeout_s) + 5)
        plan = _replan(lib)
        answer = _NONE if plan is None else _OK + "\n".join(plan).encode("utf-8")
        view = memoryview(answer)
        while view:
            view = view[os.write(write_fd, view) :]
        code = 0
    except MemoryError:
        code = _OUT_OF_MEMORY
    except BaseException:  # noqa: BLE001 - whatever happens, the child never returns into the parent's code
        code = 1
    finally:
        os._exit(code)


def _fork(lib: Any, timeout_s: float, memory_mb: int) -> tuple[int, int]:
    """Fork the searching child; its pid and the read end of its answer's pipe."""
    vm = address_space_bytes()  # the child's address space at the fork
    memory = vm + memory_mb * 2**20 if vm else 0
    parent = os.getpid()
    read_fd, write_fd = os.pipe()
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns on fork with threads; the child runs no Python they hold
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        raise PlannerLimit(f"the planner's process could not start ({exc})") from None
    if pid == 0:
        _child(write_fd, lib, timeout_s, memory, parent)
    os.close(write_fd)
    return pid, read_fd


def _ended(status: int, memory_mb: int) -> str:
    """Why a child that exited gave no answer."""
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGABRT:  # fast-downward's end on a failed allocation
        return f"the planner stopped (SIGABRT), as it does when it reaches its {memory_mb} MB memory limit"
    if os.WIFSIGNALED(status):
        return f"the planner's process was ended by {signal.Signals(os.WTERMSIG(status)).name}"
    code = os.waitstatus_to_exitcode(status)
    if code == _OUT_OF_MEMORY:
        return f"the planner ran out of its {memory_mb} MB memory limit"
    return f"the planner's process ended without an answer (exit code {code})"


def _collect(pid: int, read_fd: int, timeout_s: float, memory_mb: int) -> list[str] | None:
    """The child's answer, read within ``timeout_s`` of its start; the child is reaped in any case."""
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    reaped = False
    poller = select.poll()
    poller.register(read_fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(max(1, math.ceil(left * 1000))):
                if time.monotonic() >= deadline:
                    raise PlannerLimit(f"the planner ran past its {timeout_s:g} s time limit")
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        reaped = True
    finally:
        os.close(read_fd)
        if not reaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    answer = b"".join(chunks)
    if status != 0 or not answer.startswith((_OK, _NONE)):
        raise PlannerLimit(_ended(status, memory_mb))
    if answer.startswith(_NONE):
        return None
    text = answer[len(_OK) :].decode("utf-8")
    return text.split("\n") if text else []


def search(lib: Any, lock: AbstractContextManager[Any], *, timeout_s: float, memory_mb: int) -> list[str] | None:
    """The operator names of fast-downward's plan from ``lib``'s current state (``None``: no plan
    exists), searched in a child process forked under ``lock`` (see the module docstring);
    :class:`PlannerLimit` when the search ends without an answer within the limits."""
    with _SLOTS:
        with lock:
            pid, read_fd = _fork(lib, timeout_s, memory_mb)
        return _collect(pid, read_fd, timeout_s, memory_mb)
