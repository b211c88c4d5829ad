"""The first program run inside the sandbox: finish the setup, drop privileges, exec the payload.

This file is executed as ``python -I -S -c <its source> <spec> <status fd>`` (the spec is a
``marshal`` dump in hex: marshal is built in, where importing json would cost ~10 ms per run); it uses the
standard library only and never imports arlkit. Its input is the spec the parent built (trusted);
the program it finally executes is not. Steps, in order:

1. (``unshare`` level) mount what bubblewrap would have mounted: a read-only view of ``/``,
   size-capped tmpfs on ``/tmp``, ``/var/tmp`` and ``/dev/shm``, empty tmpfs over hidden
   directories, read-only binds of the interpreter prefix and of the input directory;
   (``bwrap`` level as root) cap the number of files on bubblewrap's tmpfs mounts;
2. copy the input files into the fresh working directory;
3. (``unshare`` level only) fork, the parent staying behind as the namespace's init;
   then set the resource limits;
4. drop privileges (root parent only): empty capability bounding set, no supplementary groups,
   the slot's uid/gid, no inheritable or ambient capabilities, ``no_new_privs``, parent-death
   signal re-armed (a uid change clears it);
5. ``execve`` the payload with the minimal environment.

Any failure before ``execve`` is written to the status descriptor (close-on-exec, so the payload
never sees it) and ends the launcher with status 125.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import resource
import signal
import sys

TYPE_CHECKING = False  # the launcher starts fast: typing is imported for the type checker only
if TYPE_CHECKING:
    from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _do_mounts(libc: ctypes.CDLL, mounts: list[list[Any]]) -> None:
    # Bind sources may lie under directories hidden later: open them all first.
    fds = {}
    for op in mounts:
        if op[0] == "bind_ro":
            fds[op[1]] = os.open(op[1], os.O_PATH | os.O_CLOEXEC)
    for op in mounts:
        kind = op[0]
        if kind == "remount_ro":
            _mount(libc, None, op[1], None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
        elif kind == "tmpfs":
            _, target, size, mode, inodes = op
            os.makedirs(target, mode=0o755, exist_ok=True)
            options = f"size={size},mode={mode:o},nr_inodes={inodes}"
            _mount(libc, "tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options)
        elif kind == "remount_inodes":
            _, target, size, inodes = op
            _mount(libc, None, target, None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={size},nr_inodes={inodes}")
        elif kind == "bind_ro":
            _, source, target = op
            os.makedirs(target, mode=0o755, exist_ok=True)
            _mount(libc, f"/proc/self/fd/{fds[source]}", target, None, MS_BIND | MS_REC, None)
            _mount(libc, None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
        else:
            raise ValueError(f"unknown mount op {kind!r}")
    for fd in fds.values():
        os.close(fd)


def _copy_tree(src: str, dst: str, uid: int | None, gid: int | None) -> None:
    for name in os.listdir(src):
        s, d = os.path.join(src, name), os.path.join(dst, name)
        if os.path.isdir(s) and not os.path.islink(s):
            os.mkdir(d, 0o700)
            _copy_tree(s, d, uid, gid)
        else:
            with open(s, "rb") as fin, open(d, "wb") as fout:
                fout.write(fin.read())
            os.chmod(d, 0o600 if not os.access(s, os.X_OK) else 0o700)
        if uid is not None and gid is not None:
            os.chown(d, uid, gid)


def _drop_privileges(libc: ctypes.CDLL, uid: int, gid: int) -> None:
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def _stay_as_init() -> bool:
    """In a fresh pid namespace: fork; the parent stays behind as init (pid 1), reaps orphans, and
    exits with the payload's status (128 + n for signal n). Returns ``True`` in the parent.

    The payload must not be pid 1 itself: the kernel ignores signals that init has no handler for,
    so a CPU-limit SIGXCPU or the program's own ``os.kill(os.getpid(), ...)`` would not work.
    """
    child = os.fork()
    if child == 0:
        return False
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(125)
        if pid == child:
            break
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


def main() -> None:
    spec = marshal.loads(bytes.fromhex(sys.argv[1]))
    status_fd = int(sys.argv[2])
    os.set_inheritable(status_fd, False)
    step = "start"
    try:
        os.umask(0o022)
        libc = _libc()
        uid, gid = spec["uid"], spec["gid"]
        if spec["mounts"]:
            step = "mounts"
            _do_mounts(libc, spec["mounts"])
        workdir = spec["workdir"]
        if spec["copy_from"]:
            step = "workdir"
            os.mkdir(workdir, 0o700)
            _copy_tree(spec["copy_from"], workdir, uid, gid)
            if uid is not None:
                os.chown(workdir, uid, gid)
        if spec["fork_init"] and _stay_as_init():
            return
        step = "rlimits"
        for name, (soft, hard) in spec["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
        if uid is not None:
            step = "privileges"
            _drop_privileges(libc, uid, gid)
        step = "no_new_privs"
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if spec["pdeathsig"]:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        step = "exec"
        os.chdir(workdir)
        argv = spec["argv"]
        os.execve(argv[0], argv, spec["env"])
    except BaseException as exc:  # report every setup failure to the parent, then stop
        try:
            os.write(status_fd, f"{step}: {type(exc).__name__}: {exc}".encode()[:2000])
        finally:
            os._exit(125)


main()
