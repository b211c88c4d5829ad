"""The HTTP side of ``arlkit serve`` (:mod:`arlkit.policies.serve`) for chat completions: request
bodies checked into :class:`ChatRequest` (the conversation rendered into token ids with its tools),
replies written as chat completions or server-sent event chunks (token bytes and tool calls
included). Shared here: :class:`BadRequest`, body parsing, the check of fields a route implements and
of the fields that ask for nothing. Completions are :mod:`arlkit.policies.serve_completions`, the
Responses API :mod:`arlkit.policies.serve_responses`, the routes :mod:`arlkit.policies.serve_app`."""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request as StarletteRequest

from arlkit.policies.protocol import Reply
from arlkit.policies.registry import SamplingConfig
from arlkit.policies.serve_tools import PromptRenderer, ToolCall, parse_tool_choice, parse_tools, read_tool_calls

if TYPE_CHECKING:
    from arlkit.policies.hf import HFPolicy

__all__ = [
    "IGNORED_FIELDS", "MAX_BODY", "MAX_CHOICES", "MAX_DEPTH", "BadRequest", "ChatRequest", "chat_response", "check_fields",
    "finished_text", "parse_body", "parse_chat", "parse_messages", "parse_stop", "read_body", "render_chat", "sampling_options",
    "stream_chunks", "token_bytes",
]

MAX_BODY = 16 * 2**20
"""Bytes a request body may have (413 beyond)."""
MAX_DEPTH = 32
"""Nesting levels of arrays and objects a request body may have (a chat request with tools needs about 8)."""
MAX_CHOICES = 128
"""Most choices (``n``) one request may ask for: its rows are sampled in batches of the policy's
``max_batch_size``, so memory is bounded by the batch, and the reply holds at most this many texts."""
_MAX_TOP_LOGPROBS = 20
_FIELDS = frozenset({"model", "messages", "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens",
                     "stop", "seed", "logprobs", "top_logprobs", "n", "stream", "stream_options", "tools", "tool_choice"})
"""Chat request fields the server implements; any other is refused with 400 unless it asks for nothing."""
IGNORED_FIELDS = frozenset({"user", "metadata", "store", "service_tier", "parallel_tool_calls", "prompt_cache_key",
                            "prompt_cache_retention", "safety_identifier", "reasoning_effort", "verbosity"})
"""Fields accepted with any value because they change no reply of this server: bookkeeping (``user``,
``metadata``, ``store``, ``service_tier``, cache keys), ``parallel_tool_calls`` (every call the model
writes is returned), ``reasoning_effort`` and ``verbosity`` (the model has no reasoning mode to set)."""
_NEUTRAL: dict[str, Any] = {"presence_penalty": 0, "frequency_penalty": 0, "repetition_penalty": 1, "logit_bias": {},
                            "modalities": ["text"], "response_format": {"type": "text"}, "min_p": 0}
"""Fields the server does not implement, with the value that asks for nothing (accepted)."""


