"""A small classic-BPF seccomp filter that every sandboxed program runs under.

The filter (``seccomp(2)``, ``SECCOMP_MODE_FILTER``; ``docs/sandbox.md`` explains why each call is
refused) is built here as bytes and installed by the launcher right before it executes the
program, after ``no_new_privs``. It refuses, with ``EPERM``:

- ``memfd_create``, ``memfd_secret`` and SysV ``shmget``: anonymous shared memory that no
  per-process limit counts (``RLIMIT_AS`` sees a memfd only while it is mapped, and a SysV
  segment outlives every process that attached it);
- ``unshare`` and ``clone`` with ``CLONE_NEWUSER``: a new user namespace would give the program
  every capability inside it (mount a tmpfs of any size, for one);
- ``userfaultfd``, ``perf_event_open``, ``bpf``, ``io_uring_setup`` and the kernel keyring calls:
  kernel interfaces a sandboxed program has no use for and that are common exploit paths;
- ``ptrace``, ``process_vm_readv`` and ``process_vm_writev``: reading or writing another process's
  memory (a program started by a checker must not rewrite the checker). The third route,
  ``/proc/<pid>/mem``, is closed by the read-only ``/proc`` of the namespaced levels.

``clone3`` fails with ``ENOSYS`` (its flags sit in a struct that a classic filter cannot read), so
the C library falls back to ``clone``, whose flags the filter checks. A system call made with any
other audit architecture than the machine's own (a 32-bit ``int 0x80`` call on x86_64) kills the
process, and on x86_64 the x32 range fails with ``ENOSYS``.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["SUPPORTED_MACHINES", "build_filter", "syscall_number"]

# Audit architecture numbers (linux/audit.h) and system call numbers (the kernel's tables:
# arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h for aarch64).
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NUMBERS = {
    "x86_64": {
        "shmget": 29, "clone": 56, "ptrace": 101, "pivot_root": 155, "add_key": 248, "request_key": 249, "keyctl": 250,
        "unshare": 272, "perf_event_open": 298, "memfd_create": 319, "bpf": 321, "userfaultfd": 323,
        "io_uring_setup": 425, "clone3": 435, "memfd_secret": 447, "process_vm_readv": 310, "process_vm_writev": 311,
    },
    "aarch64": {
        "pivot_root": 41, "unshare": 97, "ptrace": 117, "shmget": 194, "add_key": 217, "request_key": 218, "keyctl": 219,
        "clone": 220, "perf_event_open": 241, "process_vm_readv": 270, "process_vm_writev": 271, "memfd_create": 279, "bpf": 280, "userfaultfd": 282,
        "io_uring_setup": 425, "clone3": 435, "memfd_secret": 447,
    },
}  # fmt: skip
SUPPORTED_MACHINES = tuple(_ARCH)

REFUSED = (
    "memfd_create", "memfd_secret", "shmget", "userfaultfd", "perf_event_open", "bpf", "io_uring_setup",
    "add_key", "request_key", "keyctl", "ptrace", "process_vm_readv", "process_vm_writev",
)  # fmt: skip
"""Calls that always fail with ``EPERM``."""

CLONE_NEWUSER = 0x10000000
_X32_SYSCALL_BIT = 0x40000000

# BPF opcodes (linux/filter.h, linux/bpf_common.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16  # struct seccomp_data; arg0's low word (little-endian)


def syscall_number(name: str, machine: str | None = None) -> int:
    """The number of system call ``name`` on ``machine`` (default: this one)."""
    machine = machine or platform.machine()
    if machine not in _NUMBERS:
        raise ValueError(f"no system call table for {machine!r}; supported: {', '.join(SUPPORTED_MACHINES)}")
    return _NUMBERS[machine][name]


def build_filter(machine: str | None = None) -> bytes:
    """The filter program for ``machine`` (default: this one) as packed ``struct sock_filter``
    records, ready for ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ...)``.

    Raises ``ValueError`` for a machine without a table here (see :data:`SUPPORTED_MACHINES`).
    """
    machine = machine or platform.machine()
    if machine not in _ARCH:
        raise ValueError(f"no seccomp filter for {machine!r}; supported: {', '.join(SUPPORTED_MACHINES)}")
    numbers = _NUMBERS[machine]
    # (opcode, k, jump-if-true label, jump-if-false label); a label is resolved to an offset below.
    code: list[tuple[int, int, str | None, str | None]] = [
        (_LD_W_ABS, _OFF_ARCH, None, None),
        (_JEQ_K, _ARCH[machine], "syscall", "kill"),
    ]
    labels = {"syscall": len(code)}
    code.append((_LD_W_ABS, _OFF_NR, None, None))
    if machine == "x86_64":
        code.append((_JGE_K, _X32_SYSCALL_BIT, "enosys", None))
    for name in REFUSED:
        code.append((_JEQ_K, numbers[name], "eperm", None))
    code.append((_JEQ_K, numbers["clone3"], "enosys", None))
    code.append((_JEQ_K, numbers["clone"], "flags", None))
    code.append((_JEQ_K, numbers["unshare"], "flags", None))
    code.append((_RET_K, _RET_ALLOW, None, None))
    labels["flags"] = len(code)
    code.append((_LD_W_ABS, _OFF_ARG0, None, None))
    code.append((_JSET_K, CLONE_NEWUSER, "eperm", "allow"))
    for label, value in (
        ("eperm", _RET_ERRNO | errno.EPERM),
        ("enosys", _RET_ERRNO | errno.ENOSYS),
        ("allow", _RET_ALLOW),
        ("kill", _RET_KILL_PROCESS),
    ):
        labels[label] = len(code)
        code.append((_RET_K, value, None, None))
    out = bytearray()
    for index, (op, k, true_label, false_label) in enumerate(code):
        jt = labels[true_label] - index - 1 if true_label else 0
        jf = labels[false_label] - index - 1 if false_label else 0
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise AssertionError("seccomp jump out of range")  # the program is far shorter
        out += struct.pack("=HBBI", op, jt, jf, k)
    return bytes(out)
