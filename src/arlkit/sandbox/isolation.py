"""How a run is isolated: the command line for each level, and which levels work on this machine.

Three levels, weakest first (``docs/sandbox.md`` has the full threat model):

- ``none``: a new session, resource limits, the seccomp filter (:mod:`arlkit.sandbox.seccomp`),
  a wall clock kept by the parent, a fresh working directory and a minimal environment. The
  program runs as the calling user and sees the host's file system.
- ``unshare`` (root only; util-linux ``unshare``): new pid, network, mount, IPC, UTS and cgroup
  namespaces; inside, the launcher builds a new root on an empty tmpfs (the allow-listed view of
  :mod:`arlkit.sandbox.fsview`, a minimal ``/dev``, a fresh ``/proc``, size-capped scratch
  tmpfs), moves into it with ``pivot_root`` and detaches the host's mounts, then runs the
  program under a per-slot non-root uid with no capabilities.
- ``bwrap`` (bubblewrap): the same view built by bubblewrap on its own empty root. Works as root
  (uid drop as above) and, where unprivileged user namespaces are allowed, as a normal user.
"""

from __future__ import annotations

import functools
import marshal
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arlkit.sandbox import seccomp
from arlkit.sandbox.config import ISOLATION_LEVELS, SandboxConfig, level_rank
from arlkit.sandbox.fsview import Op, etc_files, order_ops, system_view

__all__ = ["LaunchPlan", "NestedProgram", "available_levels", "build_plan", "is_root", "resolve_level", "seccomp_filter"]

WORKDIR = "/tmp/work"
INPUT_MOUNT = "/tmp/.input"
LAUNCHER_SOURCE = (Path(__file__).with_name("_launcher.py")).read_text(encoding="utf-8")
_BWRAP_ROOT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_CHOWN", "CAP_SYS_ADMIN")
_MASK_BYTES = 4096


def is_root() -> bool:
    """Whether this process runs as root (then programs run under a per-slot uid)."""
    return os.geteuid() == 0


@functools.lru_cache(maxsize=1)
def seccomp_filter() -> bytes:
    """The seccomp filter for this machine (empty where :mod:`arlkit.sandbox.seccomp` has no table)."""
    try:
        return seccomp.build_filter()
    except ValueError:
        return b""


@dataclass(frozen=True)
class NestedProgram:
    """A program the launcher starts beside the run's own, in pid and mount namespaces of its own.

    Attributes:
        argv: the program (an absolute executable path first).
        env: its whole environment.
        private_dirs: folders (beside ``/tmp``) that get a fresh tmpfs on its side, so that it
            cannot see what the run's own program keeps there; every other mount is shared.
        nosymfollow_dirs: shared folders where the run's own program follows no symbolic link
            (mounted ``nosymfollow`` on its side; ``readlink`` still works), so that a link the
            nested program plants there at any moment cannot lead it into its private folders.
    """

    argv: tuple[str, ...]
    env: dict[str, str]
    private_dirs: tuple[str, ...] = ()
    nosymfollow_dirs: tuple[str, ...] = ()


@dataclass(frozen=True)
class LaunchPlan:
    """Everything ``subprocess.Popen`` needs for one run.

    Attributes:
        argv: the full command (wrapper, launcher, spec).
        cwd: the parent-side working directory of the wrapper.
        workdir: the program's working directory as the program sees it.
    """

    argv: list[str]
    cwd: str
    workdir: str


def _rlimits(config: SandboxConfig, set_nproc: int | None) -> dict[str, list[int]]:
    mib = 1024 * 1024
    limits = {
        "RLIMIT_CPU": [config.cpu_time_s, config.cpu_time_s + 1],
        "RLIMIT_AS": [config.memory_mb * mib, config.memory_mb * mib],
        "RLIMIT_FSIZE": [config.max_file_mb * mib, config.max_file_mb * mib],
        "RLIMIT_NOFILE": [config.max_open_files, config.max_open_files],
        "RLIMIT_CORE": [0, 0],
    }
    if set_nproc is not None:
        limits["RLIMIT_NPROC"] = [set_nproc, set_nproc]
    return limits


