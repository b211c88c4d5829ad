"""How a run is isolated: the command line for each level, and which levels work on this machine.

Three levels, weakest first (``docs/sandbox.md`` has the full threat model):

- ``none``: a new session, resource limits, a wall clock kept by the parent, a fresh working
  directory and a minimal environment. The program runs as the calling user.
- ``unshare`` (root only; util-linux ``unshare``): new pid, network, mount, IPC and UTS namespaces;
  inside, the launcher remounts ``/`` read-only, mounts size-capped tmpfs on ``/tmp``, ``/var/tmp``
  and ``/dev/shm``, hides ``/root``, ``/home``, ``/run`` and ``hide_paths``, and runs the program
  under a per-slot non-root uid with no capabilities.
- ``bwrap`` (bubblewrap): the same view built by bubblewrap, plus a minimal ``/dev`` and the
  read-only bind of ``/`` applied recursively. Works as root (uid drop as above) and, where
  unprivileged user namespaces are allowed, as a normal user.
"""

from __future__ import annotations

import marshal
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arlkit.sandbox.config import ISOLATION_LEVELS, SandboxConfig, level_rank

__all__ = ["LaunchPlan", "available_levels", "build_plan", "is_root", "resolve_level"]

WORKDIR = "/tmp/work"
INPUT_MOUNT = "/tmp/.input"
ALWAYS_HIDDEN = ("/root", "/home", "/run")
PRIVATE_TMPFS = ("/tmp", "/var/tmp", "/dev/shm")
LAUNCHER_SOURCE = (Path(__file__).with_name("_launcher.py")).read_text(encoding="utf-8")
_BWRAP_ROOT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_CHOWN", "CAP_SYS_ADMIN")


def is_root() -> bool:
    """Whether this process runs as root (then programs run under a per-slot uid)."""
    return os.geteuid() == 0


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


def _world_searchable(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & stat.S_IXOTH)
    except OSError:
        return False


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _interpreter_dirs(python: str) -> list[str]:
    """Folders an interpreter needs: the prefix of its path and of its real path (a venv and the
    Python it links to), and, for the running interpreter, ``sys.prefix`` and ``sys.base_prefix``."""
    dirs = {os.path.dirname(os.path.dirname(os.path.abspath(python)))}
    dirs.add(os.path.dirname(os.path.dirname(os.path.realpath(python))))
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        dirs |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted({os.path.realpath(d) for d in dirs} | {os.path.abspath(d) for d in dirs})


def _view_ops(config: SandboxConfig, python: str) -> list[tuple[str, str]]:
    """The mounts that hide folders and bind the interpreter back, in the order to apply them.

    Hidden: ``/root``, ``/home``, ``/run``, ``config.hide_paths``, and any ancestor of the
    interpreter's folders that the sandbox user could not search (``/root`` with mode 0700, say).
    Exposed: the interpreter's folders under a hidden one, bound back read-only. Ordered by depth,
    a hide before a bind at the same depth, so each mount lands on top of its parent's.
    """
    hidden = [d for d in ALWAYS_HIDDEN if os.path.isdir(d) and not os.path.islink(d)]
    hidden += [os.path.abspath(h) for h in config.hide_paths if os.path.isdir(h)]
    # The launcher runs on this interpreter; the program on ``python``: both must stay reachable.
    needed = sorted(set(_interpreter_dirs(sys.executable)) | set(_interpreter_dirs(python)))
    for path in needed:
        parts = Path(path).parts
        for i in range(2, len(parts) + 1):
            ancestor = str(Path(*parts[:i]))
            if any(_under(ancestor, h) for h in hidden):
                break
            if not _world_searchable(ancestor):
                hidden.append(ancestor)
                break
    covered = hidden + list(PRIVATE_TMPFS)  # an interpreter under /tmp must be bound back too
    exposed = [p for p in needed if os.path.isdir(p) and p != "/" and any(_under(p, h) for h in covered)]
    # Bind the outermost folders only (a prefix covers the folders below it)...
    exposed = [p for p in exposed if not any(q != p and _under(p, q) for q in exposed)]
    # ...and skip a hide that sits inside another hidden folder with nothing bound in between.
    hidden = [
        h for h in dict.fromkeys(hidden)
        if not any(o != h and _under(h, o) and not any(_under(h, e) and _under(e, o) for e in exposed) for o in hidden)
    ]  # fmt: skip
    ops = [("tmpfs", h) for h in hidden] + [("bind", p) for p in exposed]
    return sorted(ops, key=lambda op: (len(Path(op[1]).parts), op[0] == "bind", op[1]))


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


