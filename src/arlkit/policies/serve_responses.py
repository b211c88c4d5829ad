"""A minimal ``POST /v1/responses`` (OpenAI's Responses API) for ``arlkit serve``
(:mod:`arlkit.policies.serve`): enough for clients that call the Responses API by default, such as
Inspect AI's ``openai/`` provider.

A request is read as a chat completion request and answered by the same sampler:

- ``instructions`` becomes a system message first; ``input`` is a string (one user message) or a list
  of items: messages (``role`` user, system, developer or assistant, content a string or text parts:
  ``input_text``, ``output_text``), ``function_call`` items (an assistant's tool calls) and
  ``function_call_output`` items (tool results). ``reasoning`` items are skipped (this server's models
  write none);
- ``tools`` are function tools (``{"type": "function", "name", "description", "parameters"}``), rendered
  by the chat template as in chat completions; ``tool_choice`` is ``auto``, ``none``, ``required`` or
  ``{"type": "function", "name": ...}``;
- ``max_output_tokens``, ``temperature``, ``top_p``, ``top_logprobs`` and, as extra fields, ``top_k`` and
  ``seed`` are the sampling options; ``include: ["message.output_text.logprobs"]`` returns log-probs;
- bookkeeping fields (``store``, ``metadata``, ``user``, ``service_tier``, ``prompt_cache_key``,
  ``safety_identifier``, ``parallel_tool_calls``), ``reasoning`` and ``text.verbosity`` change nothing
  here and are accepted; ``previous_response_id`` (the server stores no responses), ``background``, a
  ``text.format`` other than text, and built-in tools are refused with HTTP 400 naming the field;
- ``stream: true`` answers with the Responses API's server-sent events (:func:`response_events`),
  sent once the reply is generated.

The reply is a ``response`` object whose ``output`` holds a ``message`` item (an ``output_text`` part)
when the model wrote text, and one ``function_call`` item per tool call; ``status`` is ``incomplete``
with ``incomplete_details.reason`` ``max_output_tokens`` when the reply hit the cap."""

from __future__ import annotations

import uuid
from typing import Any

from arlkit.policies.serve_wire import BadRequest, check_fields

__all__ = ["chat_body", "response_events", "response_object"]

_FIELDS = frozenset({"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "temperature",
                     "top_p", "top_k", "seed", "top_logprobs", "include", "reasoning", "text", "truncation",
                     "background", "stream"})
_LOGPROBS = "message.output_text.logprobs"


