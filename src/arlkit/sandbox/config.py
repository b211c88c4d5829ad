"""Limits and isolation settings of the sandbox, declared once with their defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["ISOLATION_LEVELS", "IsolationChoice", "IsolationLevel", "SandboxConfig", "level_rank"]

IsolationLevel = Literal["none", "unshare", "bwrap"]
IsolationChoice = Literal["auto", "none", "unshare", "bwrap"]

ISOLATION_LEVELS: tuple[IsolationLevel, ...] = ("none", "unshare", "bwrap")
"""From weakest to strongest; see ``docs/sandbox.md`` for what each one contains."""


_RESERVED_TOP_DIRS = (
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run",
    "/sbin", "/sys", "/tmp", "/usr", "/var",
)


def level_rank(level: str) -> int:
    """Position of ``level`` in :data:`ISOLATION_LEVELS` (higher is stronger)."""
    if level not in ISOLATION_LEVELS:
        raise ValueError(f"unknown isolation level {level!r}; valid choices: {', '.join(ISOLATION_LEVELS)}")
    return ISOLATION_LEVELS.index(level)


@dataclass(frozen=True)
class SandboxConfig:
    """How untrusted programs are run.

    Attributes:
        wall_time_s: wall-clock limit of one run, enforced by the parent (the child cannot ignore
            it); the whole sandbox is killed when it is reached.
        cpu_time_s: CPU-time limit of each sandboxed process (``RLIMIT_CPU``; SIGXCPU, then SIGKILL
            one second later).
        memory_mb: address-space limit of each sandboxed process (``RLIMIT_AS``) and, where the
            machine delegates a cgroup v2 (see ``cgroup_parent``), the memory of the whole run
            (``memory.max``: every process, tmpfs files and memfds included). Below ~128 MiB even
            ``import numpy`` fails unless BLAS threads are pinned to 1, which the sandbox does.
        max_processes: processes and threads the sandbox user may own at once (``RLIMIT_NPROC``);
            enforced only when the program runs under a non-root uid (levels ``unshare`` and
            ``bwrap`` as root, or any level as a normal user).
        max_file_mb: largest file a sandboxed process may write (``RLIMIT_FSIZE``).
        max_open_files: open file descriptors per process (``RLIMIT_NOFILE``).
        tmpfs_mb: size of the private in-memory ``/tmp`` that holds the working directory
            (namespaced levels); ``/var/tmp`` and ``/dev/shm`` get a quarter of it each.
        max_output_bytes: cap on each of stdout and stderr; a run that writes more is killed and
            classified ``output_limit``.
        isolation: ``auto`` picks the strongest level that works on this machine; a level name
            insists on that level (``SandboxUnavailable`` when it does not work here).
        min_isolation: refuse to run (``SandboxUnavailable``) below this level.
        uid_base: first of the uids the sandbox runs programs under when the parent is root; slot
            ``i`` uses ``uid_base + i`` so that concurrent runs never share a process count.
        uid_slots: number of such uids, i.e. the most runs that may be in flight at once on this
            machine (across processes, coordinated by lock files).
        python: interpreter for :meth:`Sandbox.run_python` (empty: the running interpreter).
        hide_paths: folders that look empty inside the sandbox (namespaced levels), e.g. the
            folder holding a task set's hidden tests. The namespaced levels show an allow-list of
            host paths only (``docs/sandbox.md``), so this matters for folders inside it (an
            interpreter's ``site-packages``); the interpreter's own folders are always shown.
        hide_packages: installed Python packages masked in every ``site-packages`` folder the
            sandbox shows, as arlkit's own copies always are (namespaced levels): import or
            distribution names (``reasoning_gym``); each one's package folder or module,
            ``.dist-info`` and editable-install files look empty, so a program cannot import or
            read them (a task set's generator, :func:`arlkit.envs.answers.generator_packages`).
        scratch_dirs: extra top-level folders (``/app``) mounted as private writable tmpfs of
            ``tmpfs_mb`` each, beside ``/tmp`` (namespaced levels only: a sandbox that asks for them
            at level ``none`` raises ``SandboxUnavailable``). The terminal environment keeps its
            task folder there, where Terminal-Bench tasks expect it.
        cgroup_parent: where per-run cgroups are made: ``auto`` (the cgroup this process runs
            in, when it is cgroup v2 with the memory controller delegated), ``off``, or the path
            of a delegated cgroup v2 folder. Without one, the seccomp filter and the tmpfs caps
            bound memory outside ``RLIMIT_AS`` (``docs/sandbox.md``).
    """

    wall_time_s: float = 10.0
    cpu_time_s: int = 10
    memory_mb: int = 512
    max_processes: int = 32
    max_file_mb: int = 16
    max_open_files: int = 64
    tmpfs_mb: int = 64
    max_output_bytes: int = 1_000_000
    isolation: IsolationChoice = "auto"
    min_isolation: IsolationLevel = "unshare"
    uid_base: int = 1_712_000_000
    uid_slots: int = 64
    python: str = ""
    hide_paths: tuple[str, ...] = ()
    hide_packages: tuple[str, ...] = ()
    scratch_dirs: tuple[str, ...] = ()
    cgroup_parent: str = "auto"

    def __post_init__(self) -> None:
        if not self.wall_time_s > 0:
            raise ValueError(f"wall_time_s must be > 0, got {self.wall_time_s}")
        for name in ("cpu_time_s", "memory_mb", "max_processes", "max_file_mb", "max_open_files", "tmpfs_mb"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_processes < 4:
            raise ValueError(f"max_processes must be >= 4 (the launcher needs a few), got {self.max_processes}")
        if self.max_open_files < 16:
            raise ValueError(f"max_open_files must be >= 16, got {self.max_open_files}")
        if self.max_output_bytes < 1024:
            raise ValueError(f"max_output_bytes must be >= 1024, got {self.max_output_bytes}")
        if self.isolation not in ("auto", *ISOLATION_LEVELS):
            raise ValueError(f"isolation must be one of auto, {', '.join(ISOLATION_LEVELS)}; got {self.isolation!r}")
        level_rank(self.min_isolation)
        if not 1000 <= self.uid_base <= 4_000_000_000:
            raise ValueError(f"uid_base must be between 1000 and 4000000000, got {self.uid_base}")
        for path in self.hide_paths:
            if not path.startswith("/") or path.rstrip("/") in ("", "/tmp", "/proc", "/dev"):
                raise ValueError(f"hide_paths must be absolute folders other than /, /tmp, /proc, /dev; got {path!r}")
        for name in self.hide_packages:
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", name):
                raise ValueError(f"hide_packages must be package names such as reasoning_gym; got {name!r}")
        for path in self.scratch_dirs:
            if not re.fullmatch(r"/[A-Za-z0-9_][A-Za-z0-9_.-]*", path) or path in _RESERVED_TOP_DIRS:
                raise ValueError(
                    f"scratch_dirs must be top-level folders such as /app, not a system folder "
                    f"({', '.join(_RESERVED_TOP_DIRS)}); got {path!r}"
                )
        if self.cgroup_parent not in ("auto", "off") and not self.cgroup_parent.startswith("/sys/fs/cgroup/"):
            raise ValueError(
                f"cgroup_parent must be auto, off, or a folder under /sys/fs/cgroup/; got {self.cgroup_parent!r}"
            )
        if not 1 <= self.uid_slots <= 4096:
            raise ValueError(f"uid_slots must be between 1 and 4096, got {self.uid_slots}")
