"""Per-run uids for root parents: one uid per concurrent run, coordinated across processes.

``RLIMIT_NPROC`` counts every process of a uid on the machine, and root ignores it. So a root
parent runs each program under a uid of its own, ``uid_base + slot``, held through an exclusive
``flock`` on a lock file for the duration of the run: two runs (in any two processes on the
machine) never share a uid, so one run's fork bomb cannot starve another's process count, and
killing "every process of the uid" after a run touches nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import tempfile
import time
from collections.abc import Iterator

from arlkit.sandbox.config import SandboxConfig

__all__ = ["acquire_uid", "kill_uid", "pids_of_uid", "state_dir"]

_LOCK_DIR = os.path.join(tempfile.gettempdir(), "arlkit-sandbox-slots")
RELEASE_TIMEOUT_S = 60.0
"""How long a run's end waits for the slot uid's last processes to exit before freeing the slot."""


def _own_dir(path: str) -> str:
    from arlkit.sandbox.result import SandboxError

    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SandboxError(f"{path} must be a folder owned by uid {os.geteuid()} and not writable by others")
    return path


def _lock_dir() -> str:
    return _own_dir(_LOCK_DIR)


def state_dir() -> str:
    """The sandbox's folder for state shared by runs (slot locks, the synthetic ``/etc`` files):
    owned by this user and writable by no one else (one per user: a normal user cannot own root's)."""
    return _lock_dir() if os.geteuid() == 0 else _own_dir(f"{_LOCK_DIR}-{os.geteuid()}")


def pids_of_uid(uid: int) -> list[int]:
    """Processes whose real uid is ``uid`` (read from ``/proc/<pid>/status``)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry))
                        break
        except (OSError, ValueError):
            continue
    return pids


def kill_uid(uid: int, timeout_s: float = 5.0) -> bool:
    """SIGKILL every process of ``uid`` until none is left; ``False`` if some survive ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = pids_of_uid(uid)
        if not pids:
            return True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)


@contextlib.contextmanager
def acquire_uid(config: SandboxConfig, level: str, timeout_s: float = 120.0) -> Iterator[int | None]:
    """Hold a free slot's uid for one run; yields ``None`` when no uid drop applies (level
    ``none``, or a parent that is not root)."""
    from arlkit.sandbox.result import SandboxError

    if level == "none" or os.geteuid() != 0:
        yield None
        return
    directory = _lock_dir()
    deadline = time.monotonic() + timeout_s
    start = random.randrange(config.uid_slots)
    while True:
        for k in range(config.uid_slots):
            slot = (start + k) % config.uid_slots
            path = os.path.join(directory, f"slot-{config.uid_base + slot}.lock")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            uid = config.uid_base + slot
            # A previous holder killed mid-run may have left processes behind; a slot whose
            # leftovers do not die is skipped, never shared with them.
            if not kill_uid(uid):
                os.close(fd)
                continue
            try:
                yield uid
            finally:
                # The processes of a big run (a fork bomb, a tmpfs of 65,536 files to tear down)
                # can take seconds to exit on a loaded machine: the slot is free once they are gone.
                kill_uid(uid, timeout_s=RELEASE_TIMEOUT_S)
                os.close(fd)  # releases the lock
            return
        if time.monotonic() > deadline:
            raise SandboxError(f"all {config.uid_slots} sandbox slots stayed busy for {timeout_s:.0f} s")
        time.sleep(0.005)