class BadRequest(Exception):
    """A request the server refuses: its HTTP status, message and OpenAI error code."""

    def __init__(self, status: int, message: str, code: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth_exceeds(value: Any, limit: int) -> bool:
    """``value`` (parsed JSON) nests arrays and objects more than ``limit`` levels deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if level > limit:
            return True
        stack.extend((child, level + 1) for child in children)
    return False


def parse_body(raw: bytes) -> Any:
    """The JSON of a request body, refused with a 400 naming the problem when it is not JSON, holds
    ``NaN`` or ``Infinity`` (not JSON, though Python's parser takes them), or nests deeper than
    :data:`MAX_DEPTH`."""
    try:
        body = json.loads(raw or b"null", parse_constant=_refuse_constant)
    except RecursionError:
        raise BadRequest(400, f"the body nests arrays and objects more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        detail = str(exc) if "JSON number" in str(exc) else "not valid JSON"
        raise BadRequest(400, f"the body is not valid JSON ({detail})") from None
    if _depth_exceeds(body, MAX_DEPTH):
        raise BadRequest(400, f"the body nests arrays and objects more than {MAX_DEPTH} levels deep")
    return body


async def read_body(request: StarletteRequest) -> bytes:
    """The request's body, read no further than :data:`MAX_BODY` bytes (413 beyond, declared or sent)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise BadRequest(413, f"the request body is larger than {MAX_BODY} bytes")
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise BadRequest(413, f"the request body is larger than {MAX_BODY} bytes")
        parts.append(chunk)
    return b"".join(parts)


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, a list of text parts (joined), or null (empty)."""
    if content is None:
        return ""
    if isinstance(content, list):
        if not all(isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
                   and isinstance(p.get("text"), str) for p in content):
            raise BadRequest(400, f"{where}: only text parts are supported")
        return "".join(p["text"] for p in content)
    if not isinstance(content, str):
        raise BadRequest(400, f"{where} must be a string, a list of text parts, or null")
    return content


def _call_entry(call: Any, where: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise BadRequest(400, f"{where} must be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", \"arguments\"}}}}")
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str | dict):
        raise BadRequest(400, f"{where}.function.arguments must be a JSON string")
    return {"id": str(call.get("id") or ""), "type": "function",
            "function": {"name": function["name"], "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}


def parse_messages(raw: Any) -> list[dict[str, Any]]:
    """The conversation as the chat template takes it: ``{role, content}`` with string content (text
    parts joined, null empty), assistant ``tool_calls`` and tool results (``role: "tool"``) kept,
    ``developer`` read as ``system``; other parts are refused."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest(400, "messages must be a non-empty list of {role, content} objects")
    out = []
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(400, f"messages[{i}] must be an object with a string role")
        role = "system" if message["role"] == "developer" else message["role"]
        entry: dict[str, Any] = {"role": role, "content": _text(message.get("content"), f"messages[{i}].content")}
        calls = message.get("tool_calls")
        if calls:
            if role != "assistant" or not isinstance(calls, list):
                raise BadRequest(400, f"messages[{i}].tool_calls must be a list, on an assistant message")
            entry["tool_calls"] = [_call_entry(c, f"messages[{i}].tool_calls[{k}]") for k, c in enumerate(calls)]
        if role == "tool":
            entry["tool_call_id"] = str(message.get("tool_call_id") or "")
            if isinstance(message.get("name"), str):
                entry["name"] = message["name"]
        out.append(entry)
    return out


def check_fields(body: Any, implemented: frozenset[str]) -> dict[str, Any]:
    """``body`` as an object whose fields are implemented, ignored (:data:`IGNORED_FIELDS`) or ask for
    nothing; a 400 names the others and lists what the route supports."""
    if not isinstance(body, dict):
        raise BadRequest(400, "the body must be a JSON object")
    unsupported = sorted(k for k, v in body.items() if k not in implemented and k not in IGNORED_FIELDS
                         and not _is_default(k, v))
    if unsupported:
        raise BadRequest(400, f"unsupported field(s) or value(s): {', '.join(f'{k}={body[k]!r}'[:80] for k in unsupported)}; "
                              f"this server implements {', '.join(sorted(implemented))} (and accepts "
                              f"{', '.join(f'{k}={v!r}' for k, v in _NEUTRAL.items())})")
    return body


def sampling_options(body: dict[str, Any], limit: Any, *, zero_ok: bool = False) -> tuple[SamplingConfig, int, int]:
    """``(sampling, seed, n)`` of a request body whose reply cap is ``limit`` (``zero_ok``: 0 tokens
    allowed); no seed draws a fresh one, so unseeded requests are independent samples."""
    n = body.get("n", 1)
    if n is None:
        n = 1
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_CHOICES:
        raise BadRequest(400, f"n must be an integer from 1 to {MAX_CHOICES} (the most choices one request may "
                              f"ask for), got {n!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < (0 if zero_ok else 1):
        raise BadRequest(400, f"max_tokens / max_completion_tokens must be an integer >= {0 if zero_ok else 1}, got {limit!r}")
    try:
        temperature = body.get("temperature")
        top_p = body.get("top_p")
        sampling = SamplingConfig(
            temperature=float(1.0 if temperature is None else temperature),
            top_p=float(1.0 if top_p is None else top_p),
            top_k=int(body.get("top_k", 0) or 0),
            max_new_tokens=max(1, int(limit)),
        )
        seed = int(body["seed"]) if body.get("seed") is not None else secrets.randbits(62)
    except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: int() of an infinity
        raise BadRequest(400, f"invalid sampling option: {exc}") from None
    return sampling, seed, n


def parse_stop(raw: Any) -> tuple[str, ...]:
    stop = raw or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest(400, "stop must be a string or a list of strings")
    return tuple(stop)


@dataclass(frozen=True)
class ChatRequest:
    """A chat completion request, checked; ``prompt`` holds the conversation's token ids (tools included)
    and ``tool_names`` the functions whose calls the reply is read for (empty: tools not offered)."""

    messages: list[dict[str, Any]]
    prompt: tuple[int, ...]
    seed: int
    sampling: SamplingConfig
    stop: tuple[str, ...]
    logprobs: bool
    top_logprobs: int
    n: int
    stream: bool
    include_usage: bool
    tool_names: tuple[str, ...] = ()


def _is_default(key: str, value: Any) -> bool:
    """A field this server does not implement, sent with the value that asks for nothing."""
    return value is None or value is False or (key in _NEUTRAL and value == _NEUTRAL[key])


def render_chat(renderer: PromptRenderer, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
    """Token ids of ``messages`` with ``tools`` (a template that fails on them is the request's fault: 400)."""
    try:
        ids = renderer.chat_ids(messages, tools)
    except Exception as exc:  # noqa: BLE001 - the template's error names the problem
        raise BadRequest(400, f"the chat template cannot render these messages: {type(exc).__name__}: {exc}") from None
    if not ids:
        raise BadRequest(400, "the chat template rendered an empty prompt")
    return ids


def parse_chat(body: Any, model_name: str, max_new_tokens: int | None, renderer: PromptRenderer) -> ChatRequest:
    """``body`` checked as a chat completion request for model ``model_name`` (``max_new_tokens``:
    the reply cap when the body sets none), its prompt rendered by ``renderer``; raises
    :class:`BadRequest` naming the problem."""
    body = check_fields(body, _FIELDS)
    if body.get("model") != model_name:
        raise BadRequest(404, f"The model {body.get('model')!r} does not exist", "model_not_found")
    messages = parse_messages(body.get("messages"))
    try:
        tools = parse_tools(body.get("tools"))
        choice = parse_tool_choice(body.get("tool_choice"), tools)
    except ValueError as exc:
        raise BadRequest(400, str(exc)) from None
    if choice == "none":
        tools = []  # "none": the model is not told about the tools
    stop = parse_stop(body.get("stop"))
    limit: Any = body.get("max_completion_tokens", body.get("max_tokens"))
    sampling, seed, n = sampling_options(body, max_new_tokens if limit is None else limit)
    top = body.get("top_logprobs") or 0
    if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= _MAX_TOP_LOGPROBS:
        raise BadRequest(400, f"top_logprobs must be an integer from 0 to {_MAX_TOP_LOGPROBS}, got {top!r}")
    if top and not body.get("logprobs"):
        raise BadRequest(400, "top_logprobs needs logprobs: true")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict) or set(options) - {"include_usage", "continuous_usage_stats"}:
        raise BadRequest(400, f"stream_options supports include_usage only, got {options!r}")
    prompt = render_chat(renderer, messages, tools)
    return ChatRequest(messages, tuple(prompt), seed, sampling, stop, bool(body.get("logprobs")), int(top), n,
                       bool(body.get("stream")), bool(options.get("include_usage")) and bool(body.get("stream")),
                       tuple(t["function"]["name"] for t in tools))


def _byte_alphabet() -> dict[str, int]:
    """Byte-level BPE's printable stand-ins for the 256 bytes (GPT-2's scheme): printable Latin-1
    bytes stand for themselves, the others for code points from 256 up, in byte order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    alphabet, extra = {}, 0
    for byte in range(256):
        if byte in kept:
            alphabet[chr(byte)] = byte
        else:
            alphabet[chr(256 + extra)] = byte
            extra += 1
    return alphabet


_BYTE_ALPHABET = _byte_alphabet()


def token_bytes(tokenizer: Any, token: int) -> bytes:
    """The bytes token ``token`` stands for: exact for byte-level BPE tokenizers (a token inside a
    UTF-8 character gives its own bytes), else the UTF-8 of its decoded text."""
    piece = tokenizer.convert_ids_to_tokens(int(token))
    if isinstance(piece, str) and piece and all(ch in _BYTE_ALPHABET for ch in piece):
        return bytes(_BYTE_ALPHABET[ch] for ch in piece)
    return tokenizer.decode([int(token)]).encode("utf-8")


# -- replies -----------------------------------------------------------------------------------


def _token_entry(policy: HFPolicy, token: int, logprob: float) -> dict[str, Any]:
    raw = token_bytes(policy.tokenizer, token)  # a probability of 0 is floored at -9999 (vLLM's floor): valid JSON
    return {"token": raw.decode("utf-8", errors="replace"), "logprob": max(float(logprob), -9999.0), "bytes": list(raw)}


def finished_text(policy: HFPolicy, reply: Reply, stop: Sequence[str]) -> tuple[str, bool, list[int], list[float], list[Any]]:
    """``(text, stopped, token ids, logprobs, top logprobs)`` of a reply: the text cut before the first
    stop string it holds, whether it ended (end-of-turn token or stop string), and the per-token data
    with an end-of-turn token left out."""
    ids = list(reply.token_ids or ())
    lps = list(reply.logprobs or ())
    tops = list((reply.details or {}).get("top_logprobs") or [])
    ended = bool(ids) and ids[-1] in policy.eos_ids
    if ended:
        ids, lps, tops = ids[:-1], lps[:-1], tops[:-1]
    text = reply.text
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    if cut >= 0:
        text = text[:cut]
    return text, ended or cut >= 0, ids, lps, tops


def _choice(policy: HFPolicy, index: int, reply: Reply, chat: ChatRequest) -> dict[str, Any]:
    text, stopped, ids, lps, tops = finished_text(policy, reply, chat.stop)
    content: str | None = text
    calls: list[ToolCall] = []
    if chat.tool_names:
        content, calls = read_tool_calls(text, chat.tool_names)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [c.openai() for c in calls]
    choice: dict[str, Any] = {
        "index": index,
        "message": message,
        "finish_reason": "tool_calls" if calls else "stop" if stopped else "length",
        "logprobs": None,
    }
    if chat.logprobs:
        entries = []
        for k, (token, lp) in enumerate(zip(ids, lps, strict=True)):
            alternatives = tops[k] if k < len(tops) else []
            entries.append({**_token_entry(policy, token, lp),
                            "top_logprobs": [_token_entry(policy, t, v) for t, v in alternatives[: chat.top_logprobs]]})
        choice["logprobs"] = {"content": entries}
    return choice


def chat_response(policy: HFPolicy, model_name: str, replies: Sequence[Reply], chat: ChatRequest) -> dict[str, Any]:
    """The chat completion object of ``chat``'s ``replies`` (the matched stop string cut off, an
    end-of-turn token left out of the log-probs, the tool calls of the reply as ``tool_calls``)."""
    prompt_tokens = len(chat.prompt)
    completion = sum(len(r.token_ids or ()) for r in replies)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [_choice(policy, i, r, chat) for i, r in enumerate(replies)],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                  "total_tokens": prompt_tokens + completion},
    }


def _pieces(policy: HFPolicy, reply: Reply, content: str) -> list[str]:
    """One piece of ``content`` per generated token (an end-of-turn token excluded): the text that
    token completes (empty for a token inside a UTF-8 character, or past a stop string)."""
    ids = list(reply.token_ids or ())
    if ids and ids[-1] in policy.eos_ids:
        ids = ids[:-1]
    pieces, done = [], 0
    for k in range(1, len(ids) + 1):
        text = policy.tokenizer.decode(ids[:k], skip_special_tokens=True)
        end = done if text.endswith("\ufffd") else min(len(text), len(content))
        pieces.append(content[done:end] if end > done else "")
        done = max(done, end)
    if not pieces:
        return [content]
    pieces[-1] += content[done:]
    return pieces


def stream_chunks(policy: HFPolicy, model_name: str, replies: Sequence[Reply], chat: ChatRequest) -> list[dict[str, Any]]:
    """The server-sent event chunks of ``chat``'s replies: per choice a role chunk, one content chunk
    per token (a reply with tool calls: one chunk with its other text, then one per call), a chunk with
    the ``finish_reason``; then a usage chunk when asked for."""
    full = chat_response(policy, model_name, replies, chat)
    head = {"id": full["id"], "object": "chat.completion.chunk", "created": full["created"], "model": model_name}
    chunks: list[dict[str, Any]] = []

    def chunk(index: int, delta: dict[str, Any], logprobs: Any = None, finish: str | None = None) -> None:
        chunks.append({**head, "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]})

    for choice in full["choices"]:
        index, message = choice["index"], choice["message"]
        chunk(index, {"role": "assistant", "content": ""})
        entries = (choice["logprobs"] or {}).get("content") or []
        if message.get("tool_calls"):
            if message["content"]:
                chunk(index, {"content": message["content"]})
            for k, call in enumerate(message["tool_calls"]):
                chunk(index, {"tool_calls": [{"index": k, **call}]})
            if entries:
                chunk(index, {}, {"content": entries})
        else:
            for k, piece in enumerate(_pieces(policy, replies[index], message["content"])):
                chunk(index, {"content": piece}, {"content": [entries[k]]} if chat.logprobs and k < len(entries) else None)
        chunk(index, {}, None, choice["finish_reason"])
    if chat.include_usage:
        chunks.append({**head, "choices": [], "usage": full["usage"]})
    return chunks
