"""Prompts and tool calls of ``arlkit serve`` (:mod:`arlkit.policies.serve`): conversations rendered
into token ids with the tokenizer's chat template (tools included), raw completion prompts tokenized,
and the tool calls of a reply read from the model's text.

Tools go through the model's own chat template (``apply_chat_template(tools=...)``). A template that
ignores tools (it renders the same prompt with and without them, as arlkit's tiny models' does) is
replaced, for requests with tools or tool messages only, by :data:`CHATML_TOOL_TEMPLATE`: ChatML with
the tools listed in the system turn and calls written as ``<tool_call>{"name": ..., "arguments":
...}</tool_call>``, the format Qwen and Hermes models use. A reply's tool calls are read in that
format: each ``<tool_call>`` block holding a JSON object with a ``name`` among the offered tools
becomes an OpenAI tool call; anything else stays text. The reply is model output and untrusted: a
malformed block is left in the text, never raised."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CHATML_TOOL_TEMPLATE", "PromptRenderer", "ToolCall", "parse_tool_choice", "parse_tools", "read_tool_calls"]

CHATML_TOOL_TEMPLATE = (
    "{%- if tools -%}"
    "{{ '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0]['role'] == 'system' -%}{{ (messages[0]['content'] or '') + '\\n\\n' }}{%- endif -%}"
    "{{ 'You can call functions. Their signatures, one JSON object a line:\\n<tools>' }}"
    "{%- for tool in tools -%}{{ '\\n' + (tool | tojson) }}{%- endfor -%}"
    "{{ '\\n</tools>\\nTo call a function, write one block per call:\\n<tool_call>\\n"
    "{\\\"name\\\": \\\"function name\\\", \\\"arguments\\\": {\\\"argument\\\": \\\"value\\\"}}\\n</tool_call><|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if not (tools and loop.first and message['role'] == 'system') -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') }}"
    "{%- for call in (message['tool_calls'] if message['tool_calls'] is defined and message['tool_calls'] else []) -%}"
    "{%- set args = call['function']['arguments'] -%}"
    "{{ '<tool_call>\\n{\\\"name\\\": ' + (call['function']['name'] | tojson) + ', \\\"arguments\\\": ' }}"
    "{{- args if args is string else (args | tojson) -}}"
    "{{ '}\\n</tool_call>' }}"
    "{%- endfor -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)
"""The ChatML tool template used when the tokenizer's own template ignores tools."""

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_TOOL_CHOICES = ("auto", "none", "required")


@dataclass(frozen=True)
class ToolCall:
    """One call the model wrote: an OpenAI-style id, the function's name, its arguments as a JSON string."""

    id: str
    name: str
    arguments: str

    def openai(self) -> dict[str, Any]:
        """The call as a chat completion's ``tool_calls`` entry."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def parse_tools(raw: Any, where: str = "tools") -> list[dict[str, Any]]:
    """``raw`` checked as OpenAI chat ``tools`` (function tools only), as the chat template takes them."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"{where} must be a list of function tools")
    tools = []
    for i, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise ValueError(f"{where}[{i}] must be {{\"type\": \"function\", \"function\": {{...}}}} "
                             "(this server supports function tools only)")
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise ValueError(f"{where}[{i}].function.name must be a non-empty string")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise ValueError(f"{where}[{i}].function.parameters must be a JSON Schema object")
        entry = {"name": function["name"], "parameters": parameters}
        if isinstance(function.get("description"), str):
            entry["description"] = function["description"]
        tools.append({"type": "function", "function": entry})
    return tools


def parse_tool_choice(raw: Any, tools: Sequence[dict[str, Any]]) -> str | None:
    """``raw`` checked as ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` or the named function's
    name (``None``: no tools offered)."""
    if raw is None:
        raw = "auto"
    names = [t["function"]["name"] for t in tools]
    if isinstance(raw, dict):
        function = raw.get("function") if isinstance(raw.get("function"), dict) else raw
        name = function.get("name") if raw.get("type") == "function" else None
        if not isinstance(name, str):
            raise ValueError("tool_choice must be one of auto, none, required, or {\"type\": \"function\", "
                             "\"function\": {\"name\": ...}}")
        if name not in names:
            raise ValueError(f"tool_choice names {name!r}, which is not among the tools ({', '.join(names) or 'none'})")
        return name
    if raw not in _TOOL_CHOICES:
        raise ValueError(f"tool_choice must be one of {', '.join(_TOOL_CHOICES)} or a named function, got {raw!r}")
    if raw != "none" and raw != "auto" and not tools:
        raise ValueError(f"tool_choice {raw!r} needs tools")
    return raw if tools else None


def read_tool_calls(text: str, names: Sequence[str]) -> tuple[str | None, list[ToolCall]]:
    """The reply's content without its tool calls (``None`` when nothing else is left) and the calls:
    each ``<tool_call>`` block holding a JSON object whose ``name`` is among ``names`` and whose
    ``arguments`` is an object (or a JSON string of one). Other blocks stay in the content."""
    calls: list[ToolCall] = []

    def take(match: re.Match[str]) -> str:
        call = _read_call(match.group(1), names)
        if call is None:
            return match.group(0)
        calls.append(call)
        return ""

    rest = _CALL.sub(take, text)
    if not calls:
        return text, []
    rest = rest.strip()
    return (rest or None), calls


def _read_call(body: str, names: Sequence[str]) -> ToolCall | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(f"call_{uuid.uuid4().hex[:24]}", str(value["name"]), json.dumps(arguments, ensure_ascii=False))


class PromptRenderer:
    """Token ids of the server's prompts for one tokenizer: chat conversations (with tools, through the
    chat template) and raw completion prompts."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.template_renders_tools = self._renders_tools()
        """Whether the tokenizer's own chat template renders tools (else :data:`CHATML_TOOL_TEMPLATE` does)."""

    def _renders_tools(self) -> bool:
        probe = [{"role": "user", "content": "hi"}]
        tool = {"type": "function", "function": {"name": "probe_tool_x", "parameters": {"type": "object"}}}
        try:
            with_tools = self._render(probe, [tool], None)
            return with_tools != self._render(probe, None, None)
        except Exception:  # noqa: BLE001 - a template that fails on tools does not render them
            return False

    def _render(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
                template: str | None) -> str:
        kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": True}
        if tools:
            kwargs["tools"] = list(tools)
        if template is not None:
            kwargs["chat_template"] = template
        return str(self.tokenizer.apply_chat_template([dict(m) for m in messages], **kwargs))

    def chat_ids(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> list[int]:
        """Token ids of ``messages`` (and ``tools``, when offered) rendered for the assistant's reply,
        the way the ``hf`` backend renders prompts (template text, then tokens without added special ones)."""
        uses_tools = bool(tools) or any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)
        template = None if self.template_renders_tools or not uses_tools else CHATML_TOOL_TEMPLATE
        text = self._render(messages, tools, template)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def text_ids(self, prompt: str) -> list[int]:
        """Token ids of a completion prompt, special tokens added as the tokenizer adds them (as vLLM does)."""
        return list(self.tokenizer(prompt)["input_ids"])
