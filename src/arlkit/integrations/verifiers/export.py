"""Any arlkit environment as a verifiers (v1) environment, run by verifiers' own runner.

This module is a verifiers plugin under the id ``arlkit-verifiers`` (verifiers' loader imports an
id as a top-level module: :mod:`arlkit_verifiers` re-exports this one). It exports a taskset
(:class:`ArlkitTaskset`: one row per arlkit task and announced budget, its system prompt the
budget-aware one arlkit shows a model, its prompt the first observation),
an environment (:class:`ArlkitEnv`: its ``run()`` steps the arlkit environment with every reply
of the ``player`` seat and answers with the next observation) and an in-process chat harness
(:class:`ChatHarness`, the seat's default: it sends the conversation to the rollout's model
endpoint, so it needs no program installed in a sandbox).

.. code-block:: bash

    vf-eval arlkit-verifiers --env.taskset.env-name frozenlake \\
        --env.taskset.budgets '[4, 8]' -n 10 -r 4 -m MODEL --client.base-url URL

or in Python :func:`load_environment` (``env_name``, the taskset's options) and verifiers'
``run_eval``. Each trace's rewards: ``arlkit_return`` (the episode's total reward); metrics:
``arlkit_success`` (1.0 when the arlkit environment reports success), ``arlkit_turns``,
``arlkit_truncated`` (the announced budget ran out first).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    import verifiers.v1 as vf
    from pydantic import Field, field_validator
    from verifiers.v1.dialects.chat import message_to_wire
    from verifiers.v1.runtimes import ProgramResult, SubprocessConfig
except ImportError as exc:
    from arlkit.extras import install_hint

    raise ImportError(f"the verifiers adapter needs verifiers: {install_hint('verifiers', make_target='install-extras')}") from exc

from arlkit.envs import list_envs
from arlkit.integrations.episode import ArlkitEpisode

__all__ = ["ArlkitEnv", "ArlkitTaskset", "ChatHarness", "env_config", "load_environment"]

PLUGIN_ID = "arlkit-verifiers"


def _env_seed(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, index])


class ArlkitTasksetConfig(vf.TasksetConfig):
    env_name: str = "frozenlake"
    """The arlkit environment (``arlkit eval --list-envs``)."""
    env_args: dict[str, Any] = Field(default_factory=dict)
    """Its options (as ``--env-arg``)."""
    split: str = "test"
    n_tasks: int | None = None
    """Tasks of the split (default: up to 100, as many as exist)."""
    budgets: list[int] = Field(default_factory=list)
    """Announced turn budgets: one row per task and budget (default: the family's T_max)."""
    parse_replies: bool = True
    """Replies are parsed as arlkit parses them (``<action>`` tags); off: the reply is the action."""
    counters: bool = False
    """Observations end with the turns completed and remaining."""
    seed: int = 0
    """Seeds each task's environment randomness (slippery moves)."""

    @field_validator("env_name")
    @classmethod
    def _known_env(cls, name: str) -> str:
        names = [n for n in list_envs() if n != "verifiers"]
        if name not in names:
            raise ValueError(f"unknown arlkit env {name!r}; valid choices: {', '.join(names)}")
        return name

    @field_validator("split")
    @classmethod
    def _known_split(cls, split: str) -> str:
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r}; valid choices: train, test")
        return split

    @field_validator("budgets")
    @classmethod
    def _positive(cls, budgets: list[int]) -> list[int]:
        if any(b < 1 for b in budgets):
            raise ValueError(f"budgets must be >= 1 turn, got {budgets}")
        return budgets


class ArlkitData(vf.TaskData):
    env_name: str
    env_args: dict[str, Any] = Field(default_factory=dict)
    split: str = "test"
    n_tasks: int | None = None
    task_index: int
    budget: int
    parse_replies: bool = True
    counters: bool = False
    seed: int = 0


def episode_for(data: ArlkitData) -> ArlkitEpisode:
    """The arlkit episode a row describes."""
    return ArlkitEpisode(data.env_name, split=data.split, n_tasks=data.n_tasks, budget=data.budget,
                         parse_replies=data.parse_replies, counters=data.counters, **data.env_args)


