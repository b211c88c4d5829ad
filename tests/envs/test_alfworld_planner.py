"""The ALFWorld planner's limits: a search past its time or memory limit ends in its own process and
is reported (the oracle is unknown there, the game is named in ``summary.md``), while the other games
and trajectories go on. Each wait below has a deadline of its own, so a search that is not bounded
fails the test instead of blocking it."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("alfworld")

from arlkit.envs import make  # noqa: E402
from arlkit.envs.alfworld import AlfworldConfig, planner  # noqa: E402
from arlkit.envs.alfworld.games import GeneratedGame, game_document, load_shipped  # noqa: E402
from arlkit.envs.alfworld.planner import PlannerLimit  # noqa: E402
from arlkit.envs.protocol import Task  # noqa: E402
from arlkit.policies import make_policy  # noqa: E402
from arlkit.rollout import make_jobs, run_rollouts  # noqa: E402

WAIT_S = 240.0  # generous: every wait below ends within seconds when the limits work
HARD = 7  # shipped test game 7 (a heat task): its search from the start needs 256-512 MB; games 0, 4, 6 a few MB


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``'s result or the exception it raised; the test fails when it has not ended in time."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        pytest.fail(f"still running after {seconds:g} s: the limit did not end it")
    return outcome[0]


def _forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the children the planner forks from now on."""
    pids: list[int] = []
    fork = os.fork

    def recording() -> int:
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recording)
    return pids


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_search_past_its_time_limit_is_killed_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    pids = _forks(monkeypatch)
    monkeypatch.setattr(planner, "_replan", lambda lib: time.sleep(600))  # a search that never ends
    outcome = _within(WAIT_S, lambda: planner.search(None, threading.Lock(), timeout_s=0.5, memory_mb=64))
    assert isinstance(outcome, PlannerLimit) and str(outcome) == "the planner ran past its 0.5 s time limit"
    assert len(pids) == 1 and _gone(pids[0])  # killed and reaped


def test_a_search_past_its_memory_limit_ends_and_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "_replan", lambda lib: [str(len(bytearray(1 << 30)))])  # 1 GiB at once
    outcome = _within(WAIT_S, lambda: planner.search(None, threading.Lock(), timeout_s=60, memory_mb=64))
    assert isinstance(outcome, PlannerLimit) and str(outcome) == "the planner ran out of its 64 MB memory limit"
    for answer in (["go to a", "take b"], [], None):  # a plan, an empty one, no plan: back as they were
        monkeypatch.setattr(planner, "_replan", lambda lib, answer=answer: answer)
        assert planner.search(None, threading.Lock(), timeout_s=60, memory_mb=64) == answer


def _without_walkthrough(task: Task) -> Task:
    """The same game with no walkthrough to trust: the oracle asks the planner from the start."""
    game = {**task.payload["game"], "walkthrough": []}
    return Task(task.task_id + "-planned", {"game": game})


def test_the_oracle_is_unknown_where_the_planner_hangs_and_other_games_play_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "_replan", lambda lib: time.sleep(600))  # every search hangs
    tasks = make("alfworld").tasks("test", 2)
    known, stuck = tasks[0], _without_walkthrough(tasks[1])  # the first plays its walkthrough: no search
    env = make("alfworld", planner_timeout_s=1)
    env.reset(stuck, 0)
    assert _within(WAIT_S, lambda: (env.optimal_actions(50), env.action_values(50), env.shortest_solution_length())) \
        == ([], {}, None)  # fmt: skip
    probability = env.success_probability(50)  # the same state: answered from the record, no second wait
    assert probability != probability  # NaN: unknown
    assert env.step(env.admissible_actions()[0]).valid  # the game itself plays on

    def play(policy: str) -> list[Any]:
        return run_rollouts(lambda: make("alfworld", planner_timeout_s=1), make_jobs([known, stuck], 1, 50, seed=0),
                            make_policy(policy))  # fmt: skip

    oracle = _within(WAIT_S, lambda: play("oracle"))
    assert oracle[0].success and oracle[0].ended_by == "success"
    assert oracle[1].ended_by == "policy_error" and "oracle is unavailable" in str(oracle[1].error)
    random = _within(WAIT_S, lambda: play("random"))
    assert all(t.ended_by in ("success", "budget") and t.error is None for t in random)  # no search: both play on
    notes = env.summary_notes([known, stuck])
    assert len(notes) == 2 and "1 alfworld game" in notes[0]
    assert notes[1] == f"  - `{stuck.task_id}`: the planner ran past its 1 s time limit"
    assert make("alfworld").summary_notes([stuck]) == []  # recorded for the limits it ran out of


def _real_layout(root: Path, games: Sequence[GeneratedGame]) -> Path:
    """``games`` written as an ALFWorld download (``json_2.1.1/valid_seen/<task>/<trial>/``)."""
    tables = load_shipped().tables
    for i, game in enumerate(games):
        trial = root / "json_2.1.1" / "valid_seen" / f"{game.task_type}-Game-None-Place-{i}" / f"trial_{i}"
        trial.mkdir(parents=True)
        (trial / "game.tw-pddl").write_text(json.dumps(game_document(game, tables)), encoding="utf-8")
        (trial / "traj_data.json").write_text(json.dumps({"task_type": game.task_type}), encoding="utf-8")
    return root


def test_an_eval_names_the_game_its_planner_cannot_plan_and_finishes_the_others(  # type: ignore[no-untyped-def]
        tmp_path: Path, run_child) -> None:
    shipped = load_shipped().splits["test"]
    games = [shipped[i] for i in (0, 4, 6, HARD)]
    assert all("movable" not in g.task_type for g in games)  # ALFWorld skips those folders
    data = _real_layout(tmp_path / "data", games)  # a download's games have no walkthrough to trust: all plan
    out = tmp_path / "ev"
    command = [sys.executable, "-m", "arlkit", "eval", "--env", "alfworld", "--env-arg", f"data_dir={data}",
               "--env-arg", "planner_memory_mb=64", "--policy", "oracle", "--policy", "random", "--tasks", "4",
               "--samples", "1", "--budgets", "10", "--out", str(out)]  # fmt: skip
    done = run_child(command, capture_output=True, text=True)
    assert done.returncode == 1 and "1 trajectories ended by policy errors" in done.stderr, done.stderr[-2000:]
    tasks = make("alfworld", data_dir=str(data)).tasks("test", 4)
    hard = next(t.task_id for t in tasks if "-Place-3/" in t.payload["game_file"])
    finished = [json.loads(line) for line in (out / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()]
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted((t["policy"], t["task_id"] == hard) for t in finished) == \
        [("oracle", False)] * 3 + [("random", False)] * 3 + [("random", True)]  # fmt: skip
    assert all(t["success"] for t in finished if t["policy"] == "oracle")  # within 10 turns: their plans take 5-6
    assert [(t["policy"], t["task_id"]) for t in errors] == [("oracle", hard)]
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "oracle unavailable for 1 alfworld game" in summary
    assert f"- `{games[3].task_type}-Game-None-Place-3/trial_3`: the planner stopped (SIGABRT)" in summary
    assert "64 MB memory limit" in summary


def test_the_limits_are_checked() -> None:
    for bad in ({"planner_timeout_s": 0}, {"planner_memory_mb": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            make("alfworld", **bad)
    assert AlfworldConfig().planner_timeout_s == planner.DEFAULT_TIMEOUT_S > 60  # a normal game's search: under 20 s
