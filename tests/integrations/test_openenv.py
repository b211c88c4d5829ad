"""OpenEnv both ways: arlkit's frozenlake served by OpenEnv's own server and driven by OpenEnv's own
client; ``arlkit eval --env openenv`` against that server with more trajectories than sessions; a
small OpenEnv game (tests/integrations/openenv_game.py) checking the success rule on truncation;
sessions closed (counted on the servers); the bridge's one-line errors."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from openenv.core.generic_client import GenericEnvClient

from arlkit.envs import make
from arlkit.envs.gymnasium import TRUNCATED_NOTE
from arlkit.rollout.engine import EngineConfig, make_jobs, run_rollouts
from arlkit.policies.scripted import RandomPolicy

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _listening() -> socket.socket:
    """A socket bound to a free port and listening: a server started on it accepts from the start, and a
    client that connects before the app is up waits in the backlog (no polling for readiness)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, finish_child) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    """arlkit's frozenlake served at most 2 sessions at once, and the OpenEnv coin game (4), both
    started at once; their output goes to files (a pipe nobody reads would stall them when full)."""
    logs = tmp_path_factory.mktemp("openenv-servers")
    sockets = {"arlkit": _listening(), "game": _listening()}
    fds = {name: sock.fileno() for name, sock in sockets.items()}
    commands = {
        "arlkit": [sys.executable, "-m", "arlkit.integrations.openenv.server", "--env", "frozenlake", "--env-arg",
                   "size=4", "--fd", str(fds["arlkit"]), "--max-sessions", "2"],
        "game": [sys.executable, str(HERE / "openenv_game.py"), str(fds["game"])],
    }
    started = {}
    try:
        for name, command in commands.items():
            with open(logs / f"{name}.log", "w") as log:
                started[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=ENV,
                                                 pass_fds=(fds[name],))
        yield {name: f"http://127.0.0.1:{sock.getsockname()[1]}" for name, sock in sockets.items()}
        assert "Traceback" not in (logs / "arlkit.log").read_text()  # clients that hang up are no errors
    finally:
        for process in started.values():
            process.terminate()
        for process in started.values():
            finish_child(process)
        for sock in sockets.values():
            sock.close()


def _eval(run_child, out: Path, *args: str) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    return run_child([sys.executable, "-m", "arlkit", "eval", "--env", "openenv", "--bootstrap", "100",
                      "--out", str(out), *args], capture_output=True, text=True, env=ENV, cwd=ROOT)


def _trajectories(out: Path) -> list[dict]:
    return [json.loads(line) for line in open(out / "trajectories.jsonl")]


def test_openenvs_own_client_drives_an_arlkit_env_and_the_session_limit(servers: dict[str, str]) -> None:
    url = servers["arlkit"]
    schema = _get(url + "/schema")
    assert schema["action"]["required"] == ["text"] and "admissible_actions" in schema["observation"]["properties"]
    before = _get(url + "/arlkit")
    with GenericEnvClient(base_url=url).sync() as client:
        first = client.reset(seed=0, budget=2)
        observation = first.observation
        assert "Turn budget" in observation["system_prompt"] and observation["budget"] == 2 and not first.done
        assert set(observation["admissible_actions"]) == {"Up", "Down", "Left", "Right"}
        invalid = client.step({"text": "Nowhere"})  # not an action of frozenlake: invalid, a turn spent
        assert invalid.observation["valid"] is False and not invalid.done and invalid.observation["turn"] == 1
        last = client.step({"text": "Nowhere"})  # the budget of 2 is spent: truncated
        assert last.done and last.observation["turn"] == 2
        assert last.observation["truncated"] is True and last.observation["success"] is False
        assert client.state()["task_id"] == observation["task_id"]
        again = client.reset(task=observation["task_id"], seed=5)  # a task of the pool by id; the default budget
        assert again.observation["task_id"] == observation["task_id"] and again.observation["budget"] == before["t_max"]
        with GenericEnvClient(base_url=url).sync() as second:
            second.reset(seed=1)
            third = GenericEnvClient(base_url=url).sync()
            # 2 sessions open: the server refuses a third (its error, or the socket closed before it is read)
            with pytest.raises(Exception, match="CAPACITY_REACHED|received 1000"):
                third.reset(seed=2)
            third.close()
            # arlkit's client asked to hold more sessions than the server allows: a refused session is one
            # line, the trajectory's first observation, and its first step ends it without success
            env = make("openenv", url=url, max_sessions=3, session_wait_s=0.3)
            assert type(env).__name__ == "OpenEnvActionsEnv" and env.max_sessions == 3
            text = env.reset(env.tasks("test", 1)[0], 0)
            assert text.startswith("The environment could not start: the server refused a session")
            assert "max_sessions=2" in text and "\n" not in text
            result = env.step("Up")
            assert result.done and not result.success
            env.close()
    after = _get(url + "/arlkit")
    assert after["active_sessions"] == 0 and after["max_sessions"] == 2 and after["t_max"] == make("frozenlake").t_max
    assert after["sessions_opened"] - before["sessions_opened"] == 2  # the refused ones never opened
    assert after["sessions_refused"] - before["sessions_refused"] >= 2  # the third client, arlkit's env (retried)
    assert after["sessions_closed"] - before["sessions_closed"] == 2