def _tasks_of_uid(uid: int) -> int:
    """Number of tasks (threads included) of ``uid`` now: the base of RLIMIT_NPROC for a normal user."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as fh:
                text = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            total += int(fields.get("Threads", "1").strip() or 1)
    return total


_RUN_INPUT = "\0run input"  # stands for run_dir/in in the cached order of the view


def _view(config: SandboxConfig, run_dir: str, uid: int | None) -> tuple[list[Op], str]:
    """Every step that builds the program's file system at a namespaced level, in order, and the
    empty file that masks files."""
    from arlkit.sandbox.slots import state_dir  # local: slots imports nothing from here

    python = config.python or sys.executable
    tmp_bytes = config.tmpfs_mb * 1024 * 1024
    side_bytes = max(tmp_bytes // 4, 1024 * 1024)
    ops = list(system_view(tuple(sorted({python, sys.executable})), config.hide_paths, config.hide_packages))
    etc, empty = etc_files(state_dir(), os.getuid() if uid is None else uid, os.getgid() if uid is None else uid)
    ops += etc
    # nr_inodes caps the number of files (bubblewrap has no option for it: see build_plan).
    ops += [("tmpfs", "/tmp", tmp_bytes, 0o1777, 65536), ("tmpfs", "/var/tmp", side_bytes, 0o1777, 4096)]
    ops += [("tmpfs", path, tmp_bytes, 0o1777, 65536) for path in config.scratch_dirs]
    ops += [("dev", "/dev"), ("tmpfs", "/dev/shm", side_bytes, 0o1777, 4096), ("proc", "/proc")]
    ops.append(("bind", _RUN_INPUT, INPUT_MOUNT))
    input_dir = os.path.join(run_dir, "in")
    return [("bind", input_dir, INPUT_MOUNT) if op[1] == _RUN_INPUT else op for op in order_ops(ops)], empty


def _bwrap_args(ops: list[Op], empty_file: str, proc_read_only: bool = True) -> list[str]:
    args: list[str] = []
    for op in ops:
        kind = op[0]
        if kind == "tmpfs":
            args += ["--size", str(op[2]), "--perms", f"{op[3]:04o}", "--tmpfs", op[1]]
        elif kind == "dev":
            args += ["--dev", op[1]]
        elif kind == "proc":
            args += ["--proc", op[1]]
        elif kind == "dir":
            args += ["--perms", "0755", "--dir", op[1]]
        elif kind == "symlink":
            args += ["--symlink", op[1], op[2]]
        elif kind == "bind":
            args += ["--ro-bind", op[1], op[2]]
        elif kind == "mask" and op[2] == "dir":
            args += ["--size", str(_MASK_BYTES), "--perms", "0555", "--tmpfs", op[1]]
        elif kind == "mask":
            args += ["--ro-bind", empty_file, op[1]]
        else:
            raise ValueError(f"unknown view step {kind!r}")
    # /proc read-only: no process can open another's /proc/<pid>/mem for writing (EROFS). A
    # launcher that makes nested user namespaces needs it writable for their maps; every program
    # then runs in a nested pid namespace with a read-only /proc of its own.
    return args + (["--remount-ro", "/proc"] if proc_read_only else []) + ["--remount-ro", "/"]


def build_plan(
    level: str,
    config: SandboxConfig,
    run_dir: str,
    argv: list[str],
    env: dict[str, str],
    uid: int | None,
    status_fd: int,
    nested: NestedProgram | None = None,
) -> LaunchPlan:
    """The command that runs ``argv`` at ``level``; ``run_dir/in`` holds the input files. With
    ``nested``, the launcher also starts that program in namespaces of its own (a namespaced
    level only; ``docs/sandbox.md``, "A program beside a nested one")."""
    level_rank(level)
    if nested is not None and level == "none":
        raise ValueError("a nested program needs a namespaced isolation level")
    input_dir = os.path.join(run_dir, "in")
    gid = uid
    if uid is not None:
        nproc: int | None = config.max_processes
    elif is_root():
        nproc = None  # root ignores RLIMIT_NPROC; only a uid drop or a pids cgroup would help
    else:
        nproc = _tasks_of_uid(os.getuid()) + config.max_processes
    spec: dict[str, Any] = {
        "mounts": [],
        "root": None,
        "view": [],
        "pivot_root_nr": -1,
        "copy_from": INPUT_MOUNT if level != "none" else None,
        "workdir": WORKDIR if level != "none" else input_dir,
        "uid": uid,
        "gid": gid,
        "rlimits": _rlimits(config, nproc),
        "pdeathsig": level != "none",
        "fork_init": level == "unshare",
        "seccomp": seccomp_filter(),
        "argv": argv,
        "env": env,
        "loopback": level == "unshare",
        "nest": None,
    }
    if nested is not None:
        size = config.tmpfs_mb * 1024 * 1024
        spec["nest"] = {
            "argv": list(nested.argv), "env": dict(nested.env), "userns": not is_root(),
            "tmpfs": [[path, size, 0o1777, 65536] for path in ("/tmp", *nested.private_dirs)],
            "nosymfollow": list(nested.nosymfollow_dirs),
        }

    def launcher() -> list[str]:
        return [sys.executable, "-I", "-S", "-c", LAUNCHER_SOURCE, marshal.dumps(spec).hex(), str(status_fd)]

    if level == "none":
        return LaunchPlan(launcher(), input_dir, input_dir)
    ops, empty_file = _view(config, run_dir, uid)
    if level == "unshare":
        root = os.path.join(run_dir, "root")
        os.mkdir(root, 0o700)
        spec.update(root=root, view=[list(op) for op in ops], empty=empty_file)
        if platform.machine() in seccomp.SUPPORTED_MACHINES:  # else the launcher reports the missing number
            spec["pivot_root_nr"] = seccomp.syscall_number("pivot_root")
        # setpriv --pdeathsig: if the parent process dies, unshare is killed, and with it (through
        # --kill-child) the namespace's init and every process in the namespace.
        wrapper = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []
        wrapper += ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child"]
        wrapper += ["--net", "--ipc", "--uts", "--cgroup", "--"]
        return LaunchPlan(wrapper + launcher(), run_dir, WORKDIR)
    args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--die-with-parent", "--new-session"]
    nested_userns = nested is not None and not is_root()
    args += _bwrap_args(ops, empty_file, proc_read_only=not nested_userns) + ["--chdir", "/tmp"]
    if is_root():
        for cap in _BWRAP_ROOT_CAPS:
            args += ["--cap-add", cap]
        # bubblewrap caps a tmpfs's size, not its number of files: the launcher (which holds
        # CAP_SYS_ADMIN until it drops every capability) remounts them with nr_inodes.
        spec["mounts"] = [["remount_inodes", op[1], op[2], op[4]] for op in ops if op[0] == "tmpfs"]
    else:
        # a nested program needs user namespaces of its own (the capabilities to mount); the
        # seccomp filter still refuses new user namespaces to every program
        args += ["--unshare-user"] + ([] if nested_userns else ["--disable-userns"])
    return LaunchPlan(args + ["--"] + launcher(), run_dir, WORKDIR)


_PROBED: dict[tuple[str, str], str | None] = {}
_PROBE_LOCK = threading.Lock()


def _probe(level: str, config: SandboxConfig) -> str | None:
    """``None`` when a trivial program runs at ``level``; else why not."""
    if level == "unshare" and not is_root():
        return "the unshare level needs root (it drops to a per-slot uid)"
    tool = {"unshare": "unshare", "bwrap": "bwrap"}.get(level)
    if tool and shutil.which(tool) is None:
        return f"{tool} is not installed"
    from arlkit.sandbox.slots import acquire_uid  # local: slots imports nothing from here

    python = config.python or sys.executable
    run_dir = tempfile.mkdtemp(prefix="arlkit-probe-")
    try:
        os.chmod(run_dir, 0o700)
        os.mkdir(os.path.join(run_dir, "in"), 0o755)
        read_fd, write_fd = os.pipe()
        try:
            with acquire_uid(config, level) as uid:
                argv = [python, "-S", "-c", "print('ok')"]
                plan = build_plan(level, config, run_dir, argv, {"PATH": "/usr/bin:/bin"}, uid, write_fd)
                proc = subprocess.run(
                    plan.argv, cwd=plan.cwd, capture_output=True, timeout=30, pass_fds=(write_fd,),
                    stdin=subprocess.DEVNULL, check=False,
                )
            os.close(write_fd)
            write_fd = -1
            status = os.read(read_fd, 4096).decode(errors="replace")
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
        if proc.returncode == 0 and proc.stdout.strip() == b"ok":
            return None
        detail = status or proc.stderr.decode(errors="replace").strip()[-300:]
        return f"a trial run failed (status {proc.returncode}): {detail}"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"a trial run failed: {exc}"
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def available_levels(config: SandboxConfig | None = None) -> dict[str, str | None]:
    """Each isolation level mapped to ``None`` when it works here, or to the reason it does not.

    Probed once per process and interpreter (a trial run per level).
    """
    config = config or SandboxConfig()
    python = config.python or sys.executable
    out: dict[str, str | None] = {}
    with _PROBE_LOCK:
        for level in ISOLATION_LEVELS:
            key = (level, python)
            if key not in _PROBED:
                _PROBED[key] = _probe(level, config)
            out[level] = _PROBED[key]
    return out


def resolve_level(config: SandboxConfig) -> str:
    """The level runs will get under ``config``; raises ``SandboxUnavailable`` when it is not
    available or is below ``config.min_isolation``."""
    from arlkit.sandbox.result import SandboxUnavailable

    levels = available_levels(config)
    if config.isolation == "auto":
        working = [lv for lv in ISOLATION_LEVELS if levels[lv] is None]
        level = working[-1] if working else "none"
    else:
        level = config.isolation
        if levels[level] is not None:
            raise SandboxUnavailable(f"isolation {level!r} is not available here: {levels[level]}")
    if level_rank(level) < level_rank(config.min_isolation):
        if config.isolation != "auto":
            raise SandboxUnavailable(
                f"isolation {level!r} is below min_isolation={config.min_isolation!r}; lower min_isolation to use it"
            )
        reasons = "; ".join(f"{lv}: {why}" for lv, why in levels.items() if why)
        raise SandboxUnavailable(
            f"the strongest isolation available here is {level!r}, below min_isolation={config.min_isolation!r} "
            f"({reasons}). Install bubblewrap (apt-get install -y bubblewrap), run as root for the unshare "
            "level, or accept weaker isolation with min_isolation='none'."
        )
    return level
