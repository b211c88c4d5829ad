"""Live progress of ``arlkit eval`` without a terminal (src/arlkit/cli/progress.py): plain lines show the
turns/s of finished turns before any trajectory ends, and a policy whose turns are all invalid gets one
note in the same stream."""

from __future__ import annotations

import io
import re
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from arlkit.cli.progress import invalid_notes, progress_reporter
from arlkit.config import EnvSpec
from arlkit.recipes.eval import EngineStats, EvalConfig, run_eval

PROBE = '''
import threading

from arlkit.policies import Reply

GATE = threading.Event()
"""Held closed, the policy answers its first FREE batches and then waits (the test opens it)."""
FREE = 5
batches = [0]


class Invalid:
    """Replies an action frozenlake does not admit: a trajectory never ends before its budget."""

    name = "invalid"

    def generate(self, requests):
        batches[0] += 1
        if batches[0] > FREE:
            GATE.wait(120)
        return [Reply("<action>fly</action>") for _ in requests]


def make(arg, sampling, backend):
    return Invalid()
'''

WAIT_S = 60.0


class Watched(io.StringIO):
    """A stream that is not a terminal and wakes the test at every write."""

    def __init__(self) -> None:
        super().__init__()
        self.wrote = threading.Condition()

    def write(self, text: str) -> int:
        with self.wrote:
            n = super().write(text)
            self.wrote.notify_all()
        return n

    def wait_for(self, pattern: str) -> re.Match[str] | None:
        with self.wrote:
            self.wrote.wait_for(lambda: re.search(pattern, self.getvalue(), re.MULTILINE), timeout=WAIT_S)
            return re.search(pattern, self.getvalue(), re.MULTILINE)


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "arlkit_progress_probe.py").write_text(textwrap.dedent(PROBE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("arlkit_progress_probe", None)
    import arlkit_progress_probe

    yield arlkit_progress_probe
    arlkit_progress_probe.GATE.set()
    sys.modules.pop("arlkit_progress_probe", None)


def _start(config: EvalConfig, out: Path, stream: Watched) -> tuple[threading.Thread, EngineStats, list]:
    stats, errors = EngineStats(), []

    def run() -> None:
        try:
            with progress_reporter("trajectories", stats=stats, stream=stream, every_s=0.05) as update:
                run_eval(config, out, on_progress=update, stats=stats)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, stats, errors


def test_plain_lines_show_turns_per_s_before_any_trajectory_ends(probe, tmp_path: Path) -> None:
    config = EvalConfig(env=EnvSpec("frozenlake"), policies=("arlkit_progress_probe:make",), tasks=2, samples=2,
                        budgets=("full",), bootstrap=100)
    stream = Watched()
    thread, stats, errors = _start(config, tmp_path / "run", stream)
    live = stream.wait_for(r"^trajectories: 0/4 \(\d+s, (?!0\.0 )(\d+\.\d) turns/s")
    assert live is not None and float(live.group(1)) > 0, stream.getvalue()
    assert stats.done == 0 and stats.turns > 0  # the policy holds every trajectory: none has ended
    probe.GATE.set()
    thread.join(WAIT_S)
    assert not thread.is_alive() and not errors, errors
    assert re.search(r"^trajectories: 4/4 ", stream.getvalue(), re.MULTILINE), stream.getvalue()
    assert stats.turns == 4 * 70 and stats.done == 4


def test_a_policy_with_only_invalid_turns_gets_one_note(probe, tmp_path: Path) -> None:
    probe.GATE.set()
    config = EvalConfig(env=EnvSpec("frozenlake"), policies=("oracle", "arlkit_progress_probe:make"), tasks=2,
                        samples=1, budgets=("full",), bootstrap=100)
    stream = Watched()
    thread, stats, errors = _start(config, tmp_path / "run", stream)
    thread.join(WAIT_S)
    assert not thread.is_alive() and not errors, errors
    notes = [line for line in stream.getvalue().splitlines() if "% of turns invalid" in line]
    assert len(notes) == 1, stream.getvalue()
    assert re.fullmatch(r"arlkit_progress_probe:make: 100% of turns invalid so far \((\d+) of \1\); its "
                        r"trajectories rarely end before their budget", notes[0]), notes
    assert stats.by_policy["oracle"][1] == 0


@pytest.mark.parametrize(("turns", "invalid", "due"), [(49, 49, False), (50, 40, False), (50, 41, True)])
def test_the_note_needs_enough_turns_and_a_share_above_the_threshold(turns: int, invalid: int, due: bool) -> None:
    shown: set[str] = set()
    assert bool(invalid_notes({"p": [turns, invalid]}, shown)) is due
    assert invalid_notes({"p": [turns, invalid]}, shown) == []  # once per policy