def test_the_engine_keeps_no_more_trajectories_than_the_server_has_sessions(servers: dict[str, str]) -> None:
    url = servers["arlkit"]
    env = make("openenv", url=url)
    assert env.max_sessions == 2 and env.t_max == make("frozenlake").t_max  # both read from the server
    game = make("openenv", url=servers["game"])  # a server that reports neither: OpenEnv's default limit, 1
    assert game.max_sessions == 1 and game.t_max == 50 and type(game).__name__ == "OpenEnvActionsEnv"
    before = _get(url + "/arlkit")
    lock, alive, peak = threading.Lock(), [0], [0]

    def tracked() -> object:  # counts the environments alive at once: made, not yet closed
        made = make("openenv", url=url)
        close = made.close

        def closing() -> None:
            with lock:
                alive[0] -= 0 if getattr(made, "counted_closed", False) else 1
                made.counted_closed = True
            close()

        made.close = closing
        with lock:
            alive[0] += 1
            peak[0] = max(peak[0], alive[0])
        return made

    jobs = make_jobs(env.tasks("test", 3), 3, 3, seed=0)  # 9 trajectories, 2 sessions
    trajectories = run_rollouts(tracked, jobs, RandomPolicy(), engine=EngineConfig(max_active=8))
    assert len(trajectories) == 9 and peak[0] == 2 and alive[0] == 0
    assert not [t for t in trajectories if t.initial_observation.startswith("The environment could not start")]
    after = _get(url + "/arlkit")
    assert after["sessions_opened"] - before["sessions_opened"] == 9 and after["peak_sessions"] <= 2
    assert after["sessions_closed"] - before["sessions_closed"] == 9  # the engine closes every trajectory's env


def test_arlkit_eval_over_openenv_both_ways(  # type: ignore[no-untyped-def]
        servers: dict[str, str], tmp_path: Path, run_child) -> None:
    url = servers["arlkit"]
    before = _get(url + "/arlkit")
    done = _eval(run_child, tmp_path / "fl", "--env-arg", f"url={url}", "--policy", "random", "--tasks", "3",
                 "--samples", "2", "--budgets", "2,4")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "fl" / "passkt.csv")))
    assert {(r["T"], r["k"]) for r in rows} == {("2", "1"), ("2", "2"), ("4", "1"), ("4", "2")}
    assert all(r["env"] == "openenv" and r["n_tasks"] == "3" for r in rows)
    trajectories = _trajectories(tmp_path / "fl")
    assert len(trajectories) == 12 and "could not start" not in done.stderr
    assert all(len(t["turns"]) <= t["budget"] for t in trajectories)
    after = _get(url + "/arlkit")
    assert after["sessions_opened"] - before["sessions_opened"] == 12 and after["peak_sessions"] <= 2
    assert after["sessions_closed"] - before["sessions_closed"] == 12 and after["active_sessions"] == 0


