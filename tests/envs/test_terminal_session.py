"""Persistent shell sessions: what carries over between turns, what the check sees of the agent's
side (and what it cannot), and that every process ends with the trajectory, or with the eval."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from arlkit.envs.protocol import Task
from arlkit.envs.terminal import TerminalConfig, TerminalEnv
from arlkit.envs.terminal.checker import CheckStep
from arlkit.envs.terminal.tasks import TerminalTask, load_task
from arlkit.policies.protocol import Reply
from arlkit.rollout import make_jobs, run_rollouts
from arlkit.sandbox import available_levels
from tests.sandbox.conftest import wait_until

pytestmark = pytest.mark.skipif(
    all(available_levels()[lv] is not None for lv in ("unshare", "bwrap")),
    reason="the terminal environment needs a namespaced sandbox level (bwrap, or unshare as root)",
)

# A server started in one turn and asked in a later one (and by the check). The solution's server is
# listening when its command returns (it binds, then forks the process that serves), so one request answers
# at once, however loaded the machine; without a server it is refused at once. The timeout only bounds a
# server that accepts and never answers.
_FETCH = "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8123/ping', timeout=25).read().decode())\""
_SERVE = ("python3 -c \"import functools, http.server, os, sys; "
          "server = http.server.ThreadingHTTPServer(('127.0.0.1', 8123), "
          "functools.partial(http.server.SimpleHTTPRequestHandler, directory='/app/www')); "
          "os.fork() and sys.exit(0); os.setsid(); server.serve_forever()\" < /dev/null > /dev/null 2>&1")
_SERVER_TASK = {
    "task.yaml": "instruction: Serve the text pong at http://127.0.0.1:8123/ping and keep it running.\nsession: persistent\n",
    "solution.sh": f"mkdir -p www && echo pong > www/ping\n{_SERVE}\n",
    "check.yaml": f"- run: {json.dumps(_FETCH)}\n  line: pong\n- run: {json.dumps(_FETCH)}\n  line: pong\n",
}


def _write_task(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture()
def server_task(tmp_path: Path) -> TerminalTask:
    return load_task(_write_task(tmp_path / "serve-ping", _SERVER_TASK))


def _env(task: TerminalTask, **config: object) -> TerminalEnv:
    env = TerminalEnv(TerminalConfig(**config))  # type: ignore[arg-type]
    env.reset(Task(task.task_id, task.to_payload()), 0)
    return env


def _marker_processes(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_a_server_started_in_turn_1_answers_in_turn_3_and_the_check(server_task: TerminalTask) -> None:
    env = _env(server_task, command_timeout_s=60.0)  # the fetch's own timeout bounds it
    try:
        assert "keep it running" in env.prompt_text().instruction or "background" in env.prompt_text().instruction
        for command in server_task.solution:
            assert env.step(command).observation.startswith("Exit code: 0")
        assert "pong" in env.step(_FETCH).observation  # turn 3
        result = env.step("submit")
        assert result.success and result.reward == 1.0, env.last_check.output
    finally:
        env.close()


def test_the_same_turns_without_a_session_lose_the_server(server_task: TerminalTask) -> None:
    env = _env(server_task, session="stateless")
    for command in server_task.solution:
        observation = env.step(command).observation
    assert "processes the command left running were stopped" in observation
    assert not env.step("submit").success
    assert len(env.last_check.steps) == 1  # the server never answered: the check stops at its first step


def test_variables_directory_and_functions_carry_over(server_task: TerminalTask) -> None:
    env = _env(server_task)
    try:
        env.step("export GREETING=hello; greet() { echo \"$GREETING, $1\"; }; mkdir -p a/b && cd a/b")
        observation = env.step("greet world; pwd").observation
        assert "hello, world" in observation and "/app/a/b" in observation
    finally:
        env.close()


def test_a_command_past_its_limit_restarts_the_shell_and_keeps_the_files(server_task: TerminalTask) -> None:
    env = _env(server_task, command_timeout_s=2.0)
    try:
        env.step("export KEPT=yes; echo data > file.txt; mkdir -p sub && cd sub")
        observation = env.step("sleep 30").observation
        assert "limit" in observation and "new shell" in observation
        after = env.step("echo \"[$KEPT]\"; pwd; cat /app/file.txt").observation
        assert "[]" in after and "/app/sub" in after and "data" in after
    finally:
        env.close()


def test_a_command_that_kills_the_session_gets_a_new_one_on_the_same_folder(server_task: TerminalTask) -> None:
    env = _env(server_task)
    try:
        env.step("echo kept > file.txt")
        assert "new session" in env.step("kill -9 -1").observation
        assert "kept" in env.step("cat /app/file.txt").observation
    finally:
        env.close()


def test_nothing_the_agent_leaves_running_reaches_the_check(tmp_path: Path) -> None:
    """A daemon of the agent writes reward 1 wherever it can and lists every process and folder
    it can see; the check's own reward file says 0, and the daemon saw none of the check."""
    spy = ("nohup python3 -c \"import os, time\nwhile True:\n"
           "    for d in ('/logs/verifier', '/tests'):\n        os.makedirs(d, exist_ok=True)\n"
           "    open('/logs/verifier/reward.txt', 'w').write('1')\n"
           "    seen = sorted(os.listdir('/proc')) + os.listdir('/tests') + os.listdir('/tmp')\n"
           "    open('/app/seen.txt', 'a').write(' '.join(seen) + chr(10))\n    time.sleep(0.01)\" > /dev/null 2>&1 &")
    files = {
        "task.yaml": "instruction: Leave a reward of 1.\nsession: persistent\n",
        "solution.sh": "true\n",
        "check.yaml": textwrap.dedent("""\
            - run: |
                echo secret > /tests/hidden.txt; echo 0 > /logs/verifier/reward.txt
                n=$(wc -l < /app/seen.txt)
                until [ "$(wc -l < /app/seen.txt)" -gt $((n + 20)) ]; do :; done
            - run: cat /logs/verifier/reward.txt
              reward: true
            - run: tail -n 3 /app/seen.txt
              exit: any
        """),
    }
    task = load_task(_write_task(tmp_path / "reward-spy", files))
    env = _env(task)
    try:
        assert env.step(spy).observation.startswith("Exit code: 0")
        assert wait_until(lambda: "seen.txt" in env.step("ls").observation, 30)
        result = env.step("submit")
    finally:
        env.close()
    check = env.last_check
    assert check is not None and not result.success
    assert check.steps[1].why == "the reward is 0, below 1", check.output
    seen = check.steps[2].stdout.splitlines()  # what the daemon saw while the check ran
    assert len(seen) == 3 and all("hidden.txt" not in line and "home-" not in line for line in seen), seen


