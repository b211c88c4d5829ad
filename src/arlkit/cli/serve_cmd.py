"""``arlkit serve``: a local model behind an OpenAI-compatible API (:mod:`arlkit.policies.serve`).

Routes: GET /health, GET /v1/models, POST /v1/chat/completions (tools, streaming), POST /v1/completions
(vLLM's form, echo with prompt log-probs), POST /v1/responses (minimal, for Inspect's openai/ provider).
Ctrl-C answers the requests in flight, then stops."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help="serve a local model over an OpenAI-compatible API (loopback)",
                              description=__doc__)  # fmt: skip
    p.add_argument("model_dir", help="a local causal-LM folder (e.g. from `arlkit model init`)")
    p.add_argument("--name", default=None, help="the model name clients send (default: the folder path)")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from arlkit.recipes.model import serve_model

    return serve_model(args.model_dir, args.name, args.host, args.port)
