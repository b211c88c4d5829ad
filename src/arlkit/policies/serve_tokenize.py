"""``POST /tokenize`` and ``POST /detokenize`` of ``arlkit serve`` (:mod:`arlkit.policies.serve`), in the
form vLLM serves them (at the server's root, beside ``/v1``; ``/v1/tokenize`` answers the same).

``/tokenize`` takes either a chat (``messages``, rendered by the chat template exactly as chat
completions render it; ``add_generation_prompt`` true by default ends it with the assistant header,
false renders the conversation as it stands) or a text (``prompt``; ``add_special_tokens`` true by
default, as vLLM does, adds the tokenizer's special tokens). The answer is ``{"count", "max_model_len",
"tokens"}`` and, with ``return_token_strs``, ``token_strs`` (each token's string in the vocabulary, as vLLM gives it).
``/detokenize`` takes ``{"tokens": [...]}`` and answers ``{"prompt": text}``.

The ``openai`` backend scores continuations through these routes and ``/v1/completions``
(:mod:`arlkit.policies.openai_scoring`): a chat's ids from ``/tokenize`` are the ids generation sees."""

from __future__ import annotations

from typing import Any

from arlkit.policies.serve_tools import CHATML_TOOL_TEMPLATE, PromptRenderer, parse_tools
from arlkit.policies.serve_wire import BadRequest, check_fields, parse_messages

__all__ = ["detokenize", "tokenize"]

_CHAT_FIELDS = frozenset({"model", "messages", "add_generation_prompt", "add_special_tokens", "return_token_strs",
                          "tools", "continue_final_message"})
_TEXT_FIELDS = frozenset({"model", "prompt", "add_special_tokens", "return_token_strs"})


def _flag(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(400, f"{name} must be true or false, got {value!r}")
    return value


def _model(body: dict[str, Any], model_name: str) -> None:
    wanted = body.get("model")
    if wanted is not None and wanted != model_name:
        raise BadRequest(404, f"The model {wanted!r} does not exist", "model_not_found")


def _chat_ids(renderer: PromptRenderer, body: dict[str, Any]) -> list[int]:
    messages = parse_messages(body.get("messages"))
    try:
        tools = parse_tools(body.get("tools"))
    except ValueError as exc:
        raise BadRequest(400, str(exc)) from None
    if _flag(body, "continue_final_message", False):
        raise BadRequest(400, "continue_final_message is not supported; this server implements add_generation_prompt")
    generation = _flag(body, "add_generation_prompt", True)
    special = _flag(body, "add_special_tokens", False)
    try:
        if generation:  # the prompt chat completions sample after, token for token
            ids = renderer.chat_ids(messages, tools)
        else:
            uses_tools = bool(tools) or any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)
            kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": False}
            if tools:
                kwargs["tools"] = tools
            if uses_tools and not renderer.template_renders_tools:
                kwargs["chat_template"] = CHATML_TOOL_TEMPLATE
            text = str(renderer.tokenizer.apply_chat_template(messages, **kwargs))
            ids = list(renderer.tokenizer(text, add_special_tokens=False)["input_ids"])
    except BadRequest:
        raise
    except Exception as exc:  # noqa: BLE001 - the template's error names the problem
        raise BadRequest(400, f"the chat template cannot render these messages: {type(exc).__name__}: {exc}") from None
    if special:  # the tokenizer's own special tokens around the rendered text (vLLM's option; rarely wanted)
        ids = list(renderer.tokenizer.build_inputs_with_special_tokens(ids))
    return ids


def tokenize(body: Any, model_name: str, renderer: PromptRenderer, max_model_len: int | None) -> dict[str, Any]:
    """The ``/tokenize`` answer to ``body`` (raises :class:`BadRequest` naming the problem)."""
    if isinstance(body, dict) and "messages" in body:
        body = check_fields(body, _CHAT_FIELDS)
        _model(body, model_name)
        ids = _chat_ids(renderer, body)
    elif isinstance(body, dict) and "prompt" in body:
        body = check_fields(body, _TEXT_FIELDS)
        _model(body, model_name)
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise BadRequest(400, f"prompt must be a string, got {type(prompt).__name__}")
        special = _flag(body, "add_special_tokens", True)
        ids = list(renderer.tokenizer(prompt, add_special_tokens=special)["input_ids"])
    else:
        raise BadRequest(400, "the body must be an object with messages (a chat) or prompt (a text)")
    out: dict[str, Any] = {"count": len(ids), "max_model_len": max_model_len, "tokens": ids, "token_strs": None}
    if _flag(body, "return_token_strs", False):
        out["token_strs"] = [str(t) for t in renderer.tokenizer.convert_ids_to_tokens(ids)]
    return out


def detokenize(body: Any, model_name: str, renderer: PromptRenderer) -> dict[str, Any]:
    """The ``/detokenize`` answer to ``body``: ``{"prompt": text}`` (raises :class:`BadRequest`)."""
    body = check_fields(body, frozenset({"model", "tokens"}))
    _model(body, model_name)
    tokens = body.get("tokens")
    vocab = len(renderer.tokenizer)
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise BadRequest(400, "tokens must be a list of token ids")
    if not all(0 <= t < vocab for t in tokens):
        raise BadRequest(400, f"tokens holds a token id outside 0..{vocab - 1}")
    return {"prompt": str(renderer.tokenizer.decode(tokens))}