def build_plan(
    level: str,
    config: SandboxConfig,
    run_dir: str,
    argv: list[str],
    env: dict[str, str],
    uid: int | None,
    status_fd: int,
) -> LaunchPlan:
    """The command that runs ``argv`` at ``level``; ``run_dir/in`` holds the input files."""
    level_rank(level)
    input_dir = os.path.join(run_dir, "in")
    python = config.python or sys.executable
    gid = uid
    if uid is not None:
        nproc: int | None = config.max_processes
    elif is_root():
        nproc = None  # root ignores RLIMIT_NPROC; only a uid drop or a pids cgroup would help
    else:
        nproc = _tasks_of_uid(os.getuid()) + config.max_processes
    spec: dict[str, Any] = {
        "mounts": [],
        "copy_from": INPUT_MOUNT if level != "none" else None,
        "workdir": WORKDIR if level != "none" else input_dir,
        "uid": uid,
        "gid": gid,
        "rlimits": _rlimits(config, nproc),
        "pdeathsig": level != "none",
        "fork_init": level == "unshare",
        "argv": argv,
        "env": env,
    }
    tmp_bytes = config.tmpfs_mb * 1024 * 1024
    side_bytes = max(tmp_bytes // 4, 1024 * 1024)
    view = _view_ops(config, python)
    if level == "unshare":
        mounts: list[list[object]] = [["remount_ro", "/"]]
        # nr_inodes caps the number of files too (bubblewrap has no option for it).
        mounts += [["tmpfs", "/tmp", tmp_bytes, 0o1777, 65536], ["tmpfs", "/var/tmp", side_bytes, 0o1777, 4096]]
        mounts += [["tmpfs", "/dev/shm", side_bytes, 0o1777, 4096]]
        for kind, path in view:
            mounts.append(["tmpfs", path, 1024 * 1024, 0o755, 1024] if kind == "tmpfs" else ["bind_ro", path, path])
        mounts += [["bind_ro", input_dir, INPUT_MOUNT]]
        spec["mounts"] = mounts
    launcher = [sys.executable, "-I", "-S", "-c", LAUNCHER_SOURCE, marshal.dumps(spec).hex(), str(status_fd)]
    if level == "none":
        return LaunchPlan(launcher, input_dir, input_dir)
    if level == "unshare":
        # setpriv --pdeathsig: if the parent process dies, unshare is killed, and with it (through
        # --kill-child) the namespace's init and every process in the namespace.
        wrapper = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []
        wrapper += ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child"]
        wrapper += ["--net", "--ipc", "--uts", "--mount-proc", "--"]
        return LaunchPlan(wrapper + launcher, run_dir, WORKDIR)
    args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += ["--size", str(tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    for side in ("/var/tmp", "/dev/shm"):
        args += ["--size", str(side_bytes), "--perms", "1777", "--tmpfs", side]
    tmpfs_roots: list[str] = list(PRIVATE_TMPFS)
    for kind, path in view:
        if kind == "tmpfs":
            tmpfs_roots.append(path)
            args += ["--size", str(1024 * 1024), "--perms", "0755", "--tmpfs", path]
            continue
        # bubblewrap creates missing mount points with mode 0700: make the way there searchable.
        root = max((h for h in tmpfs_roots if _under(path, h)), key=len, default=None)
        if root is not None:
            rel = Path(path).relative_to(root).parts
            for i in range(1, len(rel)):
                args += ["--perms", "0755", "--dir", str(Path(root, *rel[:i]))]
        args += ["--ro-bind", path, path]
    args += ["--ro-bind", input_dir, INPUT_MOUNT, "--chdir", "/tmp"]
    if is_root():
        for cap in _BWRAP_ROOT_CAPS:
            args += ["--cap-add", cap]
        # bubblewrap caps a tmpfs's size, not its number of files: the launcher (which holds
        # CAP_SYS_ADMIN until it drops every capability) remounts them with nr_inodes.
        spec["mounts"] = [
            ["remount_inodes", "/tmp", tmp_bytes, 65536],
            ["remount_inodes", "/var/tmp", side_bytes, 4096],
            ["remount_inodes", "/dev/shm", side_bytes, 4096],
        ]
        launcher[-2] = marshal.dumps(spec).hex()
    else:
        args += ["--unshare-user", "--disable-userns"]
    return LaunchPlan(args + ["--"] + launcher, run_dir, WORKDIR)


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
