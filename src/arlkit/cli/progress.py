"""A progress reporter for long commands: a rich bar with ETA on a terminal, sparse lines otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress_reporter"]


@contextmanager
def progress_reporter(description: str, detail: Callable[[], str] | None = None) -> Iterator[Callable[[int, int], None]]:
    """Yields ``update(done, total)``; ``detail()`` adds a live line to it (e.g. the engine's
    turns/s and requests in flight)."""
    if sys.stderr.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[detail]}"),
        )
        with Progress(*columns, transient=False) as bar:
            task = bar.add_task(description, total=None, detail="")

            def update(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, detail=detail() if detail else "")

            yield update
        return

    start = time.monotonic()
    last_share = [-1]

    def update_plain(done: int, total: int) -> None:
        share = (100 * done // total) // 25 if total else 4
        if share > last_share[0]:
            last_share[0] = share
            elapsed = time.monotonic() - start
            extra = f", {detail()}" if detail else ""
            print(f"{description}: {done}/{total} ({elapsed:.0f}s{extra})", file=sys.stderr, flush=True)

    yield update_plain
