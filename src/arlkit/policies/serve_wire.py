"""The wire side of ``arlkit serve``: request messages, token bytes, server-sent events, and the
Starlette application (routes, errors) around the server object (:mod:`arlkit.policies.serve`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["MAX_BODY", "MAX_DEPTH", "BadRequest", "build_app", "parse_body", "parse_messages", "token_bytes"]

MAX_BODY = 16 * 2**20
"""Bytes a request body may have (413 beyond)."""
MAX_DEPTH = 32
"""Nesting levels of arrays and objects a request body may have (a chat request needs 5)."""


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