class ArlkitTask(vf.Task[ArlkitData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def arlkit_return(self, trace) -> float:
        return float(trace.info.get("arlkit_return", 0.0))

    @vf.metric
    async def arlkit_success(self, trace) -> float:
        return 1.0 if trace.info.get("arlkit_success") else 0.0

    @vf.metric
    async def arlkit_turns(self, trace) -> float:
        return float(trace.info.get("arlkit_turns", 0))

    @vf.metric
    async def arlkit_truncated(self, trace) -> float:
        return 1.0 if trace.info.get("arlkit_truncated") else 0.0


class ArlkitTaskset(vf.Taskset[ArlkitTask, ArlkitTasksetConfig]):
    def load(self):
        config = self.config
        episode = ArlkitEpisode(config.env_name, split=config.split, n_tasks=config.n_tasks, **config.env_args)
        try:
            budgets = config.budgets or [episode.env.t_max]
            for index, task in enumerate(episode.tasks()):
                for budget in budgets:
                    data = ArlkitData(id=f"{task.task_id}@T{budget}", name=f"{config.env_name}/{task.task_id}",
                                      prompt="", env_name=config.env_name, env_args=config.env_args,
                                      split=config.split, n_tasks=config.n_tasks, task_index=index, budget=budget,
                                      parse_replies=config.parse_replies, counters=config.counters, seed=config.seed)
                    row = episode_for(data)
                    try:
                        observation, info = row.reset(task=index, rng=_env_seed(config.seed, index))
                    finally:
                        row.close()
                    yield ArlkitTask(data.model_copy(update={"prompt": observation,
                                                             "system_prompt": info["system_prompt"]}), config.task)
        finally:
            episode.close()


class ArlkitEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(runtime=SubprocessConfig())
    """The seat the model plays; a local runtime, as :class:`ChatHarness` runs no program."""


class ArlkitEnv(vf.Env[ArlkitEnvConfig]):
    """Each reply steps the arlkit environment; its observation is the next user turn."""

    async def run(self, task, agents):
        data = task.data
        episode = episode_for(data)
        try:
            episode.reset(task=data.task_index, rng=_env_seed(data.seed, data.task_index))
            total, truncated = 0.0, False
            async with agents.player.interaction(task) as exchange:
                segment = await exchange.turn()
                while not segment.terminated:
                    observation, reward, terminated, truncated, _ = episode.step(segment.last_reply)
                    total += reward
                    if terminated or truncated:
                        break
                    segment = await exchange.turn(observation)
                exchange.trace.info.update(arlkit_return=total, arlkit_success=episode.solved,
                                           arlkit_turns=episode.turns, arlkit_truncated=bool(truncated))
        finally:
            episode.close()


class ChatHarnessConfig(vf.HarnessConfig):
    timeout: float = 600.0
    """Seconds one model call may take."""


class ChatHarness(vf.Harness[ChatHarnessConfig]):
    """One chat completion per segment, sent from this process to the rollout's endpoint (the
    interception server, which records the turn): no program, no sandbox."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        import httpx

        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages.extend(message_to_wire(m) for m in prompt)
        async with httpx.AsyncClient(timeout=self.config.timeout) as client:
            response = await client.post(f"{endpoint.rstrip('/')}/chat/completions",
                                         json={"model": ctx.model, "messages": messages},
                                         headers={"Authorization": f"Bearer {secret}"})
        if response.status_code != 200:
            return ProgramResult(1, "", f"the model call failed: HTTP {response.status_code}: {response.text[:500]}")
        return ProgramResult(0, "", "")


def env_config(env_name: str = "frozenlake", **options: Any) -> vf.EnvConfig:
    """The verifiers ``EnvConfig`` of an arlkit environment (:class:`ArlkitTasksetConfig` options)."""
    return vf.resolve_env_config({"taskset": {"id": PLUGIN_ID, "env_name": env_name, **options}})


def load_environment(env_name: str = "frozenlake", **options: Any) -> vf.Env:
    """An arlkit environment as a verifiers ``Env``, through verifiers' own ``load_environment``."""
    return vf.load_environment(env_config(env_name, **options))
