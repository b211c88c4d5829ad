"""Scoring continuations through a server's prompt log-probs (the ``openai`` backend's ``score``).

A continuation is scored as the ``hf`` backend scores it (:meth:`arlkit.policies.hf.HFPolicy.score`):
the conversation rendered by the chat template with the assistant header (the prompt generation
samples after), then the continuation text tokenized on its own without special tokens, and one
log-prob (the model's own, temperature 1) per continuation token. No end-of-turn token is scored.

The ids come from the server's own tokenizer: ``POST /tokenize`` (vLLM's route, at the server's
root; ``/v1/tokenize`` is tried next) with ``messages`` and ``add_generation_prompt: true`` renders
the prompt exactly as the server renders a chat completion's prompt, and with ``prompt`` (the
continuation text) and ``add_special_tokens: false`` gives the continuation's ids. Rendering the
conversation plus an assistant message instead (``add_generation_prompt: false``) would append the
end-of-turn token and, with some templates (Qwen3's thinking blocks), rewrite the reply, so its ids
would not be those generation produced after that prompt.

The log-probs of ``prompt + continuation`` ids come from one of two request shapes:

- **vLLM**: ``POST /v1/completions`` with the ids as ``prompt``, ``max_tokens: 0``, ``echo: true`` and
  ``logprobs: 1``; ``choices[0].logprobs.token_logprobs`` holds one log-prob per prompt token (the
  first ``None``), read at the continuation's positions. ``arlkit serve`` serves this form.
- **SGLang**: ``POST /generate`` (at the root) with ``input_ids``, ``sampling_params: {max_new_tokens:
  0}``, ``return_logprob: true`` and ``logprob_start_len`` = the prompt's length;
  ``meta_info.input_token_logprobs`` holds ``[logprob, token_id, text]`` from that position on.

``OpenAIConfig.scoring`` picks the form: ``"auto"`` tries vLLM's route, then SGLang's, and keeps the
first that answers; ``"off"`` refuses to score. A server with neither route (404), or without
``/tokenize``, is a one-line :class:`~arlkit.policies.protocol.PolicyError` naming what it lacks.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from arlkit.policies.protocol import Message, PolicyError

__all__ = ["SCORING_FORMS", "ServerScorer", "check_scoring"]

SCORING_FORMS = ("auto", "vllm", "sglang", "off")
"""Values of ``OpenAIConfig.scoring`` (and ``$ARLKIT_OPENAI_SCORING``)."""
_PROMPT_CACHE = 256  # rendered prompts kept (the likelihood analysis scores three continuations per prompt)


def check_scoring(value: str) -> str:
    """``value`` when it names a scoring form, else a ``ValueError`` listing the forms."""
    if value not in SCORING_FORMS:
        raise ValueError(f"scoring must be one of {', '.join(SCORING_FORMS)}, got {value!r}")
    return value


class _Missing(Exception):
    """The server has no such route (404)."""


class ServerScorer:
    """Per-token log-probs of continuations from a vLLM-like or SGLang server (see the module docstring).

    Args:
        model: the model name the server knows.
        base_url: the OpenAI base URL (``http://host:port/v1``); the root routes are beside its ``/v1``.
        form: one of :data:`SCORING_FORMS` except ``"off"``.
        api_key: sent as a bearer token.
        timeout: seconds one HTTP request may take.
        max_retries: further attempts after a connection failure, a timeout, a 429 or a 5xx.
        backoff: seconds before the first retry; doubled before each next one.
        max_concurrency: conversations scored at once.
    """

    def __init__(self, model: str, base_url: str, form: str = "auto", *, api_key: str = "EMPTY", timeout: float = 60.0,
                 max_retries: int = 4, backoff: float = 0.5, max_concurrency: int = 16) -> None:
        import httpx

        check_scoring(form)
        if form == "off":
            raise ValueError("a scorer needs a scoring form other than 'off'")
        self.model, self.form = model, form
        self.base = base_url.rstrip("/")
        self.root = self.base[: -len("/v1")] if self.base.endswith("/v1") else self.base
        self.max_retries, self.backoff = max_retries, backoff
        self._httpx = httpx
        self._client = httpx.Client(timeout=timeout, follow_redirects=False,
                                    headers={"Authorization": f"Bearer {api_key}"})
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="arlkit-score")
        self._lock = threading.Lock()
        self._prompts: OrderedDict[str, list[int]] = OrderedDict()
        self._tokenize_url: str | None = None
        self.used: str | None = None if form == "auto" else form
        """The form in use: ``"vllm"`` or ``"sglang"`` (``None`` until ``"auto"`` has found one)."""

    # -- HTTP -----------------------------------------------------------------------------------

    def _post(self, url: str, body: dict[str, Any]) -> tuple[int, Any]:
        """``(status, JSON body)`` of a POST; connection failures, timeouts, 429 and 5xx are retried,
        then raise :class:`PolicyError`."""
        httpx = self._httpx
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                response = self._client.post(url, json=body)
            except httpx.HTTPError as exc:
                if last:
                    raise PolicyError(f"cannot score at {url}: {type(exc).__name__}: {exc}") from None
            else:
                if response.status_code != 429 and response.status_code < 500:
                    try:
                        payload = response.json()
                    except ValueError:
                        payload = None
                    return response.status_code, payload
                if last:
                    raise PolicyError(f"the server answered {response.status_code} to {url} after "
                                      f"{attempt + 1} attempt(s): {response.text[:200]!r}")
            time.sleep(min(8.0, self.backoff * 2**attempt))
        raise AssertionError("unreachable")

    def _refused(self, url: str, status: int, payload: Any) -> PolicyError:
        error = payload.get("error") if isinstance(payload, dict) else None
        said = error.get("message") if isinstance(error, dict) else (error or payload)
        said = " ".join(str(said).split())[:300]
        if status in (401, 403):
            return PolicyError(f"the server at {url} rejected the API key (HTTP {status}): {said}")
        return PolicyError(f"the server refused scoring at {url} (HTTP {status}): {said}")

    def _json(self, url: str, body: dict[str, Any]) -> Any:
        """The 200 answer to a POST; :class:`_Missing` on a 404 that is not about the model."""
        status, payload = self._post(url, body)
        if status == 200:
            return payload
        if status == 404 and "model" not in json.dumps(payload).lower():
            raise _Missing(url)
        raise self._refused(url, status, payload)

    # -- token ids ------------------------------------------------------------------------------

    def _tokenize(self, body: dict[str, Any]) -> list[int]:
        urls = [self._tokenize_url] if self._tokenize_url else [f"{self.root}/tokenize", f"{self.base}/tokenize"]
        for url in urls:
            try:
                payload = self._json(url, {"model": self.model, **body})
            except _Missing:
                continue
            tokens = payload.get("tokens") if isinstance(payload, dict) else None
            if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
                raise PolicyError(f"the server's {url} answered without a list of token ids: {str(payload)[:200]}")
            self._tokenize_url = url
            return tokens
        raise PolicyError(f"the server at {self.root} cannot score: it has no POST /tokenize route (scoring renders "
                          "the chat with the server's own template; vLLM and arlkit serve have it)")

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Ids of ``messages`` rendered for the assistant's reply, by the server's chat template."""
        key = json.dumps([dict(m) for m in messages], sort_keys=True, default=str)
        with self._lock:
            if key in self._prompts:
                self._prompts.move_to_end(key)
                return self._prompts[key]
        ids = self._tokenize({"messages": [dict(m) for m in messages], "add_generation_prompt": True,
                              "add_special_tokens": False})
        with self._lock:
            self._prompts[key] = ids
            while len(self._prompts) > _PROMPT_CACHE:
                self._prompts.popitem(last=False)
        return ids

    def continuation_ids(self, text: str) -> list[int]:
        """Ids of a reply text as it follows the prompt (no special tokens added)."""
        return self._tokenize({"prompt": text, "add_special_tokens": False}) if text else []

    # -- log-probs ------------------------------------------------------------------------------

    def _with_cap(self, url: str, body: dict[str, Any], cap: str) -> Any:
        """POST ``body`` asking for 0 new tokens; a server that wants at least one gets 1 (the
        generated token comes after the positions read)."""
        status, payload = self._post(url, body)
        if status == 400 and cap in json.dumps(payload):
            status, payload = self._post(url, _capped(body, cap))
        if status == 200:
            return payload
        if status == 404 and "model" not in json.dumps(payload).lower():
            raise _Missing(url)
        raise self._refused(url, status, payload)

    def _vllm(self, ids: list[int], start: int) -> list[float]:
        url = f"{self.base}/completions"
        body = {"model": self.model, "prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 1}
        payload = self._with_cap(url, body, "max_tokens")
        try:
            found = payload["choices"][0]["logprobs"]["token_logprobs"]
        except (KeyError, IndexError, TypeError):
            raise PolicyError(f"the server's {url} answered without echoed prompt log-probs "
                              f"(choices[0].logprobs.token_logprobs): {str(payload)[:200]}") from None
        return _numbers(found[start: len(ids)] if isinstance(found, list) else None, len(ids) - start, url)

    def _sglang(self, ids: list[int], start: int) -> list[float]:
        url = f"{self.root}/generate"
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 0, "temperature": 0.0},
                "return_logprob": True, "logprob_start_len": start}
        payload = self._with_cap(url, body, "max_new_tokens")
        try:
            found = payload["meta_info"]["input_token_logprobs"]
        except (KeyError, TypeError):
            raise PolicyError(f"the server's {url} answered without meta_info.input_token_logprobs: "
                              f"{str(payload)[:200]}") from None
        want = len(ids) - start
        if not isinstance(found, list) or len(found) < want:
            raise PolicyError(f"the server's {url} returned {len(found) if isinstance(found, list) else 'no'} input "
                              f"log-probs for {want} continuation tokens")
        entries = found[len(found) - want:]  # from logprob_start_len on: the continuation's tokens
        for entry, token in zip(entries, ids[start:], strict=True):
            if isinstance(entry, list) and len(entry) > 1 and isinstance(entry[1], int) and entry[1] != token:
                raise PolicyError(f"the server's {url} scored token {entry[1]} where the continuation has {token}")
        return _numbers([e[0] if isinstance(e, list) and e else e for e in entries], want, url)

    def _logprobs(self, ids: list[int], start: int) -> list[float]:
        if self.used is not None:
            try:
                return self._vllm(ids, start) if self.used == "vllm" else self._sglang(ids, start)
            except _Missing as exc:
                what = "POST /v1/completions (vLLM form)" if self.used == "vllm" else "POST /generate (SGLang form)"
                raise PolicyError(f"the server at {self.root} cannot score: it has no {what} route ({exc} answered "
                                  "404); choose the other form with scoring / $ARLKIT_OPENAI_SCORING") from None
        try:
            out = self._vllm(ids, start)
            self.used = "vllm"
            return out
        except _Missing:
            pass
        try:
            out = self._sglang(ids, start)
            self.used = "sglang"
            return out
        except _Missing:
            raise PolicyError(f"the server at {self.root} cannot score: it has neither POST /v1/completions with "
                              "echoed prompt log-probs (vLLM) nor POST /generate (SGLang); both answered 404") from None

    def score_one(self, messages: Sequence[Message], continuation: str) -> list[float]:
        """Per-token log-probs of ``continuation`` as the assistant's reply to ``messages``."""
        tokens = self.continuation_ids(continuation)
        if not tokens:
            return []
        prompt = self.prompt_ids(messages)
        return self._logprobs(prompt + tokens, len(prompt))

    def score(self, messages: Sequence[Sequence[Message]], continuations: Sequence[str]) -> list[list[float]]:
        """:meth:`score_one` of each pair, ``max_concurrency`` at a time, in order."""
        if len(messages) != len(continuations):
            raise ValueError(f"{len(messages)} conversations but {len(continuations)} continuations")
        if not messages:
            return []
        first = self.score_one(messages[0], continuations[0])  # finds the routes before the rest go out
        rest = list(self._pool.map(self.score_one, messages[1:], continuations[1:]))
        return [first, *rest]

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._client.close()


def _capped(body: dict[str, Any], cap: str) -> dict[str, Any]:
    if cap in body:
        return {**body, cap: 1}
    return {**body, "sampling_params": {**body["sampling_params"], cap: 1}}


def _numbers(values: Any, want: int, url: str) -> list[float]:
    if not isinstance(values, list) or len(values) != want:
        raise PolicyError(f"the server's {url} returned {len(values) if isinstance(values, list) else 'no'} "
                          f"log-probs for {want} continuation tokens")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise PolicyError(f"the server's {url} returned log-probs that are not numbers: {str(values)[:200]}")
    return [float(v) for v in values]