def _content(content: Any, where: str) -> Any:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text", "refusal"):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise BadRequest(400, f"{where}[{k}]: only text parts are supported, got {kind!r}")
            parts.append({"type": "text", "text": str(part.get("text", part.get("refusal", "")))})
        return parts
    raise BadRequest(400, f"{where} must be a string or a list of text parts")


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise BadRequest(400, "instructions must be a string")
        messages.append({"role": "system", "content": instructions})
    raw = body.get("input")
    if isinstance(raw, str):
        return [*messages, {"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise BadRequest(400, "input must be a string or a non-empty list of items")
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise BadRequest(400, f"{where} must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            if item.get("role") not in ("user", "system", "developer", "assistant"):
                raise BadRequest(400, f"{where}.role must be user, system, developer or assistant")
            messages.append({"role": item["role"], "content": _content(item.get("content"), f"{where}.content")})
        elif kind == "function_call":
            if not isinstance(item.get("name"), str) or not isinstance(item.get("arguments", "{}"), str):
                raise BadRequest(400, f"{where}: a function_call needs a string name and arguments")
            call = {"id": str(item.get("call_id") or item.get("id") or ""), "type": "function",
                    "function": {"name": item["name"], "arguments": item.get("arguments", "{}")}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                             "content": _content(output if output is not None else "", f"{where}.output")})
        elif kind == "reasoning":
            continue
        else:
            raise BadRequest(400, f"{where}: input items of type {kind!r} are not supported (message, function_call, "
                                  "function_call_output, reasoning)")
    return messages


def _tools(raw: Any) -> list[dict[str, Any]] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise BadRequest(400, "tools must be a list of function tools")
    tools = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
            raise BadRequest(400, f"tools[{i}]: only function tools are supported, got {kind!r}")
        function = {k: tool[k] for k in ("name", "description", "parameters") if tool.get(k) is not None}
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(raw: Any) -> Any:
    if isinstance(raw, dict) and raw.get("type") == "function":
        return {"type": "function", "function": {"name": raw.get("name")}}
    return raw


def chat_body(body: Any) -> dict[str, Any]:
    """The chat completion request that answers the Responses API request ``body`` (raises
    :class:`BadRequest` naming what the server does not implement)."""
    body = check_fields(body, _FIELDS)
    if body.get("background"):
        raise BadRequest(400, "background: this server answers /v1/responses at once (send background: false)")
    if body.get("truncation") not in (None, "disabled"):
        raise BadRequest(400, f"truncation must be 'disabled' (this server never truncates), got {body['truncation']!r}")
    text = body.get("text") or {}
    text_format = text.get("format") if isinstance(text, dict) else None
    if not isinstance(text, dict) or (text_format is not None and text_format != {"type": "text"}):
        raise BadRequest(400, f"text.format: only {{'type': 'text'}} is supported, got {text_format!r}")
    include = body.get("include") or []
    if not isinstance(include, list):
        raise BadRequest(400, "include must be a list of strings")
    logprobs = _LOGPROBS in include or bool(body.get("top_logprobs"))
    chat: dict[str, Any] = {"model": body.get("model"), "messages": _messages(body), "logprobs": logprobs}
    for source, target in (("max_output_tokens", "max_tokens"), ("temperature", "temperature"), ("top_p", "top_p"),
                           ("top_k", "top_k"), ("seed", "seed"), ("top_logprobs", "top_logprobs")):
        if body.get(source) is not None:
            chat[target] = body[source]
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        if body.get("tool_choice") is not None:
            chat["tool_choice"] = _tool_choice(body["tool_choice"])
    return chat


def response_object(completion: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The Responses API ``response`` object of a chat ``completion`` (one choice) answering ``body``."""
    choice = completion["choices"][0]
    message = choice["message"]
    output: list[dict[str, Any]] = []
    calls = message.get("tool_calls") or []
    if message.get("content") or not calls:
        part: dict[str, Any] = {"type": "output_text", "text": message.get("content") or "", "annotations": []}
        part["logprobs"] = (choice.get("logprobs") or {}).get("content") or []
        output.append({"type": "message", "id": f"msg_{uuid.uuid4().hex}", "status": "completed", "role": "assistant",
                       "content": [part]})
    for call in calls:
        output.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": call["id"],
                       "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                       "status": "completed"})
    incomplete = choice["finish_reason"] == "length"
    usage = completion["usage"]
    return {
        "id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": completion["created"],
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None, "model": completion["model"], "instructions": body.get("instructions"), "output": output,
        "parallel_tool_calls": True, "tool_choice": body.get("tool_choice") or "auto", "tools": body.get("tools") or [],
        "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"), "previous_response_id": None, "reasoning": None,
        "store": False, "text": {"format": {"type": "text"}}, "truncation": "disabled",
        "metadata": body.get("metadata") or {}, "user": body.get("user"),
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                  "total_tokens": usage["total_tokens"], "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }


def response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events of ``response`` (``stream: true``): ``response.created``, per output item
    its ``added`` event, its text (or arguments) as one delta and a ``done`` event, then
    ``response.completed`` (``response.incomplete`` when the reply hit the cap) with the whole response."""
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    emit("response.created", response={**response, "status": "in_progress", "output": [], "incomplete_details": None})
    for index, item in enumerate(response["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            emit("response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []})
            for k, part in enumerate(item["content"]):
                emit("response.content_part.added", **at, content_index=k, part={**part, "text": "", "logprobs": []})
                emit("response.output_text.delta", **at, content_index=k, delta=part["text"], logprobs=part["logprobs"])
                emit("response.output_text.done", **at, content_index=k, text=part["text"], logprobs=part["logprobs"])
                emit("response.content_part.done", **at, content_index=k, part=part)
        else:
            emit("response.output_item.added", output_index=index, item={**item, "status": "in_progress", "arguments": ""})
            emit("response.function_call_arguments.delta", **at, delta=item["arguments"])
            emit("response.function_call_arguments.done", **at, name=item["name"], arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed" if response["status"] == "completed" else "response.incomplete", response=response)
    return events