def test_the_engine_closes_each_session_when_its_trajectory_ends(server_task: TerminalTask) -> None:
    marker = f"arlkit-marker-{uuid.uuid4().hex}"

    class Starter:
        name = "starter"
        context_length = None

        def generate(self, requests):  # noqa: ANN001, ANN202
            return [Reply(f"<action>nohup sleep 1000 {marker} > /dev/null 2>&1 &</action>") for _ in requests]

    task = Task(server_task.task_id, server_task.to_payload())
    run_rollouts(lambda: TerminalEnv(TerminalConfig()), make_jobs([task], 2, 2, 0), Starter())
    assert wait_until(lambda: not _marker_processes(marker), 30), "a session's process outlived its trajectory"


def test_killing_the_eval_with_sigkill_leaves_no_process(server_task: TerminalTask, tmp_path: Path) -> None:
    marker = f"arlkit-marker-{uuid.uuid4().hex}"
    script = textwrap.dedent(f"""
        import signal
        from arlkit.envs.protocol import Task
        from arlkit.envs.terminal import TerminalConfig, TerminalEnv
        from arlkit.envs.terminal.tasks import load_task
        task = load_task({str(tmp_path / "serve-ping")!r})
        env = TerminalEnv(TerminalConfig())
        env.reset(Task(task.task_id, task.to_payload()), 0)
        print(env.step("nohup sleep 1000 {marker} > /dev/null 2>&1 &").observation.splitlines()[0], flush=True)
        signal.pause()  # until the test kills this process
    """)
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "arlkit-sbx-*")))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("Exit code: 0")
        assert wait_until(lambda: bool(_marker_processes(marker)), 30)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert wait_until(lambda: not _marker_processes(marker), 60), "a process outlived the killed eval"
    for left in set(glob.glob(os.path.join(tempfile.gettempdir(), "arlkit-sbx-*"))) - before:
        shutil.rmtree(left, ignore_errors=True)  # the killed process's run folder (it could not remove it)


def test_the_persistent_fixture_of_the_mixed_folder_passes_its_oracle_and_fails_without_the_server() -> None:
    task = load_task(Path(__file__).resolve().parents[1] / "data" / "terminal_formats" / "mixed" / "arlkit-serve")
    assert task.session == "persistent"
    env = _env(task)
    try:
        for command in task.solution:
            env.step(command)
        assert env.step("submit").success, env.last_check.output
        env.reset(Task(task.task_id, task.to_payload()), 0)
        env.step(task.solution[-1])  # started.txt, but no server
        assert not env.step("submit").success
    finally:
        env.close()


def test_python_is_there_under_both_names_in_either_mode(server_task: TerminalTask) -> None:
    for mode in ("stateless", "persistent"):
        env = _env(server_task, session=mode)
        try:
            observation = env.step("python -c 'print(6 * 7)'; python3 -c 'print(6 * 7)'").observation
            assert observation.count("42") == 2, (mode, observation)
        finally:
            env.close()
