"""Tools through ``arlkit serve``: the official ``openai`` SDK's tool calling (plain and streamed) against
a nano model whose replies are scripted (:mod:`.serve_script`), tool results in the conversation, the
ChatML tool template standing in for a template that ignores tools, ``tool_choice``, and the reading of
untrusted replies for tool calls."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from arlkit.policies import SamplingConfig
from arlkit.policies.hf import HFPolicy, load_hf_model
from arlkit.policies.serve import OpenAICompatibleServer
from arlkit.policies.serve_tools import CHATML_TOOL_TEMPLATE, PromptRenderer, read_tool_calls

from .serve_script import ADD_TOOL, ScriptedReplies

ASK = [{"role": "user", "content": "What is 1 + 2? Use the tool."}]


@pytest.fixture(scope="module")
def scripted(tiny_model_dir) -> Iterator[tuple[OpenAICompatibleServer, ScriptedReplies]]:  # type: ignore[no-untyped-def]
    model, tokenizer = load_hf_model(tiny_model_dir)  # a model of its own: the hook stays out of other tests
    script = ScriptedReplies(model, tokenizer)
    policy = HFPolicy(model, tokenizer, SamplingConfig(temperature=1.0, max_new_tokens=80), attn_implementation="arlkit")
    with OpenAICompatibleServer(policy, "tiny") as server:
        script.enabled = True
        yield server, script
    script.remove()


@pytest.fixture(scope="module")
def client(scripted) -> Iterator[openai.OpenAI]:  # type: ignore[no-untyped-def]
    with openai.OpenAI(base_url=scripted[0].base_url, api_key="x", max_retries=0, timeout=120.0) as c:
        yield c


def test_the_sdk_gets_the_models_tool_call_and_the_final_answer(client: openai.OpenAI, scripted) -> None:  # type: ignore[no-untyped-def]
    first = client.chat.completions.create(model="tiny", messages=ASK, tools=[ADD_TOOL], seed=11)  # type: ignore[list-item]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "add" and call.id.startswith("call_")
    assert json.loads(call.function.arguments) == {"x": 1, "y": 2}
    assert '"name": "add"' in scripted[1].prompts[-1]  # the tools were rendered into the prompt
    result = {"role": "tool", "tool_call_id": call.id, "content": "3"}
    second = client.chat.completions.create(model="tiny", messages=[*ASK, choice.message.model_dump(exclude_none=True), result],  # type: ignore[list-item]
                                            tools=[ADD_TOOL], seed=12)  # type: ignore[list-item]
    assert second.choices[0].finish_reason == "stop" and second.choices[0].message.content == "The sum is 3."
    assert "<tool_call>" in scripted[1].prompts[-1] and "<|im_start|>tool\n3" in scripted[1].prompts[-1]


def test_streamed_tool_calls_accumulate_into_the_same_call(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="tiny", messages=ASK, tools=[ADD_TOOL], seed=13)  # type: ignore[list-item]
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in client.chat.completions.create(model="tiny", messages=ASK, tools=[ADD_TOOL], seed=13, stream=True):  # type: ignore[list-item]
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                entry = calls.setdefault(delta.index, {"name": "", "arguments": ""})
                entry["name"] += (delta.function.name or "") if delta.function else ""
                entry["arguments"] += (delta.function.arguments or "") if delta.function else ""
            finish = choice.finish_reason or finish
    expected = whole.choices[0].message.tool_calls[0].function  # type: ignore[index]
    assert finish == "tool_calls" and calls == {0: {"name": expected.name, "arguments": expected.arguments}}
    # the SDK's own stream helper parses the same call
    with client.chat.completions.stream(model="tiny", messages=ASK, tools=[ADD_TOOL], seed=13) as stream:  # type: ignore[list-item]
        final = stream.get_final_completion()
    assert final.choices[0].message.tool_calls[0].function.name == "add"  # type: ignore[index]


def test_tool_choice_none_leaves_the_tools_out(client: openai.OpenAI, scripted) -> None:  # type: ignore[no-untyped-def]
    reply = client.chat.completions.create(model="tiny", messages=ASK, tools=[ADD_TOOL], tool_choice="none", seed=14)  # type: ignore[list-item]
    # the scripted model still writes its call: with tool_choice "none" it is text, not a tool call
    assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.tool_calls is None
    assert "<tool_call>" in (reply.choices[0].message.content or "")
    assert '"name": "add"' not in scripted[1].prompts[-1]
    named = client.chat.completions.create(model="tiny", messages=ASK, tools=[ADD_TOOL], seed=15,  # type: ignore[list-item]
                                           tool_choice={"type": "function", "function": {"name": "add"}})
    assert named.choices[0].finish_reason == "tool_calls"
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        client.chat.completions.create(model="tiny", messages=ASK, tools=[ADD_TOOL],  # type: ignore[list-item]
                                       tool_choice={"type": "function", "function": {"name": "mul"}})


def test_a_template_that_ignores_tools_gets_the_chatml_tool_template(tiny_model_dir) -> None:  # type: ignore[no-untyped-def]
    _, tokenizer = load_hf_model(tiny_model_dir)
    renderer = PromptRenderer(tokenizer)
    assert not renderer.template_renders_tools  # the nano model's template prints role and content only
    plain = tokenizer.decode(renderer.chat_ids(ASK, None))
    assert plain == tokenizer.apply_chat_template(ASK, tokenize=False, add_generation_prompt=True)
    system = [{"role": "system", "content": "Be brief."}, *ASK]
    with_tools = tokenizer.decode(renderer.chat_ids(system, [ADD_TOOL]))
    assert with_tools.startswith("<|im_start|>system\nBe brief.\n\n") and with_tools.count("<|im_start|>system") == 1
    assert json.dumps(ADD_TOOL) in with_tools.replace("'", '"') or '"name": "add"' in with_tools
    # a template that renders tools itself is used as it is
    tokenizer.chat_template = CHATML_TOOL_TEMPLATE
    assert PromptRenderer(tokenizer).template_renders_tools


@pytest.mark.parametrize(("text", "content", "names"), [
    ('<tool_call>{"name": "add", "arguments": {"x": 1}}</tool_call>', None, ["add"]),
    ('Let me add. <tool_call>\n{"name": "add", "arguments": "{\\"x\\": 1}"}\n</tool_call>', "Let me add.", ["add"]),
    ('<tool_call>{"name": "rm", "arguments": {}}</tool_call>', '<tool_call>{"name": "rm", "arguments": {}}</tool_call>', []),
    ("<tool_call>{not json</tool_call>", "<tool_call>{not json</tool_call>", []),
    ('<tool_call>{"name": "add", "arguments": [1]}</tool_call>', '<tool_call>{"name": "add", "arguments": [1]}</tool_call>', []),
    ('<tool_call>{"name": "add"', '<tool_call>{"name": "add"', []),
])
def test_only_well_formed_calls_of_offered_tools_are_tool_calls(text: str, content: str | None, names: list[str]) -> None:
    rest, calls = read_tool_calls(text, ["add"])
    assert rest == content and [c.name for c in calls] == names
    for call in calls:
        assert json.loads(call.arguments) == {"x": 1}
