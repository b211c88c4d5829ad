"""A progress reporter for long commands: a rich bar with ETA on a terminal, plain lines otherwise.

Both are live: the bar's detail (the engine's turns/s, requests in flight) re-renders on its own
refresh, and without a terminal a line comes out when another tenth of the work is done (so always at
the end) or every :data:`PLAIN_EVERY_S` seconds while something moved (a trajectory or a turn
finished) — the same rule as training's progress (``arlkit.train.tracking.progress_bar``). Turns/s
counts finished turns, so a run whose trajectories are long (a local model playing its whole budget)
shows its pace before the first trajectory ends.

With the engine's counters, a policy that keeps playing invalid turns gets one line in the same
stream, once per policy and run: after at least :data:`NOTE_MIN_TURNS` of its turns, when more than
:data:`NOTE_INVALID_SHARE` of them were invalid (``random: 92% of turns invalid so far ...``). Such a
policy rarely ends a trajectory before its budget, so the run takes its longest time.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["NOTE_INVALID_SHARE", "NOTE_MIN_TURNS", "PLAIN_EVERY_S", "PLAIN_EVERY_SHARE", "invalid_notes",
           "progress_reporter"]

PLAIN_EVERY_SHARE = 0.1
"""Without a terminal, a line when another tenth of the work is done ..."""
PLAIN_EVERY_S = 30.0
"""... or when this many seconds passed since the last line and something moved."""
NOTE_MIN_TURNS = 50
"""Turns of a policy before its invalid share is judged."""
NOTE_INVALID_SHARE = 0.8
"""Share of invalid turns above which a policy gets its note."""
_TICK_S = 1.0
"""How often the reporter looks at the counters between updates."""


def invalid_notes(by_policy: dict[str, list[int]], shown: set[str]) -> list[str]:
    """The notes due for ``by_policy`` (``policy -> [turns, invalid turns]``, the engine's counters)
    on policies not in ``shown``; adds those policies to ``shown``."""
    notes = []
    for policy, (turns, invalid) in list(by_policy.items()):
        if policy in shown or turns < NOTE_MIN_TURNS or invalid <= NOTE_INVALID_SHARE * turns:
            continue
        shown.add(policy)
        notes.append(f"{policy}: {100 * invalid // turns}% of turns invalid so far ({invalid} of {turns}); its "
                     "trajectories rarely end before their budget")
    return notes


@contextmanager
def progress_reporter(description: str, detail: Callable[[], str] | None = None, *, stats: Any = None,
                      stream: Any = None, every_s: float = PLAIN_EVERY_S) -> Iterator[Callable[[int, int], None]]:
    """Yields ``update(done, total)``. ``stats``: the engine's live counters
    (:class:`arlkit.rollout.EngineStats`): their line (turns/s, requests in flight) is the detail, their
    turns count as movement, and their per-policy counts give the invalid-turn notes; ``detail()``
    replaces their line. ``stream``: where it goes (default ``sys.stderr``); ``every_s``: the plain
    lines' time step."""
    stream = stream if stream is not None else sys.stderr
    if detail is None and stats is not None:
        detail = stats.line
    shown: set[str] = set()
    stop = threading.Event()

    def notes() -> list[str]:
        return invalid_notes(stats.by_policy, shown) if stats is not None else []

    if stream.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), _live_column(detail))
        with Progress(*columns, console=Console(file=stream), transient=False) as bar:
            task = bar.add_task(description, total=None)

            def update(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            def tick() -> None:
                for note in notes():
                    bar.console.print(note, highlight=False, markup=False)

            with _ticking(tick, stop):
                yield update
        return

    start = time.monotonic()
    lock = threading.Lock()
    state: dict[str, Any] = {"done": 0, "total": None, "tenth": -1, "at": start, "moved": None}

    def movement() -> tuple[int, int]:
        return state["done"], stats.turns if stats is not None else 0

    def emit(now: float) -> None:
        state["at"], state["moved"] = now, movement()
        extra = f", {detail()}" if detail else ""
        print(f"{description}: {state['done']}/{state['total']} ({now - start:.0f}s{extra})", file=stream, flush=True)

    def say_notes() -> None:
        for note in notes():
            print(note, file=stream, flush=True)

    def update_plain(done: int, total: int) -> None:
        with lock:
            state["done"], state["total"] = done, total
            tenth = int(done / total / PLAIN_EVERY_SHARE + 1e-9) if total else 10  # 1e-9: 3/10 is 0.3
            if tenth > state["tenth"]:
                state["tenth"] = tenth
                emit(time.monotonic())
            say_notes()

    def tick_plain() -> None:
        with lock:
            now = time.monotonic()
            if state["total"] is not None and movement() != state["moved"] and now - state["at"] >= every_s:
                emit(now)
            say_notes()

    with _ticking(tick_plain, stop, min(_TICK_S, every_s)):
        yield update_plain


def _live_column(detail: Callable[[], str] | None) -> Any:
    """A rich column showing ``detail()`` at every refresh (not only when ``update`` is called)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class LiveText(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(detail() if detail else "")

    return LiveText()


@contextmanager
def _ticking(tick: Callable[[], None], stop: threading.Event, every: float = _TICK_S) -> Iterator[None]:
    """Run ``tick`` on a daemon thread every ``every`` seconds while the block runs, and once at its end."""

    def loop() -> None:
        while not stop.wait(every):
            tick()

    thread = threading.Thread(target=loop, name="arlkit-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        tick()
