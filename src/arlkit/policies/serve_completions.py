"""``POST /v1/completions`` of ``arlkit serve`` (:mod:`arlkit.policies.serve`), in the form vLLM serves it.

A prompt is raw text (no chat template), tokenized as the tokenizer tokenizes text (its special tokens
added, as vLLM does), or token ids; ``prompt`` may be one or a list. Choices are ordered prompt by
prompt, ``n`` per prompt (choice ``i * n + j`` is sample ``j`` of prompt ``i``). ``echo`` puts the prompt
before the generated text, and with ``logprobs: k`` its tokens before the generated ones in
``choices[i].logprobs``: ``tokens`` (each token's decoded text), ``token_logprobs`` (``None`` for the
first prompt token, which has no context), ``top_logprobs`` (per token a ``{token: logprob}`` object
holding the token itself and the ``k`` most likely tokens there; ``None`` for the first prompt token)
and ``text_offset`` (where each token starts in the choice's text, counted over the decoded tokens).
The prompt's log-probabilities are the model's own (log-softmax of its logits, temperature 1), for
scoring likelihoods; the generated tokens' are those of the distribution they were sampled from, as in
chat completions. ``max_tokens: 0`` with ``echo`` scores the prompt without generating
(``finish_reason`` ``"length"``). Log-probabilities are floored at -9999 (vLLM's floor) so a token
with probability 0 stays valid JSON."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arlkit.policies.protocol import Reply
from arlkit.policies.registry import SamplingConfig
from arlkit.policies.serve_tools import PromptRenderer
from arlkit.policies.serve_wire import BadRequest, check_fields, finished_text, parse_stop, sampling_options

if TYPE_CHECKING:
    from arlkit.policies.hf import HFPolicy
    from arlkit.policies.serve_sampler import ChatSampler, PromptScores

__all__ = ["CompletionRequest", "complete", "completion_chunks", "parse_completion"]

DEFAULT_MAX_TOKENS = 16
"""The reply cap of a completion request that sets none (the OpenAI API's and vLLM's default)."""
_MAX_LOGPROBS = 20
_FLOOR = -9999.0
_FIELDS = frozenset({"model", "prompt", "max_tokens", "echo", "logprobs", "temperature", "top_p", "top_k", "n", "seed",
                     "stop", "stream", "stream_options"})
_NEUTRAL = {"best_of": 1, "suffix": ""}


@dataclass(frozen=True)
class CompletionRequest:
    """A completion request, checked: one ``(text, token ids)`` per prompt."""

    prompts: list[tuple[str, list[int]]]
    seed: int
    sampling: SamplingConfig
    max_tokens: int
    stop: tuple[str, ...]
    echo: bool
    logprobs: int | None
    n: int
    stream: bool


def _prompts(raw: Any, renderer: PromptRenderer, vocab: int) -> list[tuple[str, list[int]]]:
    tokenizer = renderer.tokenizer
    if isinstance(raw, str):
        items: list[Any] = [raw]
    elif isinstance(raw, list) and raw and all(isinstance(t, int) and not isinstance(t, bool) for t in raw):
        items = [raw]
    elif isinstance(raw, list) and raw:
        items = raw
    else:
        raise BadRequest(400, "prompt must be a string, a list of strings, a list of token ids, or a list of those")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            ids = renderer.text_ids(item)
            out.append((item, ids))
        elif isinstance(item, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in item):
            if not all(0 <= t < vocab for t in item):
                raise BadRequest(400, f"prompt[{i}] holds a token id outside 0..{vocab - 1}")
            out.append((tokenizer.decode(item), list(item)))
        else:
            raise BadRequest(400, f"prompt[{i}] must be a string or a list of token ids")
        if not out[-1][1]:
            raise BadRequest(400, f"prompt[{i}] is empty (no tokens)")
    return out


def parse_completion(body: Any, model_name: str, renderer: PromptRenderer, vocab: int) -> CompletionRequest:
    """``body`` checked as a completion request for ``model_name``; raises :class:`BadRequest` naming the problem."""
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if not (k in _NEUTRAL and v == _NEUTRAL[k])}
    body = check_fields(body, _FIELDS)
    if body.get("model") != model_name:
        raise BadRequest(404, f"The model {body.get('model')!r} does not exist", "model_not_found")
    echo = bool(body.get("echo"))
    limit = body.get("max_tokens")
    sampling, seed, n = sampling_options(body, DEFAULT_MAX_TOKENS if limit is None else limit, zero_ok=echo)
    logprobs = body.get("logprobs")
    if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int)
                                 or not 0 <= logprobs <= _MAX_LOGPROBS):
        raise BadRequest(400, f"logprobs must be an integer from 0 to {_MAX_LOGPROBS} (top tokens per position), "
                              f"got {logprobs!r}")
    prompts = _prompts(body.get("prompt"), renderer, vocab)
    return CompletionRequest(prompts, seed, sampling, DEFAULT_MAX_TOKENS if limit is None else int(limit),
                             parse_stop(body.get("stop")), echo, logprobs, n, bool(body.get("stream")))


class _Logprobs:
    """The ``logprobs`` object of one choice, built token by token."""

    def __init__(self, policy: HFPolicy) -> None:
        self.policy = policy
        self.out: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        self._offset = 0

    def _text(self, token: int) -> str:
        return str(self.policy.tokenizer.decode([int(token)]))

    def add(self, token: int, logprob: float | None, alternatives: list[Any]) -> None:
        text = self._text(token)
        self.out["tokens"].append(text)
        self.out["text_offset"].append(self._offset)
        self._offset += len(text)
        if logprob is None:
            self.out["token_logprobs"].append(None)
            self.out["top_logprobs"].append(None)
            return
        top = {text: max(logprob, _FLOOR)}
        for alt, value in alternatives:
            top.setdefault(self._text(alt), max(float(value), _FLOOR))
        self.out["token_logprobs"].append(max(logprob, _FLOOR))
        self.out["top_logprobs"].append(top)


async def complete(sampler: ChatSampler, policy: HFPolicy, model_name: str, req: CompletionRequest) -> dict[str, Any]:
    """The completion object of ``req``, sampled and scored with ``sampler``."""
    scoring = req.echo and req.logprobs is not None

    async def one(ids: list[int]) -> tuple[list[Reply], PromptScores | None]:
        replies = (await sampler.sample(ids, req.seed, req.n, req.sampling, req.stop, req.logprobs or 0)
                   if req.max_tokens > 0 else [Reply("", token_ids=()) for _ in range(req.n)])
        scores = await sampler.score(ids, req.logprobs or 0) if scoring else None
        return replies, scores

    results = await asyncio.gather(*(one(ids) for _, ids in req.prompts))
    choices, completion_tokens = [], 0
    for p, ((text, ids), (replies, scores)) in enumerate(zip(req.prompts, results, strict=True)):
        for j, reply in enumerate(replies):
            generated, stopped, out_ids, lps, tops = finished_text(policy, reply, req.stop)
            completion_tokens += len(reply.token_ids or ())
            logprobs = None
            if req.logprobs is not None:
                built = _Logprobs(policy)
                if scores is not None:
                    for token, (lp, alternatives) in zip(ids, scores, strict=True):
                        built.add(token, lp, alternatives)
                for k, (token, lp) in enumerate(zip(out_ids, lps, strict=True)):
                    built.add(token, lp, (tops[k] if k < len(tops) else [])[: req.logprobs])
                logprobs = built.out
            choices.append({"index": p * req.n + j, "text": (text if req.echo else "") + generated,
                            "logprobs": logprobs, "finish_reason": "stop" if stopped else "length", "stop_reason": None})
    prompt_tokens = sum(len(ids) for _, ids in req.prompts)
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
            "model": model_name, "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def completion_chunks(full: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent event chunks of a completion (``stream: true``): one per choice with its whole
    text, log-probs and ``finish_reason`` (the choices are generated before they are sent)."""
    head = {"id": full["id"], "object": "text_completion", "created": full["created"], "model": full["model"]}
    return [{**head, "choices": [choice]} for choice in full["choices"]]
