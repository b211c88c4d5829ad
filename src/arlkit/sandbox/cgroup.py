"""A memory bound for the whole run: one cgroup v2 per run, where the machine delegates one.

``RLIMIT_AS`` bounds each process, not the run, and counts neither tmpfs files nor memfds. A
cgroup's ``memory.max`` counts all of it (every process, page cache, tmpfs pages, kernel memory).
The sandbox uses one when a *delegated* cgroup v2 folder exists (``docs/sandbox.md``):

- ``/sys/fs/cgroup`` is a cgroup2 mount, and
- the parent folder (``SandboxConfig.cgroup_parent``: ``auto`` = the cgroup this process runs in)
  is writable and has the ``memory`` controller in its ``cgroup.subtree_control``.

Each run then gets a child folder with ``memory.max`` (``SandboxConfig.memory_mb``),
``memory.swap.max`` 0, ``memory.oom.group`` 1 and ``pids.max``; the wrapper moves itself in before
it starts anything (so every process of the run is inside), the runner reads ``memory.events`` to
classify an OOM kill as ``memory``, kills what is left and removes the folder. Elsewhere the
seccomp filter and the tmpfs caps are the fallback (see :mod:`arlkit.sandbox.seccomp`).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import signal
import threading
import time

__all__ = ["CGROUP_ROOT", "RunCgroup", "find_parent"]

CGROUP_ROOT = "/sys/fs/cgroup"
_NAME = re.compile(r"^arlkit-(\d+)-\d+$")
_COUNTER = itertools.count()
_FOUND: dict[str, tuple[str | None, str]] = {}
_FOUND_LOCK = threading.Lock()


def _read(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as fh:
        return fh.read()


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def cgroup2_mounted(root: str, mountinfo: str) -> bool:
    """Whether the last mount at ``root`` in a ``/proc/self/mountinfo`` text is a cgroup2 file system."""
    kind = None
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[4] == root and " - " in line:
            kind = line.split(" - ", 1)[1].split()[0]
    return kind == "cgroup2"


def own_cgroup(proc_cgroup: str) -> str | None:
    """The cgroup v2 path (``0::/path`` line) in a ``/proc/self/cgroup`` text, if any."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def check_parent(
    setting: str,
    root: str = CGROUP_ROOT,
    mountinfo_path: str = "/proc/self/mountinfo",
    cgroup_path: str = "/proc/self/cgroup",
) -> tuple[str | None, str]:
    """``(folder, why)``: the delegated cgroup folder runs are created in under ``setting``
    (``auto``, ``off`` or a folder), or ``None`` and the reason there is none."""
    if setting == "off":
        return None, "cgroup_parent is 'off'"
    try:
        if not cgroup2_mounted(root, _read(mountinfo_path)):
            return None, f"{root} is not a cgroup2 mount (cgroup v1 or none)"
        if setting == "auto":
            own = own_cgroup(_read(cgroup_path))
            if own is None:
                return None, "this process is in no cgroup v2"
            folder = os.path.normpath(root + "/" + own.lstrip("/"))
        else:
            folder = os.path.normpath(setting)
            if not (folder + "/").startswith(root.rstrip("/") + "/"):
                return None, f"cgroup_parent {setting!r} is not under {root}"
        controllers = _read(os.path.join(folder, "cgroup.subtree_control")).split()
    except OSError as exc:
        return None, f"cannot read the cgroup tree: {exc}"
    if "memory" not in controllers:
        return None, f"the memory controller is not enabled in {folder}/cgroup.subtree_control (not delegated)"
    if not os.access(folder, os.W_OK):
        return None, f"{folder} is not writable"
    return folder, f"cgroup v2 under {folder}"


def find_parent(setting: str) -> tuple[str | None, str]:
    """:func:`check_parent` for the live system, decided once per process and setting."""
    with _FOUND_LOCK:
        if setting not in _FOUND:
            _FOUND[setting] = check_parent(setting)
        return _FOUND[setting]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunCgroup:
    """The cgroup of one run: created with its limits, joined by the wrapper, removed after."""

    def __init__(self, parent: str, memory_bytes: int, max_pids: int) -> None:
        _sweep(parent)
        self.path = os.path.join(parent, f"arlkit-{os.getpid()}-{next(_COUNTER)}")
        os.mkdir(self.path, 0o755)
        try:
            limits = {"memory.max": str(memory_bytes), "memory.swap.max": "0", "memory.oom.group": "1"}
            limits["pids.max"] = str(max_pids)
            for name, value in limits.items():
                target = os.path.join(self.path, name)
                if name == "memory.max" or os.path.exists(target):
                    _write(target, value)
        except OSError:
            self.close()
            raise

    def join_prefix(self) -> list[str]:
        """A command prefix that moves itself into this cgroup, then executes the rest: the shell
        writes its own pid (``0``) to ``cgroup.procs`` before ``exec``, so the wrapper and all it
        starts are inside from their first instruction."""
        return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', os.path.join(self.path, "cgroup.procs")]

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the run at ``memory.max``."""
        try:
            events = dict(line.split() for line in _read(os.path.join(self.path, "memory.events")).splitlines() if line)
        except (OSError, ValueError):
            return False
        return any(int(events.get(key, "0")) > 0 for key in ("oom_kill", "oom_group_kill"))

    def close(self, timeout_s: float = 5.0) -> None:
        """Kill whatever is still inside and remove the folder (a removal that keeps failing on a
        busy cgroup is left for the next run's sweep)."""
        _remove(self.path, timeout_s)


def _pids(path: str) -> list[int]:
    try:
        return [int(p) for p in _read(os.path.join(path, "cgroup.procs")).split()]
    except (OSError, ValueError):
        return []


def _remove(path: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    kill_file = os.path.join(path, "cgroup.kill")
    while True:
        if os.path.exists(kill_file):
            with contextlib.suppress(OSError):
                _write(kill_file, "1")
        for pid in _pids(path):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return
        time.sleep(0.002)


def _sweep(parent: str) -> None:
    """Remove run cgroups left by processes that died mid-run."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        match = _NAME.match(name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            _remove(os.path.join(parent, name), 0.5)
