"""``arlkit serve`` as a spec-following client sees it (the official ``openai`` SDK, sync, async and
streaming, and raw HTTP): unseeded samples differ, ``n`` choices, streamed chunks that add up to
the reply, ``top_logprobs`` with true bytes, content parts, ``GET /v1/models/{id}``, refusals of
what the server does not implement (and acceptance of fields that change nothing), a keep-alive connection that survives a request to an unknown
route, and the command itself starting and shutting down on Ctrl-C."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from urllib.parse import urlparse

import openai
import pytest

from arlkit.policies import SamplingConfig
from arlkit.policies.serve import OpenAICompatibleServer

from .conftest import make_hf

MESSAGES = [{"role": "user", "content": "You are on a frozen lake. Where do you go?"}]


@pytest.fixture(scope="module")
def server(spiky) -> Iterator[OpenAICompatibleServer]:  # type: ignore[no-untyped-def]
    with OpenAICompatibleServer(make_hf(spiky, sampling=SamplingConfig(temperature=1.0, max_new_tokens=12)), "tiny") as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: OpenAICompatibleServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=120.0) as c:
        yield c


def _texts(response) -> list[str]:  # type: ignore[no-untyped-def]
    return [choice.message.content for choice in response.choices]


def test_unseeded_samples_differ_and_seeded_ones_repeat(client: openai.OpenAI) -> None:
    unseeded = [_texts(client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=1.0))[0]
                for _ in range(3)]
    assert len(set(unseeded)) > 1  # before, a missing seed meant seed 0: three identical samples
    seeded = [_texts(client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=1.0, seed=7))[0]
              for _ in range(2)]
    assert seeded[0] == seeded[1]


def test_n_choices_are_distinct_samples_and_choice_0_is_the_single_reply(client: openai.OpenAI) -> None:
    many = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=1.0, seed=3, n=3)
    one = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=1.0, seed=3)
    assert [c.index for c in many.choices] == [0, 1, 2] and len(set(_texts(many))) > 1
    assert _texts(many)[0] == _texts(one)[0]
    assert many.usage is not None and many.usage.completion_tokens > one.usage.completion_tokens  # type: ignore[union-attr]


def test_models_by_id(client: openai.OpenAI) -> None:
    assert client.models.retrieve("tiny").id == "tiny"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("other")


@pytest.mark.parametrize(("extra", "named"), [
    ({"tools": [{"type": "code_interpreter"}]}, "function tools only"),
    ({"tool_choice": "required"}, "needs tools"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"presence_penalty": 0.5}, "presence_penalty"),
    ({"logit_bias": {"5": 10}}, "logit_bias"),
    ({"n": 129}, "most choices"),
    ({"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
    ({"top_logprobs": 3}, "top_logprobs needs logprobs"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"n": 0}, "n must be"),
])
def test_what_the_server_does_not_implement_is_refused_not_ignored(client: openai.OpenAI, extra: dict,  # type: ignore[type-arg]
                                                                   named: str) -> None:
    with pytest.raises(openai.BadRequestError, match=named):
        client.chat.completions.create(model="tiny", messages=MESSAGES, **extra)
    # the same fields with values that ask for nothing are accepted, and so are fields that change no reply
    neutral = client.chat.completions.create(
        model="tiny", messages=MESSAGES, presence_penalty=0, frequency_penalty=0, seed=1, logit_bias={},
        response_format={"type": "text"}, modalities=["text"], metadata={"k": "v"}, user="u", store=False,
        service_tier="auto", parallel_tool_calls=False, stream_options={"include_usage": True}, reasoning_effort="low")
    plain = client.chat.completions.create(model="tiny", messages=MESSAGES, seed=1)
    assert _texts(neutral) == _texts(plain)


def test_a_request_to_an_unknown_route_leaves_the_connection_usable(server: OpenAICompatibleServer) -> None:
    where = urlparse(server.base_url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
    try:
        conn.request("POST", "/v1/embeddings", body=json.dumps({"model": "tiny", "input": "x" * 2000}),
                     headers={"Content-Type": "application/json"})
        first = conn.getresponse()
        first.read()
        assert first.status == 404
        body = json.dumps({"model": "tiny", "messages": MESSAGES, "seed": 2})
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        second = conn.getresponse()  # on the same connection
        assert second.status == 200 and json.loads(second.read())["choices"][0]["message"]["content"] is not None
    finally:
        conn.close()


def _post(server: OpenAICompatibleServer, body: bytes) -> tuple[int, str]:
    """``(status, error message)`` of a raw chat request."""
    where = urlparse(server.base_url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
    try:
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = json.loads(response.read())
        return response.status, (payload.get("error") or {}).get("message", "")
    finally:
        conn.close()


def _chat(**fields: object) -> str:
    return json.dumps({"model": "tiny", "messages": MESSAGES, "seed": 1, "max_tokens": 2, **fields})


@pytest.mark.parametrize(("body", "named"), [
    (b"[" * 100_000, "levels deep"),
    (b"{" + b'"a":{' * 100_000, "levels deep"),
    (_chat(user=json.loads("[" * 40 + "]" * 40)).encode(), "levels deep"),
    (_chat().replace('"seed": 1', '"seed": 1, "temperature": NaN').encode(), "NaN is not a JSON number"),
    (_chat().replace('"seed": 1', '"seed": 1, "top_p": -Infinity').encode(), "-Infinity is not a JSON number"),
    (_chat().replace('"seed": 1', '"seed": 1, "temperature": 1e999').encode(), "temperature must be a finite number"),
    (_chat().replace('"seed": 1', '"seed": 1e999').encode(), "invalid sampling option"),
    (_chat(top_k=1e300 * 1e300).replace("Infinity", "1e999").encode(), "invalid sampling option"),
])
def test_bodies_too_deep_or_with_non_finite_numbers_are_a_400_naming_the_problem(
    server: OpenAICompatibleServer, body: bytes, named: str
) -> None:
    status, message = _post(server, body)
    assert status == 400 and named in message, (status, message)
    assert _post(server, _chat().encode())[0] == 200  # the server goes on serving


def test_streaming_chunks_add_up_to_the_reply_with_usage_last(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="tiny", messages=MESSAGES, seed=5, n=2, logprobs=True)
    stream = client.chat.completions.create(model="tiny", messages=MESSAGES, seed=5, n=2, logprobs=True, stream=True,
                                            stream_options={"include_usage": True})
    texts, finishes, tokens, usage = {0: "", 1: ""}, {}, {0: 0, 1: 0}, None
    for chunk in stream:
        if chunk.usage is not None:
            assert not chunk.choices
            usage = chunk.usage
            continue
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.logprobs is not None and choice.logprobs.content:
                tokens[choice.index] += len(choice.logprobs.content)
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
    assert [texts[0], texts[1]] == _texts(whole)
    assert finishes == {c.index: c.finish_reason for c in whole.choices}
    assert tokens == {c.index: len(c.logprobs.content) for c in whole.choices}  # type: ignore[union-attr]
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]


def test_async_client_and_concurrent_requests(server: OpenAICompatibleServer) -> None:
    import asyncio

    async def run() -> list[str]:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=120.0) as c:
            replies = await asyncio.gather(*(c.chat.completions.create(model="tiny", messages=MESSAGES, seed=s)
                                             for s in range(6)))
            streamed = ""
            async for chunk in await c.chat.completions.create(model="tiny", messages=MESSAGES, seed=0, stream=True):
                streamed += "".join(ch.delta.content or "" for ch in chunk.choices)
        return [r.choices[0].message.content or "" for r in replies] + [streamed]

    texts = asyncio.run(run())
    assert texts[-1] == texts[0] and len(set(texts[:6])) > 1


def test_top_logprobs_are_sorted_with_the_tokens_own_bytes(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model="tiny", messages=MESSAGES, seed=9, temperature=1.0, logprobs=True,
                                           top_logprobs=3)
    content = reply.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content
    for entry in content:
        values = [alt.logprob for alt in entry.top_logprobs]
        assert len(values) == 3 and values == sorted(values, reverse=True) and entry.logprob <= values[0] + 1e-6
    joined = b"".join(bytes(entry.bytes or []) for entry in content)
    assert joined.decode("utf-8", errors="replace") == reply.choices[0].message.content


def test_token_bytes_are_exact_inside_a_utf8_character(server: OpenAICompatibleServer) -> None:
    from arlkit.policies.serve_wire import token_bytes

    tokenizer = server.policy.tokenizer
    ids = tokenizer.encode("é→✓", add_special_tokens=False)
    assert b"".join(token_bytes(tokenizer, t) for t in ids) == "é→✓".encode()


def test_content_parts_and_null_content_are_accepted(client: openai.OpenAI) -> None:
    parts = [{"role": "user", "content": [{"type": "text", "text": "You are on a frozen lake. "},
                                          {"type": "text", "text": "Where do you go?"}]}]
    as_parts = client.chat.completions.create(model="tiny", messages=parts, seed=4)  # type: ignore[arg-type]
    as_text = client.chat.completions.create(model="tiny", messages=MESSAGES, seed=4)
    assert _texts(as_parts) == _texts(as_text)
    empty_turn = [*MESSAGES, {"role": "assistant", "content": None}, {"role": "user", "content": "And now?"}]
    client.chat.completions.create(model="tiny", messages=empty_turn, seed=1)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match="text parts"):
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": [  # type: ignore[list-item]
            {"type": "image_url", "image_url": {"url": "data:,"}}]}])


def test_the_serve_command_starts_answers_and_shuts_down_on_ctrl_c(  # type: ignore[no-untyped-def]
        tiny_model_dir, tmp_path, run_child, finish_child) -> None:
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "arlkit", "serve", str(tiny_model_dir), "--name", "nano", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]  # blocks until the server says where it is
        assert "serving" in line, proc.stderr.read() if proc.poll() is not None else line  # type: ignore[union-attr]
        url = line.split(" at ")[1].split()[0]
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=120.0) as c:
            assert c.models.retrieve("nano").id == "nano"
            assert c.chat.completions.create(model="nano", messages=MESSAGES, max_tokens=4).choices
        proc.send_signal(signal.SIGINT)
        said = "".join(finish_child(proc))
        assert proc.returncode in (0, 130), said  # 130: the shell's code for an interrupted command
        assert "Traceback" not in said and "resume" not in said
        assert "stopped; answered 1 request(s)" in said, said
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    bad = run_child([sys.executable, "-m", "arlkit", "serve", str(tmp_path / "missing")], capture_output=True, text=True)
    assert bad.returncode == 2 and "error" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
