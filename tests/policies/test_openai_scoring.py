"""Scoring through servers (:mod:`arlkit.policies.openai_scoring`): the ``openai`` backend's ``score``
against ``arlkit serve`` (vLLM's ``/tokenize`` + echoed ``/v1/completions``) equals the ``hf`` backend's
on the same model; the SGLang form against a small fake ``/generate`` server computed with the same
model; a server without the routes is a one-line error; the likelihood analysis with two served
policies equals the local run."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import torch

from arlkit.policies import PolicyError, SamplingConfig
from arlkit.policies.openai_backend import OpenAIConfig, OpenAIPolicy
from arlkit.policies.serve import OpenAICompatibleServer

from .conftest import make_hf

FAST = OpenAIConfig(timeout=60.0, max_retries=0, check_model=False)
CHATS = [
    [{"role": "user", "content": "Where do you go?"}],
    [{"role": "system", "content": "You play FrozenLake. Answer with <action>...</action>."},
     {"role": "user", "content": "You are at (0, 0). The goal is at (3, 3)."}],
    [{"role": "system", "content": "Be brief."},
     {"role": "user", "content": "Step 1: where now?"},
     {"role": "assistant", "content": "I think <action>Right</action>"},
     {"role": "user", "content": "Step 2: you moved right. Where now?"}],
]
CONTINUATIONS = ["I go <action>Down</action>", "Thinking é→✓ first.\n<action>Left</action>",
                 "<action>Up</action>"]


@pytest.fixture(scope="module")
def hf(spiky):  # type: ignore[no-untyped-def]
    return make_hf(spiky, sampling=SamplingConfig(temperature=0.0, max_new_tokens=8))


@pytest.fixture(scope="module")
def server(hf) -> Iterator[OpenAICompatibleServer]:  # type: ignore[no-untyped-def]
    with OpenAICompatibleServer(hf, "tiny") as srv:
        yield srv


def _close(a: list[list[float]], b: list[list[float]]) -> None:
    assert [len(x) for x in a] == [len(x) for x in b]
    for x, y in zip(a, b, strict=True):
        assert x == pytest.approx(y, abs=1e-4)


def test_vllm_form_against_arlkit_serve_equals_the_hf_backend(hf, server: OpenAICompatibleServer) -> None:  # type: ignore[no-untyped-def]
    policy = OpenAIPolicy("tiny", server.base_url, config=FAST)
    try:
        messages = [*CHATS, CHATS[0]]
        continuations = [*CONTINUATIONS, ""]
        served = policy.score(messages, continuations)
        local = hf.score(messages, continuations)
        assert served[-1] == [] and all(len(s) >= 3 for s in served[:-1])
        _close(served, local)
        assert policy._scorer is not None and policy._scorer.used == "vllm"  # auto found vLLM's route
        # the continuation's tokens are the hf backend's, the prompt's the chat template's
        assert policy._scorer.continuation_ids(CONTINUATIONS[1]) == hf.continuation_ids(CONTINUATIONS[1])
        assert policy._scorer.prompt_ids(CHATS[2]) == hf.prompt_ids(CHATS[2])
    finally:
        policy.close()


def _post(server: OpenAICompatibleServer, path: str, body: Any) -> tuple[int, Any]:
    import httpx

    response = httpx.post(server.base_url.removesuffix("/v1") + path, json=body, timeout=60)
    return response.status_code, response.json()


def test_tokenize_and_detokenize_routes(hf, server: OpenAICompatibleServer) -> None:  # type: ignore[no-untyped-def]
    status, out = _post(server, "/tokenize", {"model": "tiny", "messages": CHATS[1], "add_generation_prompt": True})
    assert status == 200 and out["tokens"] == hf.prompt_ids(CHATS[1]) and out["count"] == len(out["tokens"])
    whole = [*CHATS[1], {"role": "assistant", "content": "ok"}]
    status, out = _post(server, "/v1/tokenize", {"messages": whole, "add_generation_prompt": False})
    text = hf.tokenizer.apply_chat_template(whole, tokenize=False, add_generation_prompt=False)
    assert status == 200 and out["tokens"] == hf.continuation_ids(text)
    status, out = _post(server, "/tokenize", {"prompt": "héllo <action>", "add_special_tokens": False,
                                              "return_token_strs": True})
    assert status == 200 and out["tokens"] == hf.continuation_ids("héllo <action>")
    assert out["token_strs"] == hf.tokenizer.convert_ids_to_tokens(out["tokens"])
    status, back = _post(server, "/detokenize", {"model": "tiny", "tokens": out["tokens"]})
    assert status == 200 and back == {"prompt": "héllo <action>"}
    status, bad = _post(server, "/tokenize", {"text": "x"})
    assert status == 400 and "messages" in bad["error"]["message"] and "prompt" in bad["error"]["message"]
    status, bad = _post(server, "/tokenize", {"model": "other", "prompt": "x"})
    assert status == 404 and bad["error"]["code"] == "model_not_found"


class _Fake(ThreadingHTTPServer):
    daemon_threads = True


def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    httpd = _Fake(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def sglang(hf) -> Iterator[tuple[str, list[dict[str, Any]]]]:  # type: ignore[no-untyped-def]
    """A fake SGLang server: ``/tokenize`` (vLLM's shape) and ``/generate`` answering with the model's
    own log-softmax, in SGLang's ``meta_info.input_token_logprobs`` layout; no ``/v1/completions``."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/tokenize":
                ids = hf.prompt_ids(body["messages"]) if "messages" in body else hf.continuation_ids(body["prompt"])
                return self._send(200, {"tokens": ids, "count": len(ids), "max_model_len": 512})
            if self.path != "/generate":
                return self._send(404, {"detail": "Not Found"})
            seen.append(body)
            ids, start = body["input_ids"], body["logprob_start_len"]
            with torch.no_grad():
                logits = hf.model(input_ids=torch.tensor([ids])).logits[0].float()
            logp = torch.log_softmax(logits, dim=-1)
            entries = [[float(logp[i - 1, ids[i]]) if i else None, ids[i], None] for i in range(start, len(ids))]
            return self._send(200, {"text": "", "meta_info": {"input_token_logprobs": entries,
                                                              "output_token_logprobs": []}})

    for url in _serve(Handler):
        yield url, seen


@pytest.mark.parametrize("form", ["auto", "sglang"])
def test_sglang_form_against_a_fake_generate_server(hf, sglang, form: str) -> None:  # type: ignore[no-untyped-def]
    url, seen = sglang
    seen.clear()
    policy = OpenAIPolicy("tiny", url, config=OpenAIConfig(timeout=60.0, max_retries=0, check_model=False, scoring=form))
    try:
        _close(policy.score(CHATS, CONTINUATIONS), hf.score(CHATS, CONTINUATIONS))
        assert policy._scorer is not None and policy._scorer.used == "sglang"
    finally:
        policy.close()
    first = seen[0]
    assert first["sampling_params"]["max_new_tokens"] == 0 and first["return_logprob"] is True
    assert first["logprob_start_len"] == len(hf.prompt_ids(CHATS[0]))
    assert first["input_ids"] == hf.prompt_ids(CHATS[0]) + hf.continuation_ids(CONTINUATIONS[0])


@pytest.fixture(scope="module")
def bare() -> Iterator[str]:
    """A server that answers 404 to every POST (a chat-only API)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            data = b'{"detail": "Not Found"}'
            self.send_response(404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    yield from _serve(Handler)


def test_a_server_that_cannot_score_is_a_one_line_error(bare: str, sglang) -> None:  # type: ignore[no-untyped-def]
    policy = OpenAIPolicy("tiny", bare, config=FAST)
    try:
        with pytest.raises(PolicyError, match="no POST /tokenize route") as info:
            policy.score(CHATS[:1], CONTINUATIONS[:1])
        assert "\n" not in str(info.value)
    finally:
        policy.close()
    # /tokenize but no vLLM route, vLLM form asked for
    url, _ = sglang
    policy = OpenAIPolicy("tiny", url, config=OpenAIConfig(timeout=60.0, max_retries=0, check_model=False,
                                                           scoring="vllm"))
    try:
        with pytest.raises(PolicyError, match=r"no POST /v1/completions \(vLLM form\) route") as info:
            policy.score(CHATS[:1], CONTINUATIONS[:1])
        assert "\n" not in str(info.value)
    finally:
        policy.close()
    off = OpenAIPolicy("tiny", url, config=OpenAIConfig(check_model=False, scoring="off"))
    with pytest.raises(PolicyError, match="scoring is off"):
        off.score(CHATS[:1], CONTINUATIONS[:1])
    off.close()


def test_a_bad_scoring_value_names_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    from arlkit.config import ConfigError
    from arlkit.policies import make_policy

    with pytest.raises(ValueError, match="scoring must be one of auto, vllm, sglang, off, got 'vlm'"):
        OpenAIConfig(scoring="vlm")
    monkeypatch.setenv("ARLKIT_OPENAI_SCORING", "vlm")
    with pytest.raises(ConfigError, match="ARLKIT_OPENAI_SCORING.*auto, vllm, sglang, off"):
        make_policy("openai:tiny@http://127.0.0.1:9/v1")


def test_likelihood_analysis_with_served_policies_equals_the_local_run(hf, spiky, server) -> None:  # type: ignore[no-untyped-def]
    from arlkit.analysis.likelihood import LikelihoodConfig, likelihood_analysis
    from arlkit.envs import make
    from arlkit.policies import make_policy
    from arlkit.rollout import make_jobs, run_rollouts

    # a second model (other weights) as the RL policy, served on its own port
    model, tokenizer = spiky
    scaled = copy.deepcopy(model)
    with torch.no_grad():
        for param in scaled.parameters():
            param.mul_(0.9)
    other = make_hf((scaled, tokenizer))
    make_env = lambda: make("frozenlake", size=4, t_max=3)  # noqa: E731
    tasks = make_env().tasks("test", 2)
    base = run_rollouts(make_env, make_jobs(tasks, 1, 3, seed=0), make_policy("noisy-oracle:0.5"))
    rl = run_rollouts(make_env, make_jobs(tasks, 1, 3, seed=1), make_policy("oracle"))
    by_id = {t.task_id: t for t in tasks}
    config = LikelihoodConfig(successful_only=False, bootstrap=100)
    local = likelihood_analysis(hf, other, make_env, by_id, base, rl, config)
    with OpenAICompatibleServer(other, "tiny-rl") as rl_server:
        served_base = make_policy(f"openai:tiny@{server.base_url}")
        served_rl = make_policy(f"openai:tiny-rl@{rl_server.base_url}")
        try:
            served = likelihood_analysis(served_base, served_rl, make_env, by_id, base, rl, config)  # type: ignore[arg-type]
        finally:
            served_base.close()  # type: ignore[attr-defined]
            served_rl.close()  # type: ignore[attr-defined]
    assert len(served.turns) == len(local.turns) > 0
    assert any(abs(t.logp_rl - t.logp_base) > 1e-2 for t in local.turns)  # the two models differ
    for s, t in zip(served.turns, local.turns, strict=True):
        assert (s.tokens, s.action_tokens, s.action_exact) == (t.tokens, t.action_tokens, t.action_exact)
        assert s.logp_base == pytest.approx(t.logp_base, abs=1e-4) and s.logp_rl == pytest.approx(t.logp_rl, abs=1e-4)
        assert s.action_nll == pytest.approx(t.action_nll, abs=1e-4, nan_ok=True)
    for s, t in zip(served.trajectories, local.trajectories, strict=True):
        assert s.cumulative == pytest.approx(t.cumulative, abs=1e-4)
    for side in ("base", "rl"):
        a, b = served.action_nll[side], local.action_nll[side]
        assert (a is None) == (b is None) and (a is None or a.value == pytest.approx(b.value, abs=1e-4))
