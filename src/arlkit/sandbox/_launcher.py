"""The first program run inside the sandbox: finish the setup, drop privileges, exec the payload.

This file is executed as ``python -I -S -c <its source> <spec> <status fd>`` (the spec is a
``marshal`` dump in hex: marshal is built in, where importing json would cost ~10 ms per run); it uses the
standard library only and never imports arlkit. Its input is the spec the parent built (trusted);
the program it finally executes is not. Steps, in order:

1. (``unshare`` level) build the new root on an empty tmpfs, step by step as the spec lists them
   (folders, symlinks, read-only binds of the allow-listed host paths, empty masks, size-capped
   scratch tmpfs, a minimal ``/dev`` of bound device nodes, a fresh ``/proc``, the input
   directory), make it read-only, ``pivot_root`` into it and detach the host's mounts;
   (``bwrap`` level as root) cap the number of files on bubblewrap's tmpfs mounts;
2. copy the input files into the fresh working directory;
3. (``unshare`` level only) bring the loopback interface up; fork, the parent staying behind as
   the namespace's init;
3b. (a nested program, ``spec["nest"]``) start the nested program and move the payload beside
   it, each in pid and mount namespaces of its own (:func:`_split`); the payload talks to it
   through two pipes; then set the resource limits;
4. drop privileges (root parent only): empty capability bounding set, no supplementary groups,
   the slot's uid/gid, no inheritable or ambient capabilities, ``no_new_privs``, parent-death
   signal re-armed (a uid change clears it);
5. install the seccomp filter the parent built (``arlkit/sandbox/seccomp.py``);
6. ``execve`` the payload with the minimal environment.

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

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
MS_PRIVATE, MS_NOSYMFOLLOW = 1 << 18, 256
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 22, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER = 4, 2
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"))
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


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


def _remount_inodes(libc: ctypes.CDLL, mounts: list[list[Any]]) -> None:
    for _, target, size, inodes in mounts:
        _mount(libc, None, target, None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={size},nr_inodes={inodes}")


def _bind(libc: ctypes.CDLL, source: str, target: str, flags: int) -> None:
    if not os.path.lexists(target):
        if os.path.isdir(source):
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
    _mount(libc, source, target, None, MS_BIND | MS_REC, None)
    _mount(libc, None, target, None, MS_REMOUNT | MS_BIND | flags, None)


def _tmpfs(libc: ctypes.CDLL, target: str, size: int, mode: int, inodes: int) -> None:
    if not os.path.isdir(target):
        os.mkdir(target, 0o755)
    _mount(libc, "tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode:o},nr_inodes={inodes}")


def _build_root(libc: ctypes.CDLL, spec: dict[str, Any]) -> None:
    """Build the program's file system on an empty tmpfs at ``spec["root"]`` and move into it."""
    root = spec["root"]
    _tmpfs(libc, root, 1 << 20, 0o755, 4096)
    read_only_later = []
    for op in spec["view"]:
        kind = op[0]
        where = op[2] if kind in ("bind", "symlink") else op[1]
        target = root + where
        if kind == "dir":
            if not os.path.isdir(target):
                os.mkdir(target, 0o755)
        elif kind == "symlink":
            os.symlink(op[1], target)
        elif kind == "bind":
            _bind(libc, op[1], target, MS_RDONLY | MS_NOSUID | MS_NODEV)
        elif kind == "tmpfs":
            _tmpfs(libc, target, op[2], op[3], op[4])
        elif kind == "mask" and op[2] == "dir":
            _tmpfs(libc, target, 4096, 0o555, 16)
            read_only_later.append(target)  # folders bound inside it are created first
        elif kind == "mask":
            _bind(libc, spec["empty"], target, MS_RDONLY | MS_NOSUID | MS_NODEV)
        elif kind == "dev":
            _tmpfs(libc, target, 65536, 0o755, 64)
            for name in DEVICES:
                _bind(libc, "/dev/" + name, f"{target}/{name}", MS_NOSUID | MS_NOEXEC)
            for name, link in DEV_LINKS:
                os.symlink(link, f"{target}/{name}")
        elif kind == "proc":
            os.mkdir(target, 0o555)
            # read-only: no process can open another's /proc/<pid>/mem for writing (EROFS)
            _mount(libc, "proc", target, "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        else:
            raise ValueError(f"unknown view step {kind!r}")
    for target in read_only_later + [root]:
        _mount(libc, None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    if spec["pivot_root_nr"] < 0:
        raise OSError(f"no pivot_root system call number for {os.uname().machine}")
    os.chdir(root)
    # pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves the new
    # root alone in this mount namespace (pivot_root(2), "NOTES").
    _check(libc.syscall(ctypes.c_long(spec["pivot_root_nr"]), b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


def _install_seccomp(libc: ctypes.CDLL, program: bytes) -> None:
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


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


def _drop_privileges(libc: ctypes.CDLL, uid: int | None, gid: int | None) -> None:
    """Empty the capability sets; with ``uid``, also become that uid and gid with no groups."""
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if uid is not None and gid is not None:
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


def _loopback_up() -> None:
    """Bring ``lo`` up in the run's new network namespace (``unshare --net`` leaves it down), so
    that a program can reach a server it started itself on 127.0.0.1."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14s", b"lo", flags | iff_up, b""))


def _write_map(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def _enter_namespaces(libc: ctypes.CDLL, spec: dict[str, Any], private: list[list[Any]]) -> tuple[int | None, int | None]:
    """Move into new mount and pid namespaces (and, where the launcher is not root, a user
    namespace mapping its own uid, for the capabilities to mount); returns in the new pid
    namespace's first program, with the uid and gid it is to run as.

    The calling process stays behind in the run's pid namespace, drops its privileges and waits
    for the new namespace's init, whose status it exits with; the init mounts a fresh tmpfs over
    each ``private`` folder and a read-only ``/proc`` of the new pid namespace, then stays as
    init (:func:`_stay_as_init`). Each process of the chain dies with its parent."""
    userns = spec["nest"]["userns"]
    uid, gid = os.getuid(), os.getgid()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | (CLONE_NEWUSER if userns else 0)), "unshare")
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # new credentials may clear it
    if userns:
        _write_map("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write_map("/proc/self/setgroups", "deny")
        _write_map("/proc/self/gid_map", f"{gid} {gid} 1\n")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)
    run_as = (None, None) if userns else (spec["uid"], spec["gid"])
    init = os.fork()
    if init:
        _drop_privileges(libc, *run_as)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # a uid change clears it
        _, status = os.waitpid(init, 0)
        os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for target, size, mode, inodes in private:
        _tmpfs(libc, target, size, mode, inodes)
    # read-only: no process can open another's /proc/<pid>/mem for writing (EROFS)
    _mount(libc, "proc", "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    _stay_as_init()
    return run_as


def _split(libc: ctypes.CDLL, spec: dict[str, Any]) -> tuple[dict[str, str], int | None, int | None]:
    """Start the nested program (``spec["nest"]``) and move the payload beside it: each in pid
    and mount namespaces of its own (:func:`_enter_namespaces`). Returns in the payload's side
    with what it needs to reach the nested program (environment variables: the two pipes that
    are the nested program's standard input and output) and the uid and gid to run as.

    Neither side sees the other's processes (each has its own pid namespace and ``/proc``) or
    the other's private folders (the nested program gets a fresh ``/tmp`` and ``nest["tmpfs"]``
    folders); they share the network namespace and every other mount (the task folder)."""
    nest = spec["nest"]
    to_nest_r, to_nest_w = os.pipe()
    from_nest_r, from_nest_w = os.pipe()
    if os.fork() == 0:
        try:
            os.dup2(to_nest_r, 0)
            os.dup2(from_nest_w, 1)
            for fd in (to_nest_r, to_nest_w, from_nest_r, from_nest_w):
                os.close(fd)
            uid, gid = _enter_namespaces(libc, spec, nest["tmpfs"])
            _finish(libc, spec, nest["argv"], nest["env"], "/tmp", uid, gid, drop=True)
        except BaseException as exc:
            os.write(2, f"nested program: {type(exc).__name__}: {exc}\n".encode()[:2000])
        os._exit(125)
    os.close(to_nest_r)
    os.close(from_nest_w)
    uid, gid = _enter_namespaces(libc, spec, [])
    for target in nest["nosymfollow"]:  # this side's view of the shared folder only
        _mount(libc, None, target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOSYMFOLLOW, None)
    os.set_inheritable(to_nest_w, True)
    os.set_inheritable(from_nest_r, True)
    return {"ARLKIT_NEST_FDS": f"{to_nest_w},{from_nest_r}"}, uid, gid


def _finish(libc: ctypes.CDLL, spec: dict[str, Any], argv: list[str], env: dict[str, str], workdir: str,
            uid: int | None, gid: int | None, drop: bool) -> None:
    """Limits, privileges (``drop``: empty the capability sets; with ``uid``, become it), seccomp,
    then execute ``argv`` (steps 3 to 6)."""
    for name, (soft, hard) in spec["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if drop:
        _drop_privileges(libc, uid, gid)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if spec["pdeathsig"]:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if spec["seccomp"]:
        _install_seccomp(libc, spec["seccomp"])
    os.chdir(workdir)
    os.execve(argv[0], argv, env)


def main() -> None:
    spec = marshal.loads(bytes.fromhex(sys.argv[1]))
    status_fd = int(sys.argv[2])
    os.set_inheritable(status_fd, False)
    step = "start"
    try:
        os.umask(0o022)
        libc = _libc()
        uid, gid = spec["uid"], spec["gid"]
        if spec["root"]:
            step = "root"
            _build_root(libc, spec)
        if spec["mounts"]:
            step = "mounts"
            _remount_inodes(libc, spec["mounts"])
        workdir = spec["workdir"]
        if spec["copy_from"]:
            step = "workdir"
            os.mkdir(workdir, 0o700)
            _copy_tree(spec["copy_from"], workdir, uid, gid)
            if uid is not None:
                os.chown(workdir, uid, gid)
        if spec["loopback"]:
            step = "loopback"
            _loopback_up()
        if spec["fork_init"] and _stay_as_init():
            return
        env, drop = spec["env"], uid is not None
        if spec["nest"]:
            step = "nested program"
            more, uid, gid = _split(libc, spec)
            env, drop = {**env, **more}, True
        step = "limits, privileges, seccomp and exec"
        _finish(libc, spec, spec["argv"], env, workdir, uid, gid, drop=drop)
    except BaseException as exc:  # report every setup failure to the parent, then stop
        try:
            os.write(status_fd, f"{step}: {type(exc).__name__}: {exc}".encode()[:2000])
        finally:
            os._exit(125)


main()
