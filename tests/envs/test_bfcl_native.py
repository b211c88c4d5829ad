"""Native tool calls on ``bfcl`` (``--tool-calls native``): BFCL's functions offered as OpenAI tools (bfcl-eval's
own conversion), the model's tool calls decoded as BFCL decodes them, a reply that calls nothing ending
the user turn; end to end through ``arlkit eval`` against a scripted OpenAI-compatible server that plays
the ground truth as tool calls, with every request a well-formed function-calling conversation."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("bfcl_eval", reason="the bfcl extra is not installed (pip install --no-deps bfcl-eval mpmath)")
pytest.importorskip("tree_sitter", reason="bfcl-eval's function-calling helpers need tree-sitter (make install)")

from bfcl_eval.constants.enums import ModelStyle  # noqa: E402
from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI  # noqa: E402
from bfcl_eval.model_handler.utils import convert_to_tool  # noqa: E402

from arlkit.cli import main  # noqa: E402
from arlkit.envs import make  # noqa: E402
from arlkit.envs.bfcl import FINISH, backend, function_docs, parse_calls  # noqa: E402
from arlkit.envs.capabilities import supports_function_calling  # noqa: E402
from arlkit.policies.loopback import ScriptedServer  # noqa: E402
from arlkit.rollout.records import read_trajectories  # noqa: E402

TASKS = 6


def _entries(n: int, category: str = "multi_turn_base") -> list[Any]:
    env = make("bfcl", category=category)
    return [env, env.entries[:n]]  # type: ignore[list-item]


def test_the_tools_are_bfcls_conversion_of_the_functions_offered_at_each_turn() -> None:
    env = make("bfcl", category="multi_turn_miss_func")
    assert supports_function_calling(env)
    entry = next(e for e in env.entries if e.revealed)
    env.reset(next(t for t in env.tasks("test", len(env.entries)) if t.task_id == entry.entry_id), 0)
    docs = [d for c in entry.classes for d in function_docs(c) if d["name"] in set(entry.visible(0))]
    assert env.function_tools() == convert_to_tool(docs, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)
    names = {t["function"]["name"] for t in env.function_tools()}
    assert names == set(entry.visible(0)) and not names & {n for v in entry.revealed.values() for n in v}
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in env.function_tools())
    text = env.function_prompt_text()
    assert FINISH not in text.instruction + text.action_format and "<action>" not in text.action_format


def test_tool_calls_become_bfcls_call_strings_and_no_call_ends_the_turn() -> None:
    env = make("bfcl")
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    assert env.function_calls_action([]) == f"{FINISH}()"
    action = env.function_calls_action([{"id": "c0", "name": "cd", "arguments": '{"folder": "document"}'}])
    assert action == "cd(folder='document')" and [c.name for c in parse_calls(action)] == ["cd"]
    for bad in ('{"folder": ', '["document"]'):
        with pytest.raises(ValueError, match="arguments of 'cd'"):
            env.function_calls_action([{"id": "c0", "name": "cd", "arguments": bad}])


def _named(env: Any, call: Any) -> dict[str, Any]:
    """The call's arguments by name (BFCL's ground truth passes some positionally)."""
    methods = backend.public_methods(env.instances)
    bound = inspect.signature(getattr(env.instances[methods[call.name]], call.name)).bind(*call.args, **dict(call.kwargs))
    return dict(bound.arguments)


def _ground_truth_script(env: Any, entries: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """Per entry (keyed by its first user turn): the ground truth as assistant messages, one call each,
    and a message without calls at the end of every turn."""
    scripts = {}
    tasks = {t.task_id: t for t in env.tasks("test", len(entries))}
    for entry in entries:
        env.reset(tasks[entry.entry_id], 0)
        messages: list[dict[str, Any]] = []
        for turn, texts in enumerate(entry.ground_truth):
            for k, call in enumerate(c for text in texts for c in parse_calls(text, max_chars=100_000)):
                messages.append({"content": None, "tool_calls": [{
                    "id": f"call_{turn}_{k}", "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(_named(env, call))}}]})
            messages.append({"content": f"Request {turn + 1} is done."})
        scripts[entry.turns[0]] = messages
    return scripts


def _check_conversation(body: dict[str, Any]) -> None:
    """A function-calling conversation: tools offered, every tool call answered right after it, in order."""
    assert body["tools"] and "stop" not in body
    messages = body["messages"]
    assert messages[0]["role"] == "system" and "<action>" not in messages[0]["content"]
    for i, message in enumerate(messages):
        ids = [c["id"] for c in message.get("tool_calls") or []]
        if ids:
            answers = messages[i + 1 : i + 1 + len(ids)]
            assert [(m["role"], m["tool_call_id"]) for m in answers] == [("tool", c) for c in ids]


def test_arlkit_eval_plays_bfcl_with_native_tool_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env, entries = _entries(TASKS)
    scripts = _ground_truth_script(env, entries)
    seen: list[dict[str, Any]] = []

    def reply(body: dict[str, Any]) -> Any:
        seen.append(body)
        _check_conversation(body)
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        script = scripts[next(k for k in scripts if first.endswith(k))]
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return script[done] if done < len(script) else {"content": "nothing more"}

    with ScriptedServer(reply) as server:
        out = tmp_path / "native"
        code = main(["eval", "--env", "bfcl", "--policy", f"openai:scripted@{server.base_url}", "--tool-calls", "native",
                     "--split", "test", "--tasks", str(TASKS), "--samples", "1", "--budgets", "full", "--out", str(out)])
    assert code == 0
    trajectories = read_trajectories(out / "trajectories.jsonl")
    assert len(trajectories) == TASKS and all(t.success for t in trajectories)
    for t in trajectories:
        turns = t.turns
        assert all(turn.valid for turn in turns)
        assert [turn.action for turn in turns if (turn.details or {}).get("tool_calls") is None][-1] == f"{FINISH}()"
    assert len(seen) == sum(len(s) for s in scripts.values())
    assert "+native-tools" in (out / "run.json").read_text()
    # analyses that rebuild prompts refuse the run (they would replay it with text-mode prompts); flows read it
    capsys.readouterr()
    assert main(["analyze", "steps", "--base", "oracle", "--rl", "oracle", "--runs", str(out), "--out",
                 str(tmp_path / "steps")]) == 2
    assert "called tools natively" in capsys.readouterr().err
    assert main(["analyze", "flows", "--runs", str(out), "--out", str(tmp_path / "flows")]) == 0


def test_an_unreadable_tool_call_is_an_invalid_action_and_the_episode_goes_on(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> Any:
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if done == 0:
            return {"content": None, "tool_calls": [{"id": "x", "type": "function",
                                                    "function": {"name": "cd", "arguments": "{not json"}}]}
        return {"content": "stop"}

    with ScriptedServer(reply) as server:
        out = tmp_path / "bad"
        assert main(["eval", "--env", "bfcl", "--policy", f"openai:scripted@{server.base_url}", "--tool-calls", "native",
                     "--split", "test", "--tasks", "1", "--samples", "1", "--budgets", "full", "--out", str(out)]) == 0
    [trajectory] = read_trajectories(out / "trajectories.jsonl")
    first = trajectory.turns[0]
    assert not first.valid and "not JSON" in first.observation and len(trajectory.turns) >= 2


@pytest.mark.parametrize(("args", "message"), [
    (["--env", "bfcl", "--policy", "oracle", "--split", "test"], "policies that send tools"),
    (["--env", "frozenlake", "--policy", "openai:m@http://127.0.0.1:9/v1"], "has no function tools"),
    (["--env", "bfcl", "--policy", "oracle", "--split", "test", "--prompt-profile", "compact"], "rt profile"),
])
def test_native_tool_calls_that_cannot_run_are_one_line_errors(args: list[str], message: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", *args, "--tool-calls", "native", "--tasks", "1", "--samples", "1", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
