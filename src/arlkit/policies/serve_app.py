"""The routes of ``arlkit serve`` (:mod:`arlkit.policies.serve`): a Starlette application around the
server object, with OpenAI-style JSON errors (an unknown route or method included)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from arlkit.policies.serve_tokenize import detokenize, tokenize
from arlkit.policies.serve_wire import BadRequest, parse_body, read_body

__all__ = ["build_app"]


def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": code, "code": code}}, status_code=status)


def _sse(chunks: Sequence[dict[str, Any]]) -> Iterator[bytes]:
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def _named_sse(events: Sequence[dict[str, Any]]) -> Iterator[bytes]:
    """Server-sent events named by their ``type`` (the Responses API's stream: no ``[DONE]``)."""
    for event in events:
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def build_app(state: Any) -> Starlette:
    """The ASGI application serving ``state`` (an :class:`~arlkit.policies.serve.OpenAICompatibleServer`:
    its ``health``, ``models``, ``model``, ``achat``, ``achat_stream``, ``acomplete`` and ``arespond``; ``/tokenize``
    and ``/detokenize`` read its ``renderer``, ``model_name`` and ``policy``, :mod:`arlkit.policies.serve_tokenize`)."""

    async def health(request: StarletteRequest) -> JSONResponse:
        return JSONResponse(state.health())

    async def models(request: StarletteRequest) -> JSONResponse:
        return JSONResponse(state.models())

    async def model(request: StarletteRequest) -> JSONResponse:
        wanted = request.path_params["model_id"]
        if wanted != state.model_name:
            return _error(404, f"The model {wanted!r} does not exist", "model_not_found")
        return JSONResponse(state.model())

    async def chat(request: StarletteRequest) -> Response:
        try:
            body = parse_body(await read_body(request))
            if isinstance(body, dict) and body.get("stream"):
                chunks = await state.achat_stream(body)
                return StreamingResponse(_sse(chunks), media_type="text/event-stream")
            return JSONResponse(await state.achat(body))
        except BadRequest as exc:
            return _error(exc.status, str(exc), exc.code)

    async def completions(request: StarletteRequest) -> Response:
        try:
            body = parse_body(await read_body(request))
            full, chunks = await state.acomplete(body)
            if chunks is not None:
                return StreamingResponse(_sse(chunks), media_type="text/event-stream")
            return JSONResponse(full)
        except BadRequest as exc:
            return _error(exc.status, str(exc), exc.code)

    async def responses(request: StarletteRequest) -> Response:
        try:
            response, events = await state.arespond(parse_body(await read_body(request)))
            if events is not None:
                return StreamingResponse(_named_sse(events), media_type="text/event-stream")
            return JSONResponse(response)
        except BadRequest as exc:
            return _error(exc.status, str(exc), exc.code)

    async def tokenize_route(request: StarletteRequest) -> Response:
        try:
            body = parse_body(await read_body(request))
            return JSONResponse(tokenize(body, state.model_name, state.renderer, state.policy.context_length))
        except BadRequest as exc:
            return _error(exc.status, str(exc), exc.code)

    async def detokenize_route(request: StarletteRequest) -> Response:
        try:
            return JSONResponse(detokenize(parse_body(await read_body(request)), state.model_name, state.renderer))
        except BadRequest as exc:
            return _error(exc.status, str(exc), exc.code)

    async def unknown(request: StarletteRequest, exc: Exception) -> JSONResponse:
        status = getattr(exc, "status_code", 404)
        await request.body()  # read what was sent, so a keep-alive connection stays in step
        what = "no route" if status == 404 else "method not allowed on"
        return _error(status, f"{what} {request.url.path}", "not_found" if status == 404 else "invalid_request_error")

    routes = [Route("/health", health)]
    for prefix in ("/v1", ""):
        routes += [Route(f"{prefix}/models", models), Route(f"{prefix}/models/{{model_id:path}}", model),
                   Route(f"{prefix}/chat/completions", chat, methods=["POST"]),
                   Route(f"{prefix}/completions", completions, methods=["POST"]),
                   Route(f"{prefix}/responses", responses, methods=["POST"]),
                   Route(f"{prefix}/tokenize", tokenize_route, methods=["POST"]),  # vLLM's routes (at the root)
                   Route(f"{prefix}/detokenize", detokenize_route, methods=["POST"])]
    return Starlette(routes=routes, exception_handlers={404: unknown, 405: unknown})
