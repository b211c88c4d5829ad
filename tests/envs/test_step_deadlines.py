"""Steps that would run without bound (math-tir's scorer on a huge binomial, a BFCL call that builds a
power of ten with a billion digits) end by their deadline as a failed step, while the other
trajectories of the same ``arlkit eval`` finish.

The eval runs in a child process, its policy a scripted loopback server in this one: a step that
hangs in C holds the interpreter lock of the whole process it runs in, so only a process outside it
can notice and report the hang.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from arlkit.envs import make
from arlkit.policies.loopback import ScriptedServer


def _eval(run_child, out: Path, env: str, env_args: list[str], tasks: int,  # type: ignore[no-untyped-def]
          reply: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """``arlkit eval`` of the first ``tasks`` tasks, one sample each at the full budget, its policy
    answering with ``reply(request body)``; the trajectories by task id."""
    with ScriptedServer(reply) as server:
        command = [sys.executable, "-m", "arlkit", "eval", "--env", env, "--policy",
                   f"openai:scripted@{server.base_url}", "--tasks", str(tasks), "--samples", "1", "--budgets", "full",
                   "--out", str(out)]
        for arg in env_args:
            command += ["--env-arg", arg]
        done = run_child(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = (out / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    return {t["task_id"]: t for t in map(json.loads, lines)}


def _said(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


def test_a_math_answer_whose_check_runs_away_is_not_correct_and_the_others_finish(  # type: ignore[no-untyped-def]
        tmp_path: Path, run_child) -> None:
    pytest.importorskip("math_verify", reason="math-tir's shipped problems need the math extra")
    problems = [t.payload for t in make("math-tir", task_set="shipped").tasks("test", 6)]
    hostile = {problems[0]["question"]: "\\binom{10000000}{5000000}", problems[1]["question"]: "\\Gamma(10000000)"}
    answers = {p["question"]: hostile.get(p["question"], p["answer"]) for p in problems}

    def reply(body: dict[str, Any]) -> str:
        question = next(q for q in answers if q in _said(body))
        return f"<action>\\boxed{{{answers[question]}}}</action>"

    got = _eval(run_child, tmp_path / "ev", "math-tir", ["task_set=shipped", "score_timeout_s=1"], 6, reply)
    assert len(got) == 6
    for t in got.values():
        if t["initial_observation"].removeprefix("PROBLEM: ") in hostile:
            assert not t["success"] and len(t["turns"]) == 1 and "is not correct" in t["turns"][0]["observation"]
        else:
            assert t["success"], t["turns"]


def test_a_bfcl_call_that_runs_away_is_stopped_and_the_others_finish(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("bfcl_eval", reason="the bfcl extra is not installed")
    entries = make("bfcl").entries[:16]  # the eval that wrote no trajectory in 150 s
    hostile = {e.entry_id for e in entries if "MathAPI" in e.classes}
    assert len(hostile) == 1 and len({e.turns[0] for e in entries}) == 16
    scripts = {}
    for e in entries:
        first = ["round_number(number=1, decimal_places=-1000000000)"] if e.entry_id in hostile else []
        scripts[e.turns[0]] = first + _in_turn_order(e.ground_truth)

    def reply(body: dict[str, Any]) -> str:
        script = next(s for text, s in scripts.items() if text and text in _said(body))
        done = sum(m["role"] == "assistant" for m in body["messages"])
        return f"<action>{script[min(done, len(script) - 1)]}</action>"

    got = _eval(run_child, tmp_path / "ev", "bfcl", ["call_timeout_s=1"], 16, reply)
    assert len(got) == 16
    for task_id, t in got.items():
        if task_id in hostile:
            assert "arlkit stopped round_number(): it ran past its 1 s deadline" in t["turns"][0]["observation"]
        else:
            assert t["success"], [turn["observation"] for turn in t["turns"]]


def _in_turn_order(ground_truth: Any) -> list[str]:
    """One action per ground-truth call, the last call of each turn with ``finish_turn()`` (a turn
    without calls: ``finish_turn()`` alone)."""
    out = []
    for calls in ground_truth:
        out += [*calls[:-1], f"{calls[-1]}; finish_turn()"] if calls else ["finish_turn()"]
    return out