def test_success_needs_the_games_own_end_without_truncation(  # type: ignore[no-untyped-def]
        servers: dict[str, str], tmp_path: Path, run_child) -> None:
    url = servers["game"]
    before = _get(url + "/counts")
    done = _eval(run_child, tmp_path / "coins", "--env-arg", f"url={url}", "--env-arg", "t_max=5",
                 "--env-arg", "max_sessions=4", "--policy", "openenv_game:scripted:greedy",
                 "--policy", "openenv_game:scripted:once", "--tasks", "2", "--samples", "2", "--budgets", "2,5")
    assert done.returncode == 0, done.stderr[-3000:]
    by = {}
    for t in _trajectories(tmp_path / "coins"):
        by.setdefault((t["policy"], t["budget"]), []).append(t)
    assert all(len(group) == 4 for group in by.values()) and len(by) == 4
    for budget in (2, 5):  # two coins at turn 2: the game's own end, success
        assert all(t["success"] and t["return"] == 1.0 for t in by["openenv_game:scripted:greedy", budget])
        assert all(t["initial_observation"].endswith(f"announced budget {budget}")
                   for t in by["openenv_game:scripted:greedy", budget])
    for t in by["openenv_game:scripted:once", 5]:  # the game truncates at turn 3 with a partial reward
        assert not t["success"] and t["return"] == 0.5 and t["ended_by"] == "terminal" and len(t["turns"]) == 3
        assert t["turns"][-1]["observation"].endswith(TRUNCATED_NOTE)
    for t in by["openenv_game:scripted:once", 2]:  # the announced budget ends first
        assert not t["success"] and t["ended_by"] == "budget"
    table = csv.DictReader(open(tmp_path / "coins" / "passkt.csv"))
    rows = {(r["policy"], r["T"], r["k"]): float(r["pass"]) for r in table}
    assert rows["openenv_game:scripted:greedy", "5", "2"] == 1.0 and rows["openenv_game:scripted:once", "5", "2"] == 0.0
    after = _get(url + "/counts")
    assert after["opened"] - before["opened"] == 16 and after["closed"] - before["closed"] == 16


WITHOUT_OPENENV = """
import runpy, sys


class Block:  # as if openenv-core were not installed
    def find_spec(self, name, path=None, target=None):
        if name == "openenv" or name.startswith("openenv."):
            raise ImportError(name)


sys.meta_path.insert(0, Block())
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def test_bad_input_is_one_line_with_exit_code_2(  # type: ignore[no-untyped-def]
        servers: dict[str, str], tmp_path: Path, finish_child) -> None:
    base = ["--policy", "random", "--tasks", "1", "--samples", "1", "--budgets", "2"]
    (tmp_path / "without_openenv.py").write_text(WITHOUT_OPENENV)
    runs = {
        "missing": [sys.executable, str(tmp_path / "without_openenv.py"), "arlkit", "eval", "--env", "openenv",
                    "--env-arg", f"url={servers['arlkit']}", "--out", str(tmp_path / "d"), *base],
        "unreachable": [sys.executable, "-m", "arlkit", "eval", "--env", "openenv", "--env-arg",
                        f"url=http://127.0.0.1:{_free_port()}", "--out", str(tmp_path / "a"), *base],
        "scheme": [sys.executable, "-m", "arlkit", "eval", "--env", "openenv", "--env-arg", "url=localhost:8000",
                   "--out", str(tmp_path / "b"), *base],
        "field": [sys.executable, "-m", "arlkit", "eval", "--env", "openenv", "--env-arg", f"url={servers['game']}",
                  "--env-arg", "action_field=moov", "--out", str(tmp_path / "c"), *base],
        "server": [sys.executable, "-m", "arlkit.integrations.openenv.server", "--env", "frozenlak", "--port",
                   str(_free_port())],
    }
    started = {name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
               for name, cmd in runs.items()}
    outputs = {name: (finish_child(p), p.returncode) for name, p in started.items()}
    expected = {"missing": f"the openenv adapter needs openenv-core: pip install -e '{Path(__file__).resolve().parents[2]}[openenv]'",
                "unreachable": "cannot read the OpenEnv server", "scheme": "must start with one of: http://",
                "field": "has no field 'moov'; valid choices: move", "server": "frozenlak"}
    for name, ((_, stderr), code) in outputs.items():
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert code == 2 and "Traceback" not in stderr, (name, stderr[-2000:])
        assert len(lines) == 1 and expected[name] in lines[0], (name, stderr)
