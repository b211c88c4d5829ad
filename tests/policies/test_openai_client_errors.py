"""What the ``openai`` backend says about a wrong base URL, a redirect and the API key's variable,
against small HTTP servers on 127.0.0.1 that answer as vLLM and FastAPI do."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from arlkit.policies import BackendOptions, PolicyError, Request, SamplingConfig, make_policy

GREEDY = SamplingConfig(temperature=0.0, max_new_tokens=8)
COMPLETION = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
              "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                           "message": {"role": "assistant", "content": "<think>ok</think><action>Left"}}]}


class _Handler(BaseHTTPRequestHandler):
    """Serves model ``m`` under ``/v1`` (``/v1/models``, ``/v1/chat/completions``), answers 404 like
    FastAPI elsewhere and like vLLM for another model; ``redirect`` sends everything there instead."""

    redirect: str | None = None
    keys: list[str] = []
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        return

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answer(self, body: dict[str, Any] | None) -> None:
        self.keys.append(self.headers.get("Authorization", ""))
        if self.redirect is not None:
            self._send(307, {}, {"Location": self.redirect + self.path})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})
        elif self.path == "/v1/chat/completions" and body is not None and body.get("model") != "m":
            self._send(404, {"object": "error", "message": f"The model `{body.get('model')}` does not exist.",
                             "type": "NotFoundError", "param": None, "code": 404})
        elif self.path == "/v1/chat/completions":
            self._send(200, COMPLETION)
        else:
            self._send(404, {"detail": "Not Found"})

    def do_GET(self) -> None:  # noqa: N802
        self._answer(None)

    def do_POST(self) -> None:  # noqa: N802
        self._answer(json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0")))))


def _serve(**attributes: Any) -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"keys": [], **attributes})
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_address[1]}", handler
    http.shutdown()
    http.server_close()
    thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    yield from _serve()


@pytest.fixture
def redirecting() -> Iterator[tuple[str, type[_Handler]]]:
    yield from _serve(redirect="http://elsewhere.example:8000")


def _request() -> Request:
    return Request([{"role": "user", "content": "go"}], seed=0, turn=0)


def test_a_base_url_without_v1_names_the_likely_fix(server: tuple[str, type[_Handler]]) -> None:
    root, _ = server
    policy = make_policy(f"openai:m@{root}", GREEDY)  # /models 404s: nothing to check until the first request
    with pytest.raises(PolicyError, match=r"has no route for chat completions.*does the base URL lack /v1\? "
                                          rf"e\.g\. {root}/v1"):
        policy.generate([_request()])
    assert make_policy(f"openai:m@{root}/v1", GREEDY).generate([_request()])[0].text.endswith("<action>Left</action>")


def test_an_unknown_model_is_still_named_as_such(server: tuple[str, type[_Handler]]) -> None:
    root, _ = server
    policy = make_policy(f"openai:m@{root}/v1", GREEDY)
    policy.model = "other"  # served models are checked at construction; a 404 later is the server's word
    with pytest.raises(PolicyError, match="does not know model 'other'.*does not exist"):
        policy.generate([_request()])


def test_a_redirect_is_an_error_that_says_where_it_points(redirecting: tuple[str, type[_Handler]]) -> None:
    root, handler = redirecting
    with pytest.raises(PolicyError, match=r"redirects \(HTTP 307\) to http://elsewhere\.example:8000/v1/models"):
        make_policy(f"openai:m@{root}/v1", GREEDY)
    assert len(handler.keys) == 1  # asked once, not followed


def test_the_api_key_variable_can_be_chosen(server: tuple[str, type[_Handler]],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root, handler = server
    monkeypatch.setenv("MY_SERVER_KEY", "sk-chosen")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default")
    make_policy(f"openai:m@{root}/v1", GREEDY, BackendOptions(api_key_env="MY_SERVER_KEY")).generate([_request()])
    assert handler.keys and set(handler.keys) == {"Bearer sk-chosen"}
    handler.keys.clear()
    make_policy(f"openai:m@{root}/v1", GREEDY).generate([_request()])
    assert set(handler.keys) == {"Bearer sk-default"}
    monkeypatch.delenv("MY_SERVER_KEY")
    with pytest.raises(PolicyError, match="MY_SERVER_KEY .*is not set"):
        make_policy(f"openai:m@{root}/v1", GREEDY, BackendOptions(api_key_env="MY_SERVER_KEY"))
    with pytest.raises(ValueError, match="must name an environment variable"):
        BackendOptions(api_key_env="MY-KEY")


def test_the_cli_flag_reaches_the_server_and_a_redirect_is_one_line(  # type: ignore[no-untyped-def]
        server: tuple[str, type[_Handler]], redirecting: tuple[str, type[_Handler]], tmp_path: Any, run_child) -> None:
    root, handler = server
    command = [sys.executable, "-m", "arlkit", "eval", "--env", "frozenlake", "--env-arg", "size=3", "--tasks", "1",
               "--samples", "1", "--budgets", "2", "--api-key-env", "ARLKIT_TEST_KEY"]
    env = {"PATH": "/usr/bin:/bin", "ARLKIT_TEST_KEY": "sk-flag"}
    done = run_child([*command, "--policy", f"openai:m@{root}/v1", "--out", str(tmp_path / "a")],
                     capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert handler.keys and set(handler.keys) == {"Bearer sk-flag"}
    moved = run_child([*command, "--policy", f"openai:m@{redirecting[0]}/v1", "--out", str(tmp_path / "b")],
                      capture_output=True, text=True, env=env)
    assert moved.returncode == 2, moved.stderr[-2000:]
    assert "Traceback" not in moved.stderr
    lines = [line for line in moved.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "redirects (HTTP 307) to http://elsewhere.example:8000/v1/models" in lines[0]
