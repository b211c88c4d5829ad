"""The ``openai`` backend against real HTTP servers on 127.0.0.1: the tiny model served by
:class:`OpenAICompatibleServer`, a server that fails its first requests, and one that never answers."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from arlkit.config import ConfigError
from arlkit.envs import make
from arlkit.policies import PolicyError, Request, SamplingConfig, make_policy
from arlkit.policies.openai_backend import OpenAIConfig, OpenAIPolicy, request_seed
from arlkit.policies.serve import OpenAICompatibleServer
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts

from .conftest import ENV, make_hf

GREEDY = SamplingConfig(temperature=0.0, max_new_tokens=10)
FAST = OpenAIConfig(timeout=10.0, max_retries=0)


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the async engine connects all at once; the default backlog of 5 drops SYNs


@pytest.fixture(scope="module")
def server(spiky) -> Iterator[OpenAICompatibleServer]:  # type: ignore[no-untyped-def]
    with OpenAICompatibleServer(make_hf(spiky, sampling=GREEDY), "tiny") as srv:
        yield srv


def _as_served(text: str, ended: bool) -> str:
    """What an OpenAI-style server returns for a local reply (the stop string and anything after it
    dropped) once the backend has restored the closing tag of an open action."""
    cut = text.find("</action>")
    stopped = cut >= 0 or ended
    text = text[:cut] if cut >= 0 else text
    return text + "</action>" if stopped and text.rfind("<action>") > text.rfind("</action>") else text


def _ended(token_ids: Any, policy: Any) -> bool:
    return bool(token_ids) and token_ids[-1] in policy.eos_ids


def _run(policy: Any) -> list[Any]:
    tasks = make("frozenlake", **ENV).tasks("test", 3)
    jobs = make_jobs(tasks, 2, 4, seed=21)
    return run_rollouts(lambda: make("frozenlake", **ENV), jobs, policy, PromptConfig())


def test_greedy_replies_match_the_hf_backend(spiky, server: OpenAICompatibleServer) -> None:  # type: ignore[no-untyped-def]
    hf = make_hf(spiky, sampling=GREEDY)
    direct = _run(hf)
    remote = _run(make_policy(f"openai:tiny@{server.base_url}", GREEDY))
    pairs = [(a, b) for s, t in zip(direct, remote, strict=True) for a, b in zip(s.turns, t.turns, strict=True)]
    assert len(pairs) == sum(len(t.turns) for t in direct) >= 12
    assert len({a.reply for a, _ in pairs}) > 3
    for a, b in pairs:
        # The server drops the stop string (OpenAI semantics) and the backend restores it.
        assert _as_served(a.reply, _ended(a.token_ids, hf)) == b.reply
        assert b.logprobs is not None and np.allclose(a.logprobs or [], b.logprobs, atol=1e-4)


def test_sampled_replies_match_with_the_seed_sent(spiky, server: OpenAICompatibleServer, real_requests) -> None:  # type: ignore[no-untyped-def]
    sampling = SamplingConfig(temperature=1.0, top_p=0.9, max_new_tokens=10)
    remote = OpenAIPolicy("tiny", server.base_url, sampling, FAST)
    requests = real_requests[:5]
    got = remote.generate(requests)
    # The server samples turn 0 of "trajectory" request_seed(seed, turn): replay that locally.
    hf = make_hf(spiky, sampling=sampling)
    local = hf.generate([Request(r.messages, request_seed(r.seed, r.turn), 0) for r in requests])
    assert [g.text for g in got] == [_as_served(loc.text, _ended(loc.token_ids, hf)) for loc in local]
    assert len({g.text for g in got}) > 1


def test_bad_specs_and_unknown_models(server: OpenAICompatibleServer) -> None:
    with pytest.raises(PolicyError, match="does not serve model 'gpt-9'"):
        make_policy(f"openai:gpt-9@{server.base_url}")
    with pytest.raises(ConfigError, match="http"):
        make_policy("openai:tiny@localhost:8000")
    with pytest.raises(ConfigError, match="needs an argument"):
        make_policy("openai")


def test_a_server_that_is_down_is_a_clear_error() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(PolicyError, match="cannot reach the server"):
        OpenAIPolicy("tiny", f"http://127.0.0.1:{port}/v1", GREEDY, OpenAIConfig(timeout=2.0))
    assert time.monotonic() - start < 10


class _Flaky(BaseHTTPRequestHandler):
    """Fails the first ``failures`` chat requests with the given statuses, then answers."""

    statuses: list[int] = []
    seen: list[int] = []
    retry_after: str | None = None  # sent with every refusal
    refuse_max_tokens = False  # answer 400 to a request that sends max_tokens (as newer OpenAI models do)
    bodies: list[dict[str, Any]] = []
    message: dict[str, Any] | None = None  # the reply message (default: a text action)
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        return

    def do_POST(self) -> None:  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.bodies.append(request)
        attempt = len(self.seen)
        status = self.statuses[attempt] if attempt < len(self.statuses) else 200
        body: dict[str, Any] = {"error": {"message": "busy", "type": "server_error"}}
        if self.refuse_max_tokens and "max_tokens" in request:
            status = 400
            body = {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                         "Use 'max_completion_tokens' instead.", "type": "invalid_request_error"}}
        self.seen.append(status)
        if status == 200:
            body = {
                "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": self.message or {"role": "assistant", "content": "<think>ok</think><action>Left"}}],
            }
        data = json.dumps(body).encode()
        self.send_response(status)
        if status != 200 and self.retry_after is not None:
            self.send_header("Retry-After", self.retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def flaky() -> Iterator[tuple[str, type[_Flaky]]]:
    handler = type("Flaky", (_Flaky,), {"statuses": [], "seen": [], "bodies": []})
    http = _Server(("127.0.0.1", 0), handler)
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_address[1]}/v1", handler
    http.shutdown()
    http.server_close()
    thread.join(timeout=5)


def test_retries_with_exponential_backoff(flaky, real_requests) -> None:  # type: ignore[no-untyped-def]
    url, handler = flaky
    handler.statuses = [429, 503, 500]
    waits: list[float] = []
    config = OpenAIConfig(max_retries=3, backoff=0.25, jitter=0.0, check_model=False)
    policy = OpenAIPolicy("m", url, GREEDY, config, sleep=waits.append)
    reply = policy.generate([real_requests[0]])[0]
    assert handler.seen == [429, 503, 500, 200]
    assert waits == [0.25, 0.5, 1.0]
    assert reply.error is None and reply.text == "<think>ok</think><action>Left</action>"
    assert reply.logprobs is None  # this server sends none: fine unless required
    handler.seen.clear()
    handler.statuses = []
    strict = OpenAIPolicy("m", url, GREEDY, OpenAIConfig(check_model=False, require_logprobs=True))
    with pytest.raises(PolicyError, match="returned no log-probs"):
        strict.generate([real_requests[0]])


def test_retry_after_is_honoured_and_waits_are_jittered(flaky, real_requests) -> None:  # type: ignore[no-untyped-def]
    url, handler = flaky
    handler.statuses, handler.retry_after = [429, 503], "2"
    waits: list[float] = []
    exact = OpenAIPolicy("m", url, GREEDY, OpenAIConfig(max_retries=3, backoff=0.25, jitter=0.0, check_model=False),
                         sleep=waits.append)
    assert exact.generate([real_requests[0]])[0].error is None
    assert waits == [2.0, 2.0]  # the server asked for 2 s, more than the backoff's 0.25 and 0.5
    handler.seen.clear()
    handler.statuses, handler.retry_after = [500] * 6, None
    jittered: list[float] = []
    policy = OpenAIPolicy("m", url, GREEDY, OpenAIConfig(max_retries=6, backoff=1.0, max_backoff=64.0, jitter=0.2,
                                                         check_model=False), sleep=jittered.append)
    assert policy.generate([real_requests[0]])[0].error is None
    base = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    assert all(0.8 * b <= w <= 1.2 * b for w, b in zip(jittered, base, strict=True))
    assert [round(w / b, 6) for w, b in zip(jittered, base, strict=True)] != [1.0] * 6


def test_a_server_that_wants_max_completion_tokens_gets_it(flaky, real_requests) -> None:  # type: ignore[no-untyped-def]
    url, handler = flaky
    handler.refuse_max_tokens = True
    policy = OpenAIPolicy("m", url, GREEDY, OpenAIConfig(max_retries=0, check_model=False))
    replies = policy.generate(real_requests[:2])
    assert all(r.error is None and r.text.endswith("</action>") for r in replies)
    sent = [("max_tokens" in b, b.get("max_completion_tokens")) for b in handler.bodies]
    assert sent[0] == (True, None) and sent[-1] == (False, GREEDY.max_new_tokens) and handler.seen.count(400) <= 2


def test_gives_up_after_the_retries_and_records_the_error(flaky, real_requests) -> None:  # type: ignore[no-untyped-def]
    url, handler = flaky
    handler.statuses = [500, 500, 500, 500]
    policy = OpenAIPolicy("m", url, GREEDY, OpenAIConfig(max_retries=2, check_model=False), sleep=lambda s: None)
    replies = policy.generate(real_requests[:1])
    assert handler.seen == [500, 500, 500]
    assert replies[0].error is not None and "after 3 attempt(s)" in replies[0].error and replies[0].text == ""
    handler.seen.clear()
    handler.statuses = [400]  # a client error is not retried
    assert "after 1 attempt(s)" in (policy.generate(real_requests[:1])[0].error or "")
    assert handler.seen == [400]


def test_a_server_that_never_answers_ends_in_an_error_within_the_timeout(real_requests) -> None:  # type: ignore[no-untyped-def]
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    held: list[socket.socket] = []

    def accept_and_hold() -> None:  # accepts connections and never writes a byte
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_and_hold, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        config = OpenAIConfig(timeout=0.5, max_retries=1, backoff=0.0, check_model=False)
        policy = OpenAIPolicy("m", url, GREEDY, config)
        start = time.monotonic()
        replies = policy.generate(real_requests[:3])
        elapsed = time.monotonic() - start
        assert all(r.error and "Timeout" in r.error for r in replies), replies
        assert elapsed < 5.0  # 2 attempts x 0.5 s, the three requests in parallel
        policy.close()
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()


def test_a_reply_of_tool_calls_is_recorded_not_dropped(flaky, real_requests) -> None:  # type: ignore[no-untyped-def]
    url, handler = flaky
    handler.message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "move", "arguments": '{"direction": "Left"}'}}]}
    policy = OpenAIPolicy("m", url, SamplingConfig(temperature=0.0), OpenAIConfig(max_retries=0, check_model=False))
    try:
        [reply] = policy.generate(real_requests[:1])
    finally:
        policy.close()
    assert reply.error is None and reply.text == ""
    assert reply.details == {"tool_calls": [{"id": "c1", "name": "move", "arguments": '{"direction": "Left"}'}]}
