"""``POST /v1/responses`` of ``arlkit serve`` through the official ``openai`` SDK: a reply equals the chat
completion of the same conversation (``instructions`` as the system message), ``max_output_tokens``
marks the response incomplete, log-probs come with ``include``, a streamed response ends with the
same response, and what the server does not implement is a 400 naming it."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from arlkit.policies import SamplingConfig
from arlkit.policies.serve import OpenAICompatibleServer

from .conftest import make_hf


@pytest.fixture(scope="module")
def client(spiky) -> Iterator[openai.OpenAI]:  # type: ignore[no-untyped-def]
    policy = make_hf(spiky, sampling=SamplingConfig(temperature=1.0, max_new_tokens=12))
    with OpenAICompatibleServer(policy, "tiny") as server, \
            openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=120.0) as c:
        yield c


def test_a_response_is_the_chat_completion_of_the_same_conversation(client: openai.OpenAI) -> None:
    response = client.responses.create(model="tiny", instructions="You walk on a frozen lake.", max_output_tokens=6,
                                       input=[{"role": "user", "content": [{"type": "input_text", "text": "Go?"}]}],
                                       extra_body={"seed": 4}, store=False, metadata={"run": "1"},
                                       reasoning={"summary": "auto"}, include=["message.output_text.logprobs"])
    chat = client.chat.completions.create(model="tiny", seed=4, max_tokens=6, logprobs=True, messages=[
        {"role": "system", "content": "You walk on a frozen lake."}, {"role": "user", "content": "Go?"}])
    assert response.output_text == chat.choices[0].message.content
    [message] = response.output
    assert message.type == "message" and message.content[0].type == "output_text"
    expected = [e.logprob for e in chat.choices[0].logprobs.content]  # type: ignore[union-attr]
    assert [e.logprob for e in message.content[0].logprobs or []] == pytest.approx(expected, abs=1e-4)
    finished = chat.choices[0].finish_reason == "length"
    assert response.status == ("incomplete" if finished else "completed")
    assert response.usage is not None and response.usage.input_tokens == chat.usage.prompt_tokens  # type: ignore[union-attr]


@pytest.mark.parametrize(("fields", "named"), [
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"background": True}, "background"),
    ({"text": {"format": {"type": "json_object"}}}, "text.format"),
    ({"tools": [{"type": "web_search"}]}, "only function tools"),
    ({"input": [{"type": "image", "url": "x"}]}, "not supported"),
    ({"model": "other"}, "does not exist"),
])
def test_what_the_responses_route_does_not_implement_is_a_400(client: openai.OpenAI, fields: dict, named: str) -> None:  # type: ignore[type-arg]
    body = {"model": "tiny", "input": "Go?", "max_output_tokens": 2, **fields}
    with pytest.raises(openai.APIStatusError, match=named) as raised:
        client.post("/responses", body=body, cast_to=object)
    assert raised.value.status_code in (400, 404)


def test_a_streamed_response_carries_the_same_response(client: openai.OpenAI) -> None:
    whole = client.responses.create(model="tiny", input="Go?", max_output_tokens=30, extra_body={"seed": 6})
    kinds, deltas, final = [], "", None
    for event in client.responses.create(model="tiny", input="Go?", max_output_tokens=30, extra_body={"seed": 6},
                                         stream=True):
        kinds.append(event.type)
        deltas += getattr(event, "delta", "") if event.type == "response.output_text.delta" else ""
        final = getattr(event, "response", final)
    # as OpenAI's stream, a response cut by max_output_tokens ends with response.incomplete
    assert kinds[0] == "response.created" and kinds[-1] == f"response.{whole.status}"
    assert deltas == whole.output_text and final is not None
    assert final.output_text == whole.output_text and final.status == whole.status
