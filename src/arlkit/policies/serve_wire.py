"""The HTTP side of ``arlkit serve`` (:mod:`arlkit.policies.serve`): request bodies checked into
:class:`ChatRequest`, replies written as chat completions or server-sent event chunks (token bytes
included), and the Starlette application (routes, errors) around the server object. The sampling
side is :mod:`arlkit.policies.serve_sampler`."""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from arlkit.policies.protocol import Reply, Request
from arlkit.policies.registry import SamplingConfig

if TYPE_CHECKING:
    from arlkit.policies.hf import HFPolicy

__all__ = [
    "MAX_BODY", "MAX_DEPTH", "BadRequest", "ChatRequest", "build_app", "chat_response", "parse_body", "parse_chat",
    "parse_messages", "stream_chunks", "token_bytes",
]

MAX_BODY = 16 * 2**20
"""Bytes a request body may have (413 beyond)."""
MAX_DEPTH = 32
"""Nesting levels of arrays and objects a request body may have (a chat request needs 5)."""
_MAX_CHOICES = 16
_MAX_TOP_LOGPROBS = 20
_FIELDS = frozenset({"model", "messages", "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens",
                     "stop", "seed", "logprobs", "top_logprobs", "n", "user", "stream", "stream_options"})
"""Request fields the server implements; any other is refused with 400 unless it asks for nothing."""
_NEUTRAL: dict[str, Any] = {"presence_penalty": 0, "frequency_penalty": 0, "tools": [], "parallel_tool_calls": True}


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


async def _read_body(request: StarletteRequest) -> bytes:
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


