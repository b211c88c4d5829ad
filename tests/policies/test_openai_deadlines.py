"""Each attempt of the ``openai`` backend has a total deadline: servers on 127.0.0.1 that trickle
their headers or body a byte at a time, stream forever or never answer (every read well inside the
client's read timeout) end each request as a policy error within ``timeout x (retries + 1)``."""

from __future__ import annotations

import time

import pytest

from arlkit.envs import make
from arlkit.policies import PolicyError, SamplingConfig
from arlkit.policies.loopback import ScriptedServer, Stall
from arlkit.policies.openai_backend import OpenAIConfig, OpenAIPolicy
from arlkit.rollout import make_jobs, run_rollouts

MARGIN_S = 20.0  # generous: shared machines; without the deadline each case runs for minutes
TIMEOUT_S = 1.0
CONFIG = OpenAIConfig(timeout=TIMEOUT_S, max_retries=1, backoff=0.0, check_model=False)
KINDS = ["headers", "body", "stream", "silent"]


def _server(kind: str) -> ScriptedServer:
    stall = Stall(kind, interval_s=0.1, limit_s=300)  # type: ignore[arg-type]
    return ScriptedServer(lambda body: "<action>Left</action>", stall=stall)


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_too_slow_to_finish_a_reply_ends_each_request_by_the_deadline(  # type: ignore[no-untyped-def]
    kind: str, real_requests
) -> None:
    with _server(kind) as server:
        policy = OpenAIPolicy("scripted", server.base_url, SamplingConfig(max_new_tokens=8), CONFIG)
        start = time.monotonic()
        replies = policy.generate(real_requests[:3])
        elapsed = time.monotonic() - start
        policy.close()
    assert all(r.error and r.error.startswith("APITimeoutError after 2 attempt(s)") for r in replies), replies
    assert elapsed < TIMEOUT_S * (CONFIG.max_retries + 1) + MARGIN_S


@pytest.mark.parametrize("kind", ["headers", "stream"])
def test_the_models_listing_at_construction_has_the_same_deadline(kind: str) -> None:
    with _server(kind) as server:
        start = time.monotonic()
        with pytest.raises(PolicyError, match="cannot reach the server .*: Request timed out"):
            OpenAIPolicy("scripted", server.base_url, config=OpenAIConfig(timeout=TIMEOUT_S))
        assert time.monotonic() - start < TIMEOUT_S + MARGIN_S


def test_trajectories_of_a_trickling_server_end_as_policy_errors() -> None:
    env = lambda: make("frozenlake", size=4, t_max=6)  # noqa: E731
    jobs = make_jobs(env().tasks("test", 3), 2, 6, seed=1)
    with _server("body") as server:
        policy = OpenAIPolicy("scripted", server.base_url, SamplingConfig(max_new_tokens=8), CONFIG)
        start = time.monotonic()
        trajectories = run_rollouts(env, jobs, policy)
        elapsed = time.monotonic() - start
        policy.close()
    assert [t.ended_by for t in trajectories] == ["policy_error"] * 6
    assert elapsed < TIMEOUT_S * (CONFIG.max_retries + 1) + MARGIN_S  # all six at once, each one request
