"""A verifiers task's tools, run in this process for text-form tool calls.

verifiers serves a task's ``Toolset``s (``Task.toolsets`` per rollout, ``Taskset.toolsets``
shared) as MCP servers to the agent's program. Under arlkit the model's reply carries the calls
as text, ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the Hermes/Qwen form),
and :class:`ToolBox` runs the toolsets' own ``@vf.tool`` methods here, after their ``setup``
(and ``setup_task`` for per-rollout servers), with the rollout's trace state as their
``self.state``. Tool names are qualified as verifiers' harnesses qualify them:
``<server>_<tool>`` (``calculator_multiply``).
"""

from __future__ import annotations

import inspect
import json
import re
import uuid
from typing import Any

__all__ = ["ToolBox"]

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_RESULT_LIMIT = 20_000


class ToolBox:
    """The tools of one task (module docstring)."""

    def __init__(self, per_task: list[Any], shared: list[Any]) -> None:
        from verifiers.v1.utils.decorators import discover_decorated

        self.per_task, self.shared = per_task, shared
        self.tools: dict[str, tuple[Any, Any]] = {}
        for server in [*per_task, *shared]:
            for fn in discover_decorated(server, "tool"):
                tool = getattr(fn, "tool_name", None) or fn.__name__
                name = f"{server.server_name}_{tool}" if server.server_name else tool
                self.tools[name] = (server, fn)

    @classmethod
    def for_task(cls, vf_env: Any, task: Any) -> ToolBox:
        taskset = vf_env.taskset
        return cls(list(type(task).toolsets(task.config)), list(type(taskset).toolsets(taskset.config)))

    def __bool__(self) -> bool:
        return bool(self.tools)

    async def open(self, task: Any) -> None:
        for server in [*self.per_task, *self.shared]:
            await server.setup()
        for server in self.per_task:
            await server.setup_task(task)

    async def close(self) -> None:
        for server in [*self.per_task, *self.shared]:
            await server._exit_stack.aclose()

    def describe(self) -> str:
        """The tools and how to call them, for the prompt's action format."""
        lines = ["You can call tools: write <tool_call>{\"name\": NAME, \"arguments\": {...}}</tool_call> (one or "
                 "more per reply); their results come back as the next observation. A reply without a tool call "
                 "is your answer. The tools:"]
        for name, (_, fn) in self.tools.items():
            params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
            signature = ", ".join(f"{p.name}: {getattr(p.annotation, '__name__', p.annotation)}"
                                  if p.annotation is not inspect.Parameter.empty else p.name for p in params)
            doc = " ".join((fn.__doc__ or "").split())
            lines.append(f"- {name}({signature}){': ' + doc if doc else ''}")
        return "\n".join(lines)

    def calls(self, text: str) -> list[tuple[str, str, str]]:
        """The tool calls in ``text``: ``(id, name, raw arguments)`` each."""
        found = []
        for block in TOOL_CALL.findall(text or ""):
            try:
                call = json.loads(block)
            except json.JSONDecodeError:
                call = {"name": "", "arguments": block}
            if not isinstance(call, dict):
                call = {"name": "", "arguments": block}
            arguments = call.get("arguments", {})
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            found.append((f"call_{uuid.uuid4().hex[:12]}", str(call.get("name", "")), raw))
        return found

    async def call(self, name: str, raw_arguments: str, state: Any) -> str:
        """Run one call; a bad call or a raising tool is an error text the model reads, as
        verifiers' harnesses report it."""
        from verifiers.v1.mcp.server import _call_state

        if name not in self.tools:
            return f"Error: unknown tool {name!r}; the tools are: {', '.join(self.tools)}"
        try:
            arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return f"Error: the arguments of {name} are not JSON ({exc.msg})"
        if not isinstance(arguments, dict):
            return f"Error: the arguments of {name} must be a JSON object"
        _, fn = self.tools[name]
        token = _call_state.set(state)
        try:
            result = fn(**arguments)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:  # noqa: BLE001 - the tool's error is the model's to read
            return f"Error: {name} raised {type(exc).__name__}: {' '.join(str(exc).split())[:500]}"
        finally:
            _call_state.reset(token)
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        return text[:_RESULT_LIMIT]