def parse_messages(raw: Any) -> list[dict[str, str]]:
    """The conversation as ``{role, content}`` with string content: text parts are joined, a null
    content is empty; tool calls and other parts are refused."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest(400, "messages must be a non-empty list of {role, content} objects")
    out = []
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(400, f"messages[{i}] must be an object with a string role")
        if message.get("tool_calls") or message.get("role") == "tool":
            raise BadRequest(400, f"messages[{i}]: tool calls and tool results are not supported by this server")
        content = message.get("content")
        if content is None:
            content = ""
        elif isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
                raise BadRequest(400, f"messages[{i}].content: only text parts are supported")
            content = "".join(p["text"] for p in content)
        elif not isinstance(content, str):
            raise BadRequest(400, f"messages[{i}].content must be a string, a list of text parts, or null")
        out.append({"role": message["role"], "content": content})
    return out


@dataclass(frozen=True)
class ChatRequest:
    """A chat completion request, checked."""

    request: Request
    sampling: SamplingConfig
    stop: tuple[str, ...]
    logprobs: bool
    top_logprobs: int
    n: int
    stream: bool
    include_usage: bool


def _is_default(key: str, value: Any) -> bool:
    """A field this server does not implement, sent with the value that asks for nothing."""
    return value is None or value is False or (key in _NEUTRAL and value == _NEUTRAL[key])


def parse_chat(body: Any, model_name: str, max_new_tokens: int | None) -> ChatRequest:
    """``body`` checked as a chat completion request for model ``model_name`` (``max_new_tokens``:
    the reply cap when the body sets none); raises :class:`BadRequest` naming the problem."""
    if not isinstance(body, dict):
        raise BadRequest(400, "the body must be a JSON object")
    unsupported = sorted(k for k, v in body.items() if k not in _FIELDS and not _is_default(k, v))
    if unsupported:
        raise BadRequest(400, f"unsupported field(s): {', '.join(unsupported)}; this server supports "
                               f"{', '.join(sorted(_FIELDS))}")
    if body.get("model") != model_name:
        raise BadRequest(404, f"The model {body.get('model')!r} does not exist", "model_not_found")
    messages = parse_messages(body.get("messages"))
    n = body.get("n", 1)
    if n is None:
        n = 1
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= _MAX_CHOICES:
        raise BadRequest(400, f"n must be an integer from 1 to {_MAX_CHOICES}, got {n!r}")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest(400, "stop must be a string or a list of strings")
    limit: Any = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is None:
        limit = max_new_tokens
    elif isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise BadRequest(400, f"max_tokens / max_completion_tokens must be an integer >= 1, got {limit!r}")
    top = body.get("top_logprobs") or 0
    if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= _MAX_TOP_LOGPROBS:
        raise BadRequest(400, f"top_logprobs must be an integer from 0 to {_MAX_TOP_LOGPROBS}, got {top!r}")
    if top and not body.get("logprobs"):
        raise BadRequest(400, "top_logprobs needs logprobs: true")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict) or set(options) - {"include_usage"}:
        raise BadRequest(400, f"stream_options supports include_usage only, got {options!r}")
    if options and not body.get("stream"):
        raise BadRequest(400, "stream_options needs stream: true")
    try:
        sampling = SamplingConfig(
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            top_k=int(body.get("top_k", 0) or 0),
            max_new_tokens=int(limit),
        )
        # no seed: a fresh one, so unseeded requests are independent samples (not all seed 0)
        seed = int(body["seed"]) if body.get("seed") is not None else secrets.randbits(62)
    except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: int() of an infinity
        raise BadRequest(400, f"invalid sampling option: {exc}") from None
    return ChatRequest(Request(messages=messages, seed=seed, turn=0), sampling, tuple(stop), bool(body.get("logprobs")),
                       int(top), n, bool(body.get("stream")), bool(options.get("include_usage")))


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
    raw = token_bytes(policy.tokenizer, token)
    return {"token": raw.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(raw)}


def _choice(policy: HFPolicy, index: int, reply: Reply, chat: ChatRequest) -> dict[str, Any]:
    ids = list(reply.token_ids or ())
    lps = list(reply.logprobs or ())
    tops = list((reply.details or {}).get("top_logprobs") or [])
    ended = bool(ids) and ids[-1] in policy.eos_ids
    if ended:
        ids, lps, tops = ids[:-1], lps[:-1], tops[:-1]
    text = reply.text
    cut = min((text.find(s) for s in chat.stop if s and s in text), default=-1)
    if cut >= 0:
        text = text[:cut]
    choice: dict[str, Any] = {
        "index": index,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop" if ended or cut >= 0 else "length",
        "logprobs": None,
    }
    if chat.logprobs:
        content = []
        for k, (token, lp) in enumerate(zip(ids, lps, strict=True)):
            alternatives = tops[k] if k < len(tops) else []
            content.append({**_token_entry(policy, token, lp),
                            "top_logprobs": [_token_entry(policy, t, v) for t, v in alternatives[: chat.top_logprobs]]})
        choice["logprobs"] = {"content": content}
    return choice


def chat_response(policy: HFPolicy, model_name: str, replies: Sequence[Reply], chat: ChatRequest) -> dict[str, Any]:
    """The chat completion object of ``chat``'s ``replies`` (the matched stop string cut off, an
    end-of-turn token left out of the log-probs)."""
    prompt_tokens = len(policy.prompt_ids(chat.request.messages))
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
    """The server-sent event chunks of ``chat``'s ``replies``: per choice a role chunk, one content
    chunk per token, a chunk with the ``finish_reason``; then a usage chunk when asked for."""
    full = chat_response(policy, model_name, replies, chat)
    head = {"id": full["id"], "object": "chat.completion.chunk", "created": full["created"], "model": model_name}
    chunks: list[dict[str, Any]] = []
    for choice in full["choices"]:
        index = choice["index"]
        chunks.append({**head, "choices": [{"index": index, "delta": {"role": "assistant", "content": ""},
                                            "logprobs": None, "finish_reason": None}]})
        entries = (choice["logprobs"] or {}).get("content") or []
        for k, piece in enumerate(_pieces(policy, replies[index], choice["message"]["content"])):
            logprobs = {"content": [entries[k]]} if chat.logprobs and k < len(entries) else None
            chunks.append({**head, "choices": [{"index": index, "delta": {"content": piece}, "logprobs": logprobs,
                                                "finish_reason": None}]})
        chunks.append({**head, "choices": [{"index": index, "delta": {}, "logprobs": None,
                                            "finish_reason": choice["finish_reason"]}]})
    if chat.include_usage:
        chunks.append({**head, "choices": [], "usage": full["usage"]})
    return chunks


# -- the application ---------------------------------------------------------------------------


def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": code, "code": code}}, status_code=status)


def _sse(chunks: Sequence[dict[str, Any]]) -> Iterator[bytes]:
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def build_app(state: Any) -> Starlette:
    """The ASGI application serving ``state`` (an :class:`~arlkit.policies.serve.OpenAICompatibleServer`:
    its ``models``, ``model``, ``achat`` and ``achat_stream``; Starlette, run by uvicorn)."""

    async def models(request: StarletteRequest) -> JSONResponse:
        return JSONResponse(state.models())

    async def model(request: StarletteRequest) -> JSONResponse:
        wanted = request.path_params["model_id"]
        if wanted != state.model_name:
            return _error(404, f"The model {wanted!r} does not exist", "model_not_found")
        return JSONResponse(state.model())

    async def chat(request: StarletteRequest) -> Response:
        try:
            body = parse_body(await _read_body(request))
            if isinstance(body, dict) and body.get("stream"):
                chunks = await state.achat_stream(body)
                return StreamingResponse(_sse(chunks), media_type="text/event-stream")
            return JSONResponse(await state.achat(body))
        except BadRequest as exc:
            return _error(exc.status, str(exc), exc.code)

    async def unknown(request: StarletteRequest, exc: Exception) -> JSONResponse:
        status = getattr(exc, "status_code", 404)
        await request.body()  # read what was sent, so a keep-alive connection stays in step
        what = "no route" if status == 404 else "method not allowed on"
        return _error(status, f"{what} {request.url.path}", "not_found" if status == 404 else "invalid_request_error")

    routes = []
    for prefix in ("/v1", ""):
        routes += [Route(f"{prefix}/models", models), Route(f"{prefix}/models/{{model_id:path}}", model),
                   Route(f"{prefix}/chat/completions", chat, methods=["POST"])]
    return Starlette(routes=routes, exception_handlers={404: unknown, 405: unknown})
