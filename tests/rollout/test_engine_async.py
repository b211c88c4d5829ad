"""The asynchronous engine: the lockstep schedule's results at any concurrency, its bounds, stragglers
that delay nobody, failures that stay with their trajectory, and a served model through the
``openai`` backend."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from arlkit.envs import make
from arlkit.envs.protocol import StepResult
from arlkit.policies import Reply, Request, SamplingConfig, make_policy
from arlkit.policies.loopback import Latency, ScriptedServer
from arlkit.policies.openai_backend import OpenAIConfig, OpenAIPolicy
from arlkit.rollout import EngineConfig, EngineStats, arun_rollouts, make_jobs, run_rollouts

DEADLINE_S = 60.0  # generous: the machines are shared; every wait below ends as soon as its event happens
LOCKSTEP = EngineConfig(schedule="lockstep")
MOVES = ("Left", "Down", "Right", "Up")


def _frozenlake():  # type: ignore[no-untyped-def]
    return make("frozenlake", size=4, t_max=12)


def _records(trajectories: Sequence[Any]) -> list[str]:
    return sorted(json.dumps(t.to_json(), sort_keys=True) for t in trajectories)


def _jobs(tasks: int = 6, samples: int = 4, budget: int = 12, seed: int = 3):  # type: ignore[no-untyped-def]
    return make_jobs(_frozenlake().tasks("test", tasks), samples, budget, seed)


@pytest.mark.parametrize("engine", [EngineConfig(), EngineConfig(max_active=5, max_concurrency=2),
                                    EngineConfig(max_active=1), EngineConfig(max_concurrency=3, batch_wait_s=0.0)])
def test_scripted_results_equal_the_lockstep_schedule_at_any_concurrency(engine: EngineConfig) -> None:
    jobs = _jobs()
    policy = make_policy("noisy-oracle:0.4")
    reference = run_rollouts(_frozenlake, jobs, policy, engine=LOCKSTEP)
    got = run_rollouts(_frozenlake, jobs, policy, engine=engine)
    assert [t.key() for t in got] == [t.key() for t in reference]  # job order
    assert [t.to_json() for t in got] == [t.to_json() for t in reference]
    assert len({len(t.turns) for t in got}) > 1 and any(t.success for t in got) and not all(t.success for t in got)


@dataclass
class Recorder:
    """A batched policy that records the seeds of every batch it is given."""

    name: str = "recorder"
    batches: list[list[tuple[int, int]]] = field(default_factory=list)

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        self.batches.append([(r.seed, r.turn) for r in requests])
        return [Reply(f"<action>{MOVES[(r.seed + r.turn) % 4]}</action>") for r in requests]


def test_inline_environments_get_exactly_the_lockstep_batches() -> None:
    jobs = _jobs(samples=3)
    lockstep, free = Recorder(), Recorder()
    a = run_rollouts(_frozenlake, jobs, lockstep, engine=EngineConfig(max_active=7, schedule="lockstep"))
    b = run_rollouts(_frozenlake, jobs, free, engine=EngineConfig(max_active=7))
    assert free.batches == lockstep.batches and len(free.batches) > 3
    assert [t.to_json() for t in a] == [t.to_json() for t in b]


class Counting:
    """An async policy that counts the requests it has in flight; each waits ``hold(request)``."""

    name = "counting"

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.release = asyncio.Event()

    async def hold(self, request: Request) -> None:
        await asyncio.sleep(0)

    async def agenerate(self, request: Request) -> Reply:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await self.hold(request)
        finally:
            self.in_flight -= 1
        return Reply(f"<action>{MOVES[(request.seed + request.turn) % 4]}</action>")

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        return [Reply(f"<action>{MOVES[(r.seed + r.turn) % 4]}</action>") for r in requests]


def test_requests_in_flight_never_exceed_the_bound_and_reach_it() -> None:
    class Gathering(Counting):
        async def hold(self, request: Request) -> None:
            if self.in_flight >= 4:  # the bound is reached: let everyone go
                self.release.set()
            await asyncio.wait_for(self.release.wait(), DEADLINE_S)
            await asyncio.sleep(0)

    policy = Gathering()
    stats = EngineStats()
    trajectories = run_rollouts(_frozenlake, _jobs(), policy, engine=EngineConfig(max_concurrency=4), stats=stats)
    assert policy.peak == 4 and stats.peak_requests == 4
    assert len(trajectories) == 24 and stats.done == 24 and stats.turns == sum(len(t.turns) for t in trajectories)
    # the same policy through its batched entry point, lockstep: the same trajectories
    assert _records(trajectories) == _records(run_rollouts(_frozenlake, _jobs(), policy, engine=LOCKSTEP))


class BlockingEnv:
    """FrozenLake whose steps run on the engine's worker pool; each step waits at a barrier until
    ``width`` steps are in flight together, and the peak is recorded."""

    blocking_steps = True
    lock = threading.Lock()
    in_flight = 0
    peak = 0
    barrier: threading.Barrier | None = None

    def __init__(self) -> None:
        self._env = _frozenlake()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def step(self, action: Any) -> StepResult:
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.peak = max(cls.peak, cls.in_flight)
        try:
            if cls.barrier is not None:
                try:
                    cls.barrier.wait(DEADLINE_S)
                except threading.BrokenBarrierError:
                    pass  # fewer than `width` steps left: the last ones go alone
            return self._env.step(action)
        finally:
            with cls.lock:
                cls.in_flight -= 1


def test_environment_steps_in_flight_never_exceed_the_workers_and_reach_them() -> None:
    env_class = type("Blocking", (BlockingEnv,), {"lock": threading.Lock(), "in_flight": 0, "peak": 0,
                                                  "barrier": threading.Barrier(3)})
    stats = EngineStats()
    first = [True]

    def on_finish(_: Any) -> None:  # once trajectories start to end, the barrier would wait for nobody
        if first[0]:
            first[0] = False
            assert env_class.barrier is not None
            env_class.barrier.abort()

    jobs = _jobs(samples=2)
    got = run_rollouts(env_class, jobs, Counting(), engine=EngineConfig(env_workers=3), stats=stats, on_finish=on_finish)
    assert env_class.peak == 3 and stats.peak_env_steps <= 3
    env_class.barrier = None
    reference = run_rollouts(_frozenlake, jobs, Counting(), engine=LOCKSTEP)
    assert [t.to_json() for t in got] == [t.to_json() for t in reference]


def test_a_straggler_does_not_delay_the_other_trajectories() -> None:
    finished: list[int] = []
    jobs = _jobs(tasks=4, samples=2)
    slow_seed = jobs[0].policy_seed

    class Straggler(Counting):
        async def hold(self, request: Request) -> None:
            # trajectory 0's first request is answered only once every other trajectory has ended
            if request.seed == slow_seed and request.turn == 0:
                await asyncio.wait_for(self.release.wait(), DEADLINE_S)

    policy = Straggler()

    def on_finish(trajectory: Any) -> None:
        finished.append(trajectory.policy_seed)
        if len(finished) == len(jobs) - 1:
            policy.release.set()

    run_rollouts(_frozenlake, jobs, policy, on_finish=on_finish)
    assert finished[-1] == slow_seed and len(finished) == len(jobs)


def test_errors_and_failures_stay_with_their_trajectory() -> None:
    jobs = _jobs(tasks=4, samples=2)
    bad = {jobs[1].policy_seed, jobs[4].policy_seed}

    class Failing(Counting):
        async def agenerate(self, request: Request) -> Reply:
            if request.seed in bad:
                return Reply("", error="HTTP 503 after 3 attempt(s)")
            return await super().agenerate(request)

    got = run_rollouts(_frozenlake, jobs, Failing())
    assert [t.policy_seed for t in got if t.error] == [jobs[1].policy_seed, jobs[4].policy_seed]
    assert all(t.ended_by == "policy_error" for t in got if t.error)
    reference = run_rollouts(_frozenlake, jobs, Counting(), engine=LOCKSTEP)
    assert [t.to_json() for t, r in zip(got, reference, strict=True) if not t.error] == \
           [r.to_json() for t, r in zip(got, reference, strict=True) if not t.error]


def test_a_policy_that_raises_ends_the_run_with_finished_trajectories_delivered() -> None:
    jobs = _jobs(tasks=4, samples=2)
    delivered: list[Any] = []

    class Broken(Counting):
        async def agenerate(self, request: Request) -> Reply:
            if len(delivered) >= 3:
                raise RuntimeError("the backend broke")
            return await super().agenerate(request)

    with pytest.raises(RuntimeError, match="the backend broke"):
        run_rollouts(_frozenlake, jobs, Broken(), on_finish=delivered.append)
    # replies already on their way still land; nothing after the failure starts
    assert 3 <= len(delivered) < len(jobs) and all(t.ended_by for t in delivered)


def test_runs_inside_a_running_event_loop_and_as_a_coroutine() -> None:
    jobs = _jobs(tasks=2, samples=2)
    reference = run_rollouts(_frozenlake, jobs, Counting(), engine=LOCKSTEP)

    async def main() -> tuple[list[Any], list[Any]]:
        inside = run_rollouts(_frozenlake, jobs, Counting())  # e.g. a notebook cell
        awaited = await arun_rollouts(_frozenlake, jobs, Counting())  # e.g. an async agent loop
        return inside, awaited

    inside, awaited = asyncio.run(main())
    assert [t.to_json() for t in inside] == [t.to_json() for t in awaited] == [t.to_json() for t in reference]


def _scripted_reply(body: dict[str, Any]) -> str:
    turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return f"<think>go</think><action>{MOVES[(body['seed'] + turns) % 4]}</action>"


def test_a_served_model_gets_every_request_as_it_is_ready_within_the_bound() -> None:
    jobs = _jobs(tasks=8, samples=4)
    config = OpenAIConfig(timeout=30.0, max_retries=0, max_concurrency=64)
    with ScriptedServer(_scripted_reply, Latency(median_s=0.005, sigma=0.5, tail_share=0.05, tail_s=0.05)) as server:
        policy = OpenAIPolicy("scripted", server.base_url, SamplingConfig(temperature=0.0), config)
        stats = EngineStats()
        got = run_rollouts(_frozenlake, jobs, policy, engine=EngineConfig(max_concurrency=5), stats=stats)
        assert 1 < server.peak_in_flight <= 5 and stats.peak_requests <= 5
        assert server.requests == sum(len(t.turns) for t in got) == stats.turns
        lockstep = run_rollouts(_frozenlake, jobs, policy, engine=LOCKSTEP)
        policy.close()
    assert [t.to_json() for t in got] == [t.to_json() for t in lockstep]
    assert not any(t.error for t in got) and len({len(t.turns) for t in got}) > 1


@dataclass
class Repairer:
    """A batched policy for the ``code`` environment: wrong programs first, the reference at turn ``2 + seed % 3``."""

    name: str = "repairer"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        out = []
        for r in requests:
            program = r.env.optimal_actions(1)[0] if r.turn >= 2 + r.seed % 3 else f"def f():\n    return {r.turn}\n"
            out.append(Reply(f"<think>try</think><action>{program}</action>"))
        return out


def test_sandboxed_steps_run_in_parallel_with_the_lockstep_results() -> None:
    def code():  # type: ignore[no-untyped-def]
        return make("code")

    jobs = make_jobs(code().tasks("test", 3), 2, 5, seed=4)
    reference = run_rollouts(code, jobs, Repairer(), engine=LOCKSTEP)
    stats = EngineStats()
    got = run_rollouts(code, jobs, Repairer(), engine=EngineConfig(env_workers=4), stats=stats)
    assert [t.to_json() for t in got] == [t.to_json() for t in reference]
    assert 1 < stats.peak_env_steps <= 4
    assert any(t.success for t in got) and any(len(t.turns) > 2 for t in got)


def test_a_faulty_server_slows_the_run_and_loses_nothing() -> None:
    jobs = _jobs(tasks=8, samples=2)
    faults: dict[int, int | str] = {0: 429, 1: 503, 2: "drop"}

    def fault(key: int, attempt: int) -> int | str | None:  # half the requests fail twice, then pass
        return faults[key % 3] if key % 2 == 0 and attempt < 2 else None

    config = OpenAIConfig(timeout=30.0, max_retries=8, backoff=0.0, max_concurrency=64)
    with ScriptedServer(_scripted_reply, Latency(median_s=0.002), fault=fault) as server:
        policy = OpenAIPolicy("scripted", server.base_url, SamplingConfig(temperature=0.0), config)
        stats = EngineStats()
        got = run_rollouts(_frozenlake, jobs, policy, engine=EngineConfig(max_concurrency=4), stats=stats,
                           policy_name="served")
        policy.close()
        assert server.peak_in_flight <= 4 and server.requests > stats.turns  # retried, within the bound
    with ScriptedServer(_scripted_reply) as healthy:
        policy = OpenAIPolicy("scripted", healthy.base_url, SamplingConfig(temperature=0.0), config)
        reference = run_rollouts(_frozenlake, jobs, policy, policy_name="served")
        policy.close()
    assert not any(t.error for t in got)
    assert [t.to_json() for t in got] == [t.to_json() for t in reference]
