"""``POST /v1/completions`` and ``GET /health`` of ``arlkit serve``: the echoed prompt's log-probabilities
equal a log-softmax of the model's own logits computed here, in vLLM's layout (first token ``None``,
``top_logprobs`` holding the token itself and the k most likely, ``text_offset`` over the tokens), for
one prompt and a list; ``n`` choices ordered prompt by prompt; refusals naming the problem."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
import torch

from arlkit.policies import SamplingConfig
from arlkit.policies.serve import OpenAICompatibleServer

from .conftest import make_hf

PROMPTS = ["You are on a frozen lake. Where do you go?", "Left, then Down é→✓"]


@pytest.fixture(scope="module")
def server(spiky) -> Iterator[OpenAICompatibleServer]:  # type: ignore[no-untyped-def]
    with OpenAICompatibleServer(make_hf(spiky, sampling=SamplingConfig(temperature=1.0, max_new_tokens=12)), "tiny") as srv:
        yield srv


def _call(server: OpenAICompatibleServer, path: str, body: object = None) -> tuple[int, dict]:  # type: ignore[type-arg]
    where = urlparse(server.base_url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
    try:
        if body is None:
            conn.request("GET", path)
        else:
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def _complete(server: OpenAICompatibleServer, **fields: object) -> dict:  # type: ignore[type-arg]
    status, payload = _call(server, "/v1/completions", {"model": "tiny", **fields})
    assert status == 200, payload
    return payload


def _direct(server: OpenAICompatibleServer, prompt: str, k: int) -> tuple[list[int], torch.Tensor]:
    """The prompt's token ids and the model's log-softmax at each position, computed here."""
    tokenizer, model = server.policy.tokenizer, server.policy.model
    ids = tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return ids, torch.log_softmax(logits, dim=-1)


def test_health(server: OpenAICompatibleServer) -> None:
    status, payload = _call(server, "/health")
    assert status == 200 and payload["status"] == "ok" and payload["model"] == "tiny"


@pytest.mark.parametrize("as_list", [False, True])
def test_echoed_prompt_logprobs_are_the_models_log_softmax(server: OpenAICompatibleServer, as_list: bool) -> None:
    reply = _complete(server, prompt=PROMPTS if as_list else PROMPTS[0], max_tokens=0, echo=True, logprobs=3)
    assert len(reply["choices"]) == (2 if as_list else 1)
    tokenizer = server.policy.tokenizer
    for index, (choice, prompt) in enumerate(zip(reply["choices"], PROMPTS, strict=False)):
        ids, logp = _direct(server, prompt, 3)
        lp = choice["logprobs"]
        assert choice["index"] == index and choice["text"] == prompt and choice["finish_reason"] == "length"
        assert lp["tokens"] == [tokenizer.decode([t]) for t in ids]
        assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
        expected = [float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]
        assert lp["token_logprobs"][1:] == pytest.approx(expected, abs=1e-4)
        for i in range(1, len(ids)):
            top = lp["top_logprobs"][i]
            best = logp[i - 1].topk(3)
            wanted = {tokenizer.decode([ids[i]]): float(logp[i - 1, ids[i]])}
            for t, v in zip(best.indices.tolist(), best.values.tolist(), strict=True):
                wanted.setdefault(tokenizer.decode([t]), v)
            assert top.keys() == wanted.keys() and list(top.values()) == pytest.approx(list(wanted.values()), abs=1e-4)
        offsets = [0]
        for token in lp["tokens"][:-1]:
            offsets.append(offsets[-1] + len(token))
        assert lp["text_offset"] == offsets
    assert reply["usage"]["completion_tokens"] == 0
    assert reply["usage"]["prompt_tokens"] == sum(len(tokenizer(p)["input_ids"]) for p in PROMPTS[: len(reply["choices"])])


def test_a_long_prompt_is_scored_in_chunks_with_the_same_result(server: OpenAICompatibleServer) -> None:
    prompt = "Left, Down, Right. " * 100  # several hundred tokens: the output head runs chunk by chunk
    ids, logp = _direct(server, prompt, 0)
    assert len(ids) > 2 * 256  # more than one chunk (serve_sampler._SCORE_CHUNK)
    reply = _complete(server, prompt=prompt, max_tokens=0, echo=True, logprobs=0)
    lp = reply["choices"][0]["logprobs"]
    expected = [float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]
    assert lp["token_logprobs"][1:] == pytest.approx(expected, abs=1e-4)
    assert all(len(top) == 1 for top in lp["top_logprobs"][1:])  # logprobs 0: the token itself only


def test_echo_with_generation_puts_the_prompt_first(server: OpenAICompatibleServer) -> None:
    plain = _complete(server, prompt=PROMPTS[0], max_tokens=5, seed=3, logprobs=2, temperature=1.0)
    echoed = _complete(server, prompt=PROMPTS[0], max_tokens=5, seed=3, logprobs=2, temperature=1.0, echo=True)
    generated, both = plain["choices"][0], echoed["choices"][0]
    assert both["text"] == PROMPTS[0] + generated["text"]
    n_prompt = len(server.policy.tokenizer(PROMPTS[0])["input_ids"])
    assert both["logprobs"]["tokens"][n_prompt:] == generated["logprobs"]["tokens"]
    assert both["logprobs"]["token_logprobs"][n_prompt:] == pytest.approx(generated["logprobs"]["token_logprobs"], abs=1e-4)
    assert all(len(top) <= 3 and generated["logprobs"]["tokens"][k] in top
               for k, top in enumerate(generated["logprobs"]["top_logprobs"]))


def test_n_choices_are_ordered_prompt_by_prompt(server: OpenAICompatibleServer) -> None:
    both = _complete(server, prompt=PROMPTS, max_tokens=6, seed=5, n=2)
    alone = [_complete(server, prompt=p, max_tokens=6, seed=5, n=2) for p in PROMPTS]
    assert [c["index"] for c in both["choices"]] == [0, 1, 2, 3]
    assert [c["text"] for c in both["choices"]] == [c["text"] for a in alone for c in a["choices"]]
    ids = server.policy.tokenizer(PROMPTS[1])["input_ids"]
    by_ids = _complete(server, prompt=ids, max_tokens=6, seed=5, n=2)
    assert [c["text"] for c in by_ids["choices"]] == [c["text"] for c in alone[1]["choices"]]


@pytest.mark.parametrize(("fields", "named"), [
    ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "x", "logprobs": 21}, "logprobs must be"),
    ({"prompt": "x", "suffix": "y"}, "suffix"),
    ({"prompt": "x", "best_of": 3}, "best_of"),
    ({"prompt": ""}, "empty"),
    ({"prompt": [10**9]}, "token id"),
    ({"prompt": {"a": 1}}, "prompt must be"),
    ({"prompt": "x", "presence_penalty": 1.0}, "presence_penalty"),
    ({"prompt": [7] * 8192, "max_tokens": 1}, "maximum context length"),
])
def test_refusals_name_the_problem(server: OpenAICompatibleServer, fields: dict, named: str) -> None:  # type: ignore[type-arg]
    assert server.policy.context_length == 8192  # the nano model's window, which the last case fills
    status, payload = _call(server, "/v1/completions", {"model": "tiny", **fields})
    assert status == 400 and named in payload["error"]["message"], payload
    assert _complete(server, prompt="x", max_tokens=1, best_of=1, suffix="", user="u")["choices"]  # neutral values pass


def test_the_sdk_reads_completions_plain_and_streamed(server: OpenAICompatibleServer) -> None:
    import openai

    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=120.0) as client:
        whole = client.completions.create(model="tiny", prompt=PROMPTS, max_tokens=4, seed=8, n=2, echo=True, logprobs=1)
        streamed: dict[int, str] = {}
        for chunk in client.completions.create(model="tiny", prompt=PROMPTS, max_tokens=4, seed=8, n=2, echo=True,
                                               stream=True):
            for choice in chunk.choices:
                streamed[choice.index] = streamed.get(choice.index, "") + choice.text
    assert [c.text for c in whole.choices] == [streamed[i] for i in range(4)]
    assert whole.choices[2].text.startswith(PROMPTS[1]) and whole.choices[0].logprobs.token_logprobs[0] is None  # type: ignore[union-attr]
