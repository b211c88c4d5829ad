"""What one sandboxed run returns, and how its ending is classified."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Literal

__all__ = ["Outcome", "SandboxError", "SandboxResult", "SandboxUnavailable", "classify"]

Outcome = Literal["ok", "error", "timeout", "memory", "killed", "output_limit"]
"""How a run ended:

- ``ok``: exit status 0;
- ``error``: a non-zero exit status (an exception, ``sys.exit(1)``, a syntax error);
- ``timeout``: the wall clock or the CPU-time limit ran out;
- ``memory``: the address-space limit was hit (``MemoryError``, failed allocation);
- ``killed``: ended by a signal the sandbox did not send for one of the reasons above
  (a segmentation fault from runaway recursion, ``os.kill(os.getpid(), 9)``);
- ``output_limit``: stdout or stderr exceeded the cap and the run was stopped.
"""

_MEMORY_MARKERS = ("memoryerror", "cannot allocate memory", "out of memory", "bad_alloc", "failed to allocate")


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the program): a setup step or the launcher broke."""


class SandboxUnavailable(SandboxError):
    """The requested or minimum isolation level cannot be reached on this machine."""


@dataclass(frozen=True)
class SandboxResult:
    """The result of one sandboxed run.

    Attributes:
        stdout: standard output, decoded as UTF-8 (invalid bytes replaced), cut at the cap.
        stderr: standard error, likewise.
        exit_code: the exit status when the program exited by itself, else ``None``.
        signal: the number of the signal that ended the program, else ``None``.
        outcome: the classified ending (see :data:`Outcome`).
        isolation: the isolation level the run actually had (``none``, ``unshare`` or ``bwrap``).
        duration_s: wall-clock seconds from launch to the end of cleanup.
        stdout_truncated: stdout reached the cap.
        stderr_truncated: stderr reached the cap.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    signal: int | None
    outcome: Outcome
    isolation: str
    duration_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        """The program exited with status 0 within every limit."""
        return self.outcome == "ok"


def classify(
    exit_code: int | None, signum: int | None, stderr_tail: str, *, timed_out: bool, output_exceeded: bool
) -> Outcome:
    """The :data:`Outcome` of a run from how it ended (see the order of the checks)."""
    if output_exceeded:
        return "output_limit"
    if timed_out or signum == signal.SIGXCPU:
        return "timeout"
    tail = stderr_tail[-4000:].lower()
    if (signum is not None or exit_code) and any(marker in tail for marker in _MEMORY_MARKERS):
        return "memory"
    if signum is not None:
        return "killed"
    if exit_code:
        return "error"
    return "ok"
