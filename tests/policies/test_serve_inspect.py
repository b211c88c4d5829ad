"""Inspect AI against ``arlkit serve``: with the OpenAI-compatible provider, three epochs of an inline
task are three different samples and ``num_choices=3`` returns three choices; with the default
``openai/`` provider (which calls the Responses API for a model name it does not know, no
``-M responses_api=false``) a task answers, and a task with a tool (``add`` through ``use_tools``)
gets the model's call executed and its final answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from arlkit.policies import SamplingConfig  # noqa: E402
from arlkit.policies.serve import OpenAICompatibleServer  # noqa: E402

from .conftest import make_hf  # noqa: E402
from .serve_script import ScriptedReplies  # noqa: E402


@pytest.fixture(scope="module")
def server(spiky) -> Iterator[OpenAICompatibleServer]:  # type: ignore[no-untyped-def]
    with OpenAICompatibleServer(make_hf(spiky, sampling=SamplingConfig(temperature=1.0, max_new_tokens=8)), "tiny") as srv:
        yield srv


def _run(server: OpenAICompatibleServer, log_dir: Path, monkeypatch: pytest.MonkeyPatch, **options: object):  # type: ignore[no-untyped-def]
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    monkeypatch.setenv("ARLKIT_API_KEY", "unused")  # Inspect reads <SERVICE>_API_KEY for openai-api/<service>/...
    task = Task(dataset=[Sample(input=f"Where do you go from cell {i}?", target="Down") for i in range(3)],
                solver=[generate()], scorer=includes())
    [log] = inspect_eval(task, model="openai-api/arlkit/tiny", model_base_url=server.base_url, log_dir=str(log_dir),
                         display="none", temperature=1.0, max_tokens=8, **options)
    assert log.status == "success", log.error
    return log


def test_three_epochs_are_three_samples(server: OpenAICompatibleServer, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(server, tmp_path, monkeypatch, epochs=3)
    by_sample: dict[object, list[str]] = {}
    for sample in log.samples:
        by_sample.setdefault(sample.id, []).append(sample.output.completion)
    assert len(by_sample) == 3 and all(len(v) == 3 for v in by_sample.values())
    assert all(len(set(v)) > 1 for v in by_sample.values())  # unseeded requests are fresh samples


def test_num_choices_gives_three_choices(server: OpenAICompatibleServer, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(server, tmp_path, monkeypatch, num_choices=3)
    for sample in log.samples:
        texts = [choice.message.text for choice in sample.output.choices]
        assert len(texts) == 3 and len(set(texts)) > 1


def _openai_eval(server: OpenAICompatibleServer, log_dir: Path, monkeypatch: pytest.MonkeyPatch, task, **options: object):  # type: ignore[no-untyped-def]
    from inspect_ai import eval as inspect_eval

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    [log] = inspect_eval(task, model="openai/tiny", model_base_url=server.base_url, log_dir=str(log_dir),
                         display="none", **options)
    assert log.status == "success", log.error
    return log


def _requests(log) -> list[dict]:  # type: ignore[no-untyped-def, type-arg]
    """The bodies Inspect sent to the model, in order."""
    from inspect_ai.log import ModelEvent

    return [event.call.request for sample in log.samples for event in sample.events
            if isinstance(event, ModelEvent) and event.call is not None]


def test_the_default_openai_provider_answers_through_the_responses_api(server: OpenAICompatibleServer, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, system_message

    task = Task(dataset=[Sample(input="Where do you go?", target="Down")],
                solver=[system_message("You walk on a frozen lake."), generate()], scorer=includes())
    log = _openai_eval(server, tmp_path, monkeypatch, task, max_tokens=8)
    [request] = _requests(log)
    assert "input" in request and "messages" not in request  # the Responses API, not chat completions
    assert request.get("max_output_tokens") == 8
    output = log.samples[0].output
    assert output.completion and output.stop_reason == "max_tokens" and output.usage.output_tokens == 8


@pytest.fixture(scope="module")
def scripted_server(tiny_model_dir) -> Iterator[OpenAICompatibleServer]:  # type: ignore[no-untyped-def]
    from arlkit.policies.hf import HFPolicy, load_hf_model

    model, tokenizer = load_hf_model(tiny_model_dir)
    script = ScriptedReplies(model, tokenizer)
    policy = HFPolicy(model, tokenizer, SamplingConfig(temperature=1.0, max_new_tokens=80), attn_implementation="arlkit")
    with OpenAICompatibleServer(policy, "tiny") as srv:
        script.enabled = True
        yield srv
    script.remove()


@pytest.mark.parametrize("streaming", [False, True])
def test_an_inspect_task_with_a_tool_gets_the_call_executed(scripted_server: OpenAICompatibleServer, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, streaming: bool) -> None:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageTool
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import tool

    @tool
    def add():  # type: ignore[no-untyped-def]
        async def execute(x: int, y: int) -> int:
            """Add two integers.

            Args:
                x: The first integer.
                y: The second integer.
            """
            return x + y

        return execute

    task = Task(dataset=[Sample(input="What is 1 + 2? Use the add tool.", target="3")],
                solver=[use_tools(add()), generate()], scorer=includes())
    log = _openai_eval(scripted_server, tmp_path, monkeypatch, task, model_args={"streaming": streaming})
    sample = log.samples[0]
    [call_turn, tool_turn, answer] = sample.messages[1:]
    assert [(c.function, c.arguments) for c in call_turn.tool_calls or []] == [("add", {"x": 1, "y": 2})]
    assert isinstance(tool_turn, ChatMessageTool) and tool_turn.text == "3" and tool_turn.error is None
    assert answer.text == "The sum is 3." and sample.output.stop_reason == "stop"
    assert sample.scores and next(iter(sample.scores.values())).value == "C"
    first, second = _requests(log)
    assert first["tools"][0]["name"] == "add" and "input" in first and bool(first.get("stream")) == streaming
    assert [item.get("type") for item in second["input"][-2:]] == ["function_call", "function_call_output"]
