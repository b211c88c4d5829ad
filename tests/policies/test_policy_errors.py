"""Policy errors and context windows through the ``openai`` backend, against the tiny model's
OpenAI-compatible server behind a front that injects faults: 500s, malformed JSON, a hang past the
timeout, a dropped connection. Errored trajectories are not finished; once the server recovers a
re-run retries them and the result equals an undisturbed run."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from arlkit.cli import main
from arlkit.config import EnvSpec
from arlkit.envs import make
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.policies import CONTEXT_LENGTH_EXCEEDED, BackendOptions, Request, SamplingConfig, make_policy
from arlkit.policies.openai_backend import OpenAIConfig, OpenAIPolicy
from arlkit.policies.serve import OpenAICompatibleServer
from arlkit.rollout import PromptConfig, make_jobs, read_trajectories, run_rollouts

from .conftest import ENV, make_hf

GREEDY = SamplingConfig(temperature=0.0, max_new_tokens=10)


@dataclass
class Front:
    """What the front does to the next chat requests: ``fault`` applies to every request while set,
    or to the first ``count`` requests when ``count`` is given; otherwise requests are served."""

    fault: str | None = None
    count: int | None = None
    chats: int = 0
    faults: int = 0
    bodies: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # canned (status, body) replies
    release: threading.Event = field(default_factory=threading.Event)
    counted: threading.Condition = field(default_factory=threading.Condition)  # notified on every fault

    def take(self) -> str | None:
        with self.counted:
            self.chats += 1
            if self.fault is None or (self.count is not None and self.faults >= self.count):
                return None
            self.faults += 1
            self.counted.notify_all()
            return self.fault

    def wait_faults(self, done: Callable[[int], bool], deadline_s: float = 60.0) -> bool:
        """Whether the fault count satisfies ``done`` within ``deadline_s`` (woken by each new fault)."""
        with self.counted:
            return self.counted.wait_for(lambda: done(self.faults), timeout=deadline_s)


def _front_handler(front: Front, backend: OpenAICompatibleServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            return

        def _send(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._send(200, json.dumps(backend.models()).encode())

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            fault = front.take()
            if fault == "500":
                self._send(500, b'{"error": {"message": "busy", "type": "server_error"}}')
            elif fault == "malformed":
                self._send(200, b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "mess')
            elif fault == "hang":  # read the request, never answer (until the test ends)
                front.release.wait(60)
                self.close_connection = True
            elif fault == "drop":
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
            elif fault == "canned":
                status, payload = front.bodies[0]
                self._send(status, json.dumps(payload).encode())
            else:
                try:
                    self._send(200, json.dumps(backend.chat(body)).encode())
                except Exception as exc:  # the backend's own refusals (e.g. context length)
                    status = getattr(exc, "status", 500)
                    message = {"error": {"message": str(exc), "type": getattr(exc, "code", "x"), "code": getattr(exc, "code", None)}}
                    self._send(status, json.dumps(message).encode())

    return Handler


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the async engine connects all at once; the default backlog of 5 drops SYNs


@pytest.fixture(scope="module")
def tiny_server(spiky) -> Iterator[OpenAICompatibleServer]:  # type: ignore[no-untyped-def]
    with OpenAICompatibleServer(make_hf(spiky, sampling=GREEDY), "tiny") as srv:
        yield srv


@pytest.fixture
def front(tiny_server: OpenAICompatibleServer) -> Iterator[tuple[str, Front]]:
    state = Front()
    http = _Server(("127.0.0.1", 0), _front_handler(state, tiny_server))
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_address[1]}/v1", state
    state.release.set()
    http.shutdown()
    http.server_close()
    thread.join(timeout=10)


def _config(url: str, timeout: float) -> EvalConfig:
    options = BackendOptions(request_timeout=timeout, max_retries=1, retry_backoff=0.0)
    return EvalConfig(env=EnvSpec("frozenlake", {"size": 4, "t_max": 6}), policies=(f"openai:tiny@{url}",), tasks=2,
                      samples=2, budgets=("50%", "100%"), sampling=GREEDY, backend=options, bootstrap=100)


def _by_key(trajectories: list[Any]) -> dict[Any, Any]:
    return {t.key(): (t.turns, t.success_turn, t.ended_by) for t in trajectories}


@pytest.mark.parametrize("fault", ["500", "malformed", "hang", "drop"])
def test_a_failing_server_leaves_trajectories_unfinished_and_a_rerun_completes_them(
    front: tuple[str, Front], tmp_path: Path, fault: str
) -> None:
    url, state = front
    config = _config(url, timeout=120.0)  # generous: the tiny model on a shared CPU
    reference = run_eval(config, tmp_path / "ref")
    assert not reference.failed and len(reference.trajectories) == 8

    state.fault = fault
    out = tmp_path / "run"
    # only a hang needs a short timeout; the other faults answer at once, and a short timeout there
    # turns a busy machine's slow accept into a timeout instead of the fault under test
    timeout = 1.0 if fault == "hang" else 60.0
    broken = run_eval(_config(url, timeout=timeout), out)  # timeouts may change between runs of one directory
    assert len(broken.failed) == 8 and not broken.trajectories and not broken.rows  # nothing computed silently
    expected = {"500": "InternalServerError", "malformed": "JSONDecodeError", "hang": "APITimeoutError",
                "drop": "APIConnectionError"}[fault]
    # every request tried twice (max_retries 1), and the last try failed with the fault itself
    errors = [t.error or "" for t in broken.failed]
    assert all(t.ended_by == "policy_error" for t in broken.failed)
    assert all(e.startswith(f"{expected} after 2 attempt(s)") for e in errors), (fault, errors[:3])
    # the front saw every first try, and every retry too except after a drop, where a retry on a
    # pooled connection the front had just closed can fail before reaching it; a timed-out client
    # may hang up before the front's thread counts, so wait for the count (generous deadline)
    if fault == "drop":
        assert state.wait_faults(lambda n: n >= 8) and state.faults <= 2 * 8, state.faults
    else:
        assert state.wait_faults(lambda n: n == 2 * 8), (fault, state.faults)
    assert len(read_trajectories(out / "errors.jsonl")) == 8
    assert read_trajectories(out / "trajectories.jsonl") == []

    state.fault = None  # the server recovers
    healed = run_eval(config, out)
    assert not healed.failed and healed.resumed == 0
    assert _by_key(healed.trajectories) == _by_key(reference.trajectories)
    assert healed.rows == reference.rows


def test_eval_exits_non_zero_while_errors_remain_and_zero_once_retried(
    front: tuple[str, Front], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = front
    args = ["eval", "--env", "frozenlake", "--env-arg", "size=4", "--env-arg", "t_max=6", "--tasks", "2", "--samples", "2",
            "--budgets", "100%", "--bootstrap", "100", "--temperature", "0", "--max-new-tokens", "10",
            "--policy", f"openai:tiny@{url}", "--request-timeout", "60", "--max-retries", "0"]
    assert main([*args, "--out", str(tmp_path / "ref")]) == 0
    state.fault, state.count = "500", 3  # the first three requests fail: three trajectories end at turn 0
    out = tmp_path / "run"
    assert main([*args, "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == "3 trajectories ended by policy errors; re-run to retry them"
    assert "Traceback" not in captured.err and "errors.jsonl" in captured.out
    assert main([*args, "--out", str(out)]) == 0  # the server is fine again
    captured = capsys.readouterr()
    assert "resumed: kept 1 finished trajectories" in captured.out and "policy errors" not in captured.err
    assert (out / "passkt.csv").read_text() == (tmp_path / "ref" / "passkt.csv").read_text()
    for flag, value, problem in (("--request-timeout", "0", "request_timeout must be"), ("--max-retries", "-1", "max_retries must be"),
                                 ("--context-length", "1", "context_length must be"), ("--request-timeout", "nan", "finite")):
        assert main([*args, flag, value, "--out", str(tmp_path / "bad")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and problem in err[0], err


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("This model's maximum context length is 512 tokens. However, you requested 700 tokens (690 in the messages, "
         "10 in the completion). Please reduce the length of the messages or completion.", None),  # vLLM
        ("Requested token count exceeds the model's maximum context length of 512 tokens.", None),  # SGLang
        ("the request exceeds the available context size, try increasing it", "exceed_context_size_error"),  # llama.cpp
        ("Input is too long.", "context_length_exceeded"),  # OpenAI's code
    ],
)
def test_the_servers_context_length_errors_end_the_trajectory(
    front: tuple[str, Front], real_requests: list[Request], message: str, code: str | None
) -> None:
    url, state = front
    state.fault, state.bodies = "canned", [(400, {"error": {"message": message, "type": "invalid_request_error", "code": code}})]
    policy = OpenAIPolicy("tiny", url, GREEDY, OpenAIConfig(max_retries=3, check_model=False))
    reply = policy.generate([real_requests[0]])[0]
    assert reply.finish_reason == CONTEXT_LENGTH_EXCEEDED and reply.error is None
    assert state.faults == 1  # not retried
    assert policy.context_length == (512 if "512" in message else None)  # learned when the message says it
    state.bodies = [(400, {"error": {"message": "temperature must be >= 0", "type": "invalid_request_error"}})]
    assert "BadRequestError after 1 attempt(s)" in (policy.generate([real_requests[0]])[0].error or "")


def test_a_known_context_length_ends_trajectories_where_an_enforcing_server_would(
    spiky, tiny_server: OpenAICompatibleServer  # type: ignore[no-untyped-def]
) -> None:
    window = 420
    tasks = make("frozenlake", **ENV).tasks("test", 2)
    jobs = make_jobs(tasks, 2, 8, seed=4)

    def run(policy: Any) -> list[Any]:
        return run_rollouts(lambda: make("frozenlake", **ENV), jobs, policy, PromptConfig())

    direct = run(make_hf(spiky, sampling=GREEDY, context_length=window))
    assert any(t.ended_by == CONTEXT_LENGTH_EXCEEDED for t in direct)
    with OpenAICompatibleServer(make_hf(spiky, sampling=GREEDY, context_length=window), "tiny") as enforcing:
        learned_policy = make_policy(f"openai:tiny@{enforcing.base_url}", GREEDY)
        learned = run(learned_policy)  # the server refuses with 400; the backend learns the window
    assert learned_policy.context_length == window  # type: ignore[attr-defined]
    # the tiny server's window is the model's 8192: the backend itself applies the window it was told
    told = make_policy(f"openai:tiny@{tiny_server.base_url}", GREEDY, BackendOptions(context_length=window))
    given = run(told)
    summary = [(len(t.turns), t.ended_by, t.error) for t in learned]
    assert summary == [(len(t.turns), t.ended_by, t.error) for t in given]
    assert [n for n, *_ in summary] == [len(t.turns) for t in direct]
    assert {e for _, e, _ in summary} <= {CONTEXT_LENGTH_EXCEEDED, "success", "terminal"} and not any(e for *_, e in summary)


def test_a_server_reply_with_lone_surrogates_is_recorded_as_valid_utf8(front: tuple[str, Front], tmp_path: Path) -> None:
    url, state = front
    content = "<think>\ud800</think><action>Le\udfffft"  # the server's JSON says "\ud800": a lone surrogate
    completion = {"id": "x", "object": "chat.completion", "created": 0, "model": "tiny",
                  "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                               "message": {"role": "assistant", "content": content}}]}
    state.fault, state.bodies = "canned", [(200, completion)]
    out = tmp_path / "run"
    result = run_eval(_config(url, timeout=60.0), out)
    assert not result.failed and len(result.trajectories) == 8
    (out / "trajectories.jsonl").read_bytes().decode("utf-8")  # strictly valid
    for traj in result.trajectories:
        assert traj.turns[0].reply == "<think>\ufffd</think><action>Le\ufffdft</action>"
        assert traj.replaced_code_points == 2 * len(traj.turns) and len(traj.turns) == traj.budget
    assert run_eval(_config(url, timeout=60.0), out).resumed == 8  # and it resumes


def test_a_server_that_refuses_every_request_stops_the_run_with_its_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from arlkit.policies.loopback import ScriptedServer

    def refuse(key: int, attempt: int) -> int:
        return 400  # e.g. a parameter the server does not support

    with ScriptedServer(lambda body: "<action>Left</action>", fault=refuse) as server:
        code = main(["eval", "--env", "frozenlake", "--policy", f"openai:scripted@{server.base_url}", "--tasks", "4",
                     "--samples", "2", "--budgets", "full", "--out", str(tmp_path / "run")])
        asked = server.requests
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("arlkit eval: error:")]
    assert len(errors) == 1 and "refused the first 3 requests with HTTP 400: injected fault (" in errors[0]
    assert asked < 4 * 2 * 2  # it stopped early instead of failing every trajectory
