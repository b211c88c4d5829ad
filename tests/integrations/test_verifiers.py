"""verifiers (v1), both ways: a multi-turn verifiers environment (``vf_guess.py``) and a tool-use
taskset (``vf_calc.py``) under ``arlkit eval --env verifiers``; arlkit's FrozenLake as a verifiers
environment run by verifiers' own eval runner against a scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import csv
import importlib
import json
import os
import re
import subprocess
import sys
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import verifiers.v1 as vf

from arlkit.config import ConfigError
from arlkit.envs.bridge import TRUNCATED_NOTE
from arlkit.extras import install_hint
from arlkit.integrations.verifiers.env import VerifiersConfig, VerifiersEnv, from_verifiers

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # vf_guess and vf_calc are verifiers taskset ids: top-level modules


def _arlkit(*args: str, log: Path | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    if log is not None:
        env["VF_GUESS_LOG"] = str(log)
    return subprocess.Popen([sys.executable, "-m", "arlkit", "eval", "--env", "verifiers", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(finish_child, proc: subprocess.Popen) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    _, err = finish_child(proc)
    return proc.returncode, err


def test_arlkit_eval_on_a_verifiers_env_and_the_bridge_errors(tmp_path: Path, finish_child) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "lifecycle.log"
    out = tmp_path / "guess"
    runs = {"eval": _arlkit("--env-arg", "id=vf_guess", "--policy", "vf_guess:bisect", "--policy", "vf_guess:bisect:1",
                            "--tasks", "4", "--samples", "2", "--budgets", "2,6", "--out", str(out), log=log)}
    runs["typo"] = _arlkit("--env-arg", "id=vf_gues", "--policy", "vf_guess:bisect", "--out", str(tmp_path / "typo"))
    results = {name: _finish(finish_child, proc) for name, proc in runs.items()}

    code, err = results["typo"]
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("arlkit eval: error: cannot load the verifiers environment 'vf_gues': "
                               "ModuleNotFoundError")

    code, err = results["eval"]
    assert code == 0 and "Traceback" not in err, err[-2000:]
    rows = list(csv.DictReader(open(out / "passkt.csv")))
    passes = {(r["policy"], r["T"], r["k"]): float(r["pass"]) for r in rows}
    assert passes[("vf_guess:bisect", "6", "1")] == 1.0  # bisection finds 1..16 in 5 guesses
    assert passes[("vf_guess:bisect", "2", "1")] < 1.0
    assert passes[("vf_guess:bisect:1", "6", "2")] == 0.0  # never 1: every game hits max_turns
    trajectories = [json.loads(line) for line in open(out / "trajectories.jsonl")]
    assert len(trajectories) == 4 * 2 * 2 * 2
    for t in trajectories:
        last = t["turns"][-1]
        if t["success"]:
            assert t["policy"] == "vf_guess:bisect" and last["reward"] == 1.0 and len(t["turns"]) <= t["budget"]
        else:  # ended by the seat's max_turns (the announced budget): truncated, the partial reward kept
            assert len(t["turns"]) == t["budget"] and t["ended_by"] == "terminal"
            assert TRUNCATED_NOTE in last["observation"] and 0 < last["reward"] < 1.0
    assert t["turns"][0]["remaining"] == t["budget"]
    events = log.read_text().split()
    assert events.count("start") == events.count("stop") == len(trajectories)  # close() on every env


def test_the_engine_closes_every_env_it_makes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from arlkit.config import load_config
    from arlkit.recipes.eval import EvalConfig, run_eval

    made, closes = [], []
    init, close = VerifiersEnv.__init__, VerifiersEnv.close
    monkeypatch.setattr(VerifiersEnv, "__init__", lambda self, *a, **k: (made.append(1), init(self, *a, **k))[1])
    monkeypatch.setattr(VerifiersEnv, "close", lambda self: (closes.append(self.closed), close(self)))
    monkeypatch.setenv("VF_GUESS_LOG", str(tmp_path / "lifecycle.log"))
    config = load_config(EvalConfig, None, {"env": {"name": "verifiers", "args": {"id": "vf_guess"}},
                                            "policies": ["vf_guess:bisect"], "tasks": 3, "samples": 2,
                                            "budgets": [2, "full"], "bootstrap": 100})
    run_eval(config, tmp_path / "run")
    n = 3 * 2 * 2  # trajectories: each starts the verifiers env once
    assert len(made) >= n and closes == [False] * len(made)  # the engine's close() on every env it made, once
    events = (tmp_path / "lifecycle.log").read_text().split()
    assert events.count("start") == events.count("stop") == n


def test_success_needs_the_threshold_and_the_envs_own_end() -> None:
    env = from_verifiers("vf_guess", success_threshold=1.5)
    task = env.tasks("test", 1)[0]  # secret 4
    env.set_budget(None)
    assert env.reset(task, 0) == "The number is between 1 and 16."
    assert env.t_max == 6 and env.prompt_text().instruction.startswith("Guess the secret integer")
    assert env.step("8").observation == "lower"
    result = env.step("4")
    assert result.done and result.reward == 1.0 and not result.success  # below the threshold
    env.close()

    env = from_verifiers("vf_guess", action_text="action")
    env.reset(task, 0)
    assert env.parse_action("4").action is None and env.parse_action("<action>4</action>").action == "4"
    result = env.step("4")
    assert result.success and result.reward == 1.0
    env.close()
    assert env.closed


def test_a_raising_environment_is_an_invalid_step_and_typos_are_one_line() -> None:
    env = from_verifiers("vf_guess", args='{"fail_on": 8}')
    env.reset(env.tasks("test", 1)[0], 0)
    result = env.step("8")
    assert not result.valid and result.done and not result.success
    assert result.observation == "Invalid action: the environment raised RuntimeError: the game cannot take 8."
    assert env.step("4") == env.step("4") and not env.step("4").valid  # over
    env.close()
    with pytest.raises(ValueError, match=r"valid choices: reply, action"):
        VerifiersConfig(id="vf_guess", action_text="whole")
    with pytest.raises(ValueError, match=r"args must be a JSON object"):
        VerifiersConfig(id="vf_guess", args="[1]")
    with pytest.raises(ValueError, match=r"^unknown role 'judge'; valid choices: player$"):
        from_verifiers("vf_guess", role="judge")
    with pytest.raises(ValueError, match=r"^cannot load the verifiers environment 'vf_guess': ValidationError: .*hihg"):
        from_verifiers("vf_guess", args='{"hihg": 3}')
    with pytest.raises(ValueError, match=r"no train split"):
        from_verifiers("vf_guess").tasks("train", 2)
    assert [t.payload["position"] for t in from_verifiers("vf_guess", train_start=5).tasks("train", 3)] == [5, 6, 7]


def test_missing_verifiers_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "verifiers.v1", None)
    message = "the verifiers adapter needs verifiers: " + re.escape(install_hint("verifiers", make_target="install-extras"))
    with pytest.raises(ConfigError, match=message):
        VerifiersEnv(VerifiersConfig(id="vf_guess"))
    monkeypatch.delitem(sys.modules, "arlkit.integrations.verifiers.export", raising=False)
    with pytest.raises(ImportError, match=message):
        importlib.import_module("arlkit.integrations.verifiers.export")


def test_tool_calls_run_the_tasks_own_tools() -> None:
    env = from_verifiers("vf_calc", t_max=3)
    assert env.t_max == 3
    task = env.tasks("test", 2)[1]  # 137 * 34
    env.set_budget(2)
    assert env.reset(task, 0) == "What is 137 times 34?"
    assert "calculator_multiply(a: int, b: int): Multiply two integers." in env.prompt_text().action_format
    call = '<action><tool_call>{"name": "calculator_multiply", "arguments": {"a": 137, "b": 34}}</tool_call></action>'
    step = env.step(call)
    assert step.valid and not step.done and step.observation == "Tool result (calculator_multiply): 4658"
    final = env.step("<action>4658</action>")
    assert final.done and final.success and final.reward == 1.0
    env.set_budget(1)
    env.reset(task, 0)
    bad = env.step('<tool_call>{"name": "divide", "arguments": {}}</tool_call>')
    assert bad.done and not bad.success and TRUNCATED_NOTE in bad.observation  # max_turns, tool result unanswered
    env.set_budget(3)
    env.reset(task, 0)
    assert env.step(call).observation == "Tool result (calculator_multiply): 4658"
    stopped = env.step(call)  # the task's @vf.stop fires before the next model call: its own end, no truncation
    assert stopped.done and not stopped.success
    assert stopped.observation == "The environment ended the episode (reward 0)."
    env.close()


# -- arlkit -> verifiers ------------------------------------------------------------------------

MOVES = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}


def _shortest_move(text: str) -> str:
    rows = [line for line in text.splitlines() if line and set(line) <= set("P_OG")]
    start = next((r, c) for r, line in enumerate(rows) for c, ch in enumerate(line) if ch == "P")
    seen: dict[tuple[int, int], Any] = {start: None}
    todo = deque([start])
    while todo:
        cell = todo.popleft()
        if rows[cell[0]][cell[1]] == "G":
            while seen[cell][0] != start:
                cell = seen[cell][0]
            return seen[cell][1]
        for name, (dr, dc) in MOVES.items():
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < len(rows) and 0 <= c < len(rows[r]) and rows[r][c] != "O" and (r, c) not in seen:
                seen[(r, c)] = (cell, name)
                todo.append((r, c))
    return "Down"


class _ScriptedChat(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions`` (not streamed): a shortest-path FrozenLake move."""

    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _ScriptedChat.bodies.append(body)
        move = _shortest_move(body["messages"][-1]["content"])
        data = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                           "choices": [{"index": 0, "finish_reason": "stop", "message": {
                               "role": "assistant", "content": f"<think>path</think><action>{move}</action>"}}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # verifiers sends every rollout's call at once; the default backlog (5) refuses some
    daemon_threads = True


def test_arlkit_env_run_by_verifiers_own_eval_runner(tmp_path: Path) -> None:
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    server = _Server(("127.0.0.1", 0), _ScriptedChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = EvalConfig.model_validate({
            "env": {"taskset": {"id": "arlkit-verifiers", "env_name": "frozenlake", "n_tasks": 3,
                                "env_args": {"size": 3, "slippery": False}, "budgets": [1, 6]}},
            "model": "scripted-bfs", "client": {"base_url": f"http://127.0.0.1:{server.server_address[1]}/v1",
                                                "api_key_var": "ARLKIT_TEST_NO_KEY"},
            "num_rollouts": 2, "rich": None, "push": False, "output_dir": str(tmp_path)})
        episodes = asyncio.run(run_eval(config))
    finally:
        server.shutdown()
    assert len(episodes) == 3 * 2 * 2 and all(e.ok for e in episodes)
    turns = 0
    for episode in episodes:
        (trace,) = episode.traces
        budget = episode.task.data.budget
        assert trace.messages[0].content.count(f"Turn budget: {budget} turns in total") == 1  # arlkit's prompt
        if budget == 1:  # one move never reaches the goal: the budget truncates it
            assert trace.metrics["arlkit_truncated"] == 1.0 and trace.reward == 0.0
        else:
            assert trace.metrics["arlkit_success"] == 1.0 and trace.rewards["arlkit_return"].score == 1.0
        turns += trace.num_turns
    assert len(_ScriptedChat.bodies) == turns  # every model call went through verifiers' client
    with pytest.raises(ValueError, match=r"unknown arlkit env 'frozenlak'; valid choices: .*frozenlake"):
        vf.resolve_env_config({"taskset": {"id": "arlkit-verifiers", "env_name": "frozenlak"}})
