"""``arlkit.policies.serve`` as a spec-following client sees it (the official ``openai`` SDK and raw
HTTP): unseeded samples differ, ``n`` choices, ``GET /v1/models/{id}``, refusals of what the server
does not implement, and a keep-alive connection that survives a request to an unknown route."""

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
    ({"tools": [{"type": "function", "function": {"name": "go", "parameters": {"type": "object"}}}]}, "tools"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"presence_penalty": 0.5}, "presence_penalty"),
    ({"top_logprobs": 5, "logprobs": True}, "top_logprobs"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"n": 0}, "n must be"),
])
def test_what_the_server_does_not_implement_is_refused_not_ignored(client: openai.OpenAI, extra: dict,  # type: ignore[type-arg]
                                                                   named: str) -> None:
    with pytest.raises(openai.BadRequestError, match=named):
        client.chat.completions.create(model="tiny", messages=MESSAGES, **extra)
    # the same fields with values that ask for nothing are accepted
    client.chat.completions.create(model="tiny", messages=MESSAGES, presence_penalty=0, frequency_penalty=0, seed=1)


def test_a_request_to_an_unknown_route_leaves_the_connection_usable(server: OpenAICompatibleServer) -> None:
    where = urlparse(server.base_url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
    try:
        conn.request("POST", "/v1/completions", body=json.dumps({"model": "tiny", "prompt": "x" * 2000}),
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
