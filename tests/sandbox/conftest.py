"""Fixtures for the sandbox tests: the levels this machine offers, and a leak counter."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from arlkit.sandbox import ISOLATION_LEVELS, Sandbox, SandboxConfig, SandboxResult, available_levels
from arlkit.sandbox.slots import pids_of_uid

# A uid range of this test process alone, so that sandboxes run by other processes on a shared
# machine never show up in (or disturb) the leak counts.
UID_BASE = 1_800_000_000 + (os.getpid() % 10_000) * 32
UID_SLOTS = 16

AVAILABLE = available_levels(SandboxConfig(uid_base=UID_BASE, uid_slots=UID_SLOTS))
WORKING_LEVELS = [lv for lv in ISOLATION_LEVELS if AVAILABLE[lv] is None]
NAMESPACED_LEVELS = [lv for lv in WORKING_LEVELS if lv != "none"]


def config(level: str, **overrides: object) -> SandboxConfig:
    """A test config at ``level`` with short limits and this process's uid range."""
    values: dict[str, object] = dict(
        isolation=level, min_isolation="none", wall_time_s=2.0, cpu_time_s=2, memory_mb=256,
        uid_base=UID_BASE, uid_slots=UID_SLOTS, max_output_bytes=100_000,
    )
    values.update(overrides)
    return SandboxConfig(**values)  # type: ignore[arg-type]


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found.add(child)
                frontier.append(child)
    return found


@dataclass(frozen=True)
class Footprint:
    """What a run could leak: our descendants, processes of our uids, our fds, our temp folders."""

    children: frozenset[int]
    slot_processes: frozenset[int]
    fds: int
    temp_entries: frozenset[str]


def footprint(tmp_root: str) -> Footprint:
    slots = set()
    for uid in range(UID_BASE, UID_BASE + UID_SLOTS):
        slots.update(pids_of_uid(uid))
    return Footprint(
        children=frozenset(_descendants(os.getpid())),
        slot_processes=frozenset(slots),
        fds=len(os.listdir("/proc/self/fd")),
        temp_entries=frozenset(n for n in os.listdir(tmp_root) if n.startswith("arlkit-")),
    )


def _fd_targets() -> dict[int, str]:
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
    return out


LEAK_DEADLINE_S = 60.0
"""How long the footprint may take to return to its state before a run. A killed sandbox's processes
can take seconds to exit on a loaded machine (tearing down a tmpfs of 65,536 files, say), and other
threads of the test process may hold a descriptor for a moment: the check waits for the footprint
to come back, and only one that stays different this long is a leak."""


POLL_S = 0.05
"""How often :func:`wait_until` looks again. Process exits and starts of other users' processes
have no event a test can block on (no pidfd for a process we did not start), so the tests poll."""


def wait_until(condition: Callable[[], object], deadline_s: float) -> bool:
    """Whether ``condition()`` became true within ``deadline_s`` (a generous bound for the event, not
    a timing: it returns as soon as the condition holds)."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def assert_no_leak(before: Footprint, tmp_root: str) -> None:
    """Wait until the footprint equals ``before``; fail if it still differs after ``LEAK_DEADLINE_S``."""
    fd_before = _fd_targets()
    if not wait_until(lambda: footprint(tmp_root) == before, LEAK_DEADLINE_S):
        after = footprint(tmp_root)
        raise AssertionError(f"leaked: before {before}, after {after}; fds now {_fd_targets()} (at first check {fd_before})")


class Helpers:
    """What the tests need from here, as a fixture (constants and plain functions are imported from this module)."""

    available = AVAILABLE
    working_levels = WORKING_LEVELS
    uid_base = UID_BASE
    uid_slots = UID_SLOTS
    config = staticmethod(config)
    footprint = staticmethod(footprint)
    assert_no_leak = staticmethod(assert_no_leak)


@pytest.fixture()
def sbx() -> type[Helpers]:
    return Helpers


@pytest.fixture(params=WORKING_LEVELS)
def level(request: pytest.FixtureRequest) -> str:
    """Every isolation level that works on this machine."""
    return str(request.param)


@pytest.fixture()
def private_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Route the sandbox's run folders to a folder of this test alone (so counts are exact)."""
    tmp_path_factory.getbasetemp()  # settle pytest's own temp root first, outside the patched one
    root = tempfile.mkdtemp(prefix="arlkit-test-tmp-")
    monkeypatch.setattr(tempfile, "tempdir", root)
    yield root
    left = [name for name in os.listdir(root) if name.startswith("arlkit-")]
    shutil.rmtree(root, ignore_errors=True)
    assert not left, f"left behind in the temp folder: {left}"


RunContained = Callable[..., SandboxResult]
SECRET = "arlkit-fake-secret-7f3a9c"
"""Set in the parent's environment during every sandbox test: no program may ever print it."""
SLACK = 15.0
"""Seconds past a run's wall clock within which it must have returned: killing a process that holds
hundreds of MiB (or a fork bomb's hundreds) and waiting for it takes a moment on a loaded machine;
a program that escaped the wall clock would run forever."""


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARLKIT_FAKE_SECRET", SECRET)


@pytest.fixture()
def run_contained(sbx, private_tmp):  # type: ignore[no-untyped-def]
    """Run a program and check the invariants every hostile run must keep."""

    def run(level: str, source: str, **overrides: object) -> SandboxResult:
        sandbox = Sandbox(sbx.config(level, **overrides))
        before = sbx.footprint(private_tmp)
        start = time.monotonic()
        result = sandbox.run_python(source)
        elapsed = time.monotonic() - start
        assert elapsed < sandbox.config.wall_time_s + SLACK, f"took {elapsed:.1f} s"
        assert result.isolation == level
        sbx.assert_no_leak(before, private_tmp)
        assert SECRET not in result.stdout and SECRET not in result.stderr
        return result

    return run


def needs_namespace(level: str, why: str) -> None:
    """Skip at level ``none``, saying why it cannot contain this case."""
    if level == "none":
        pytest.skip(f"level none cannot contain this ({why}); levels here: {available_levels()}")
