"""Calls with a deadline (:class:`arlkit.sandbox.deadline.DeadlinePool`): a call that holds the
interpreter lock in C is stopped at its deadline, a call that raises, allocates without bound or
kills its worker fails with a message, and the pool goes on serving after each."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from arlkit.sandbox.deadline import CallFailed, CallTimedOut, DeadlinePool

from .conftest import wait_until

MARGIN_S = 30.0  # generous: a stopped call ends at its deadline plus a kill; machines are shared


@pytest.fixture
def pool() -> Iterator[DeadlinePool]:
    workers = DeadlinePool(max_workers=2, memory_mb=256)
    yield workers
    workers.close()


def test_calls_run_in_a_worker_and_a_runaway_is_stopped_at_its_deadline(pool: DeadlinePool) -> None:
    assert pool.call(pow, 2, 10, timeout_s=30) == 1024
    assert pool.call(os.getpid, timeout_s=30) != os.getpid()
    start = time.monotonic()
    with pytest.raises(CallTimedOut, match="ran past its 0.5 s deadline"):
        pool.call(pow, 10, 10**10, timeout_s=0.5)  # C code holding the interpreter lock: no signal stops it
    assert time.monotonic() - start < 0.5 + MARGIN_S
    assert pool.call(pow, 3, 3, timeout_s=30) == 27  # a fresh worker took the killed one's place


def test_raising_allocating_and_dying_calls_fail_with_a_message(pool: DeadlinePool) -> None:
    with pytest.raises(CallFailed, match="ValueError: invalid literal"):
        pool.call(int, "seven", timeout_s=30)
    with pytest.raises(CallFailed, match="MemoryError"):
        pool.call(bytearray, 2**40, timeout_s=30)  # 1 TiB, beyond the worker's 256 MiB
    with pytest.raises(CallFailed, match=r"worker process died \(exit code 3\)"):
        pool.call(os._exit, 3, timeout_s=30)
    assert pool.call(len, "four", timeout_s=30) == 4


def test_a_stuck_call_does_not_hold_up_a_call_on_another_worker(pool: DeadlinePool) -> None:
    stuck: list[BaseException] = []

    def run_away() -> None:
        try:
            pool.call(pow, 10, 10**10, timeout_s=60)
        except CallFailed as exc:
            stuck.append(exc)

    runner = threading.Thread(target=run_away, daemon=True)
    runner.start()
    assert wait_until(lambda: pool.busy == 1, MARGIN_S)  # the runaway call is in its worker
    start = time.monotonic()
    assert pool.call(sum, [1, 2, 3], timeout_s=30) == 6
    assert time.monotonic() - start < MARGIN_S < 60  # done long before the other call's deadline
    pool.close()  # kills the stuck worker too
    runner.join(MARGIN_S)
    assert not runner.is_alive() and isinstance(stuck[0], CallFailed)
