"""arlkit's budget-aware agent loop inside verl's rollout workers (verl 0.9.1; docs/scale-out.md).

``ArlkitAgentLoop`` is a verl ``AgentLoopBase`` registered as ``arlkit_agent`` (the ``agent_name`` of
every row ``arlkit verl data`` writes). verl's workers build it from ``agent_loop_config_path``, a
YAML list naming this class (:data:`AGENT_LOOP_CONFIG`, shipped with arlkit), so every Ray process
finds it. For each row it:

1. rebuilds the environment and the task from the row's ``extra_info``
   (:func:`arlkit.integrations.verl_data.row_episode`; sample j of a group gets ``arlkit train``'s
   seeds for job j) and checks the row's prompt is the one arlkit builds for it;
2. plays the trajectory with the rollout engine's own per-trajectory steps
   (:func:`~arlkit.rollout.turns.start_trajectory`, :func:`~arlkit.rollout.turns.next_request`,
   :func:`~arlkit.rollout.turns.record_reply`): arlkit's prompts (``turn_messages``: announced or
   hidden budget, counters, history window, profile), the environment's parser, invalid and
   unparsable replies handled exactly as ``arlkit eval`` handles them, the budget ending the episode
   at T, sandboxed steps off the event loop;
3. samples each reply from verl's server manager with token ids, never re-tokenising what was
   sampled, and returns it in the row's layout:

   - ``step``: one output per environment step (ARLArena's rows, verl's v1 trainer): the exact
     prompt ids the reply was sampled after, then the sampled ids (all trained);
   - ``trajectory``: one output per trajectory: the sampled ids of each reply with the observations
     between them, joined by verl's own continuous-token builder (the chat template's boundary
     tokens included) and masked out of the loss. Needs an append-only prompt
     (:func:`~arlkit.integrations.verl_data.check_layout`).

Every output's ``reward_score`` is the trajectory's score as ``arlkit train`` computes it
(:func:`arlkit.train.batch.score_trajectory` with the row's reward settings), so verl's reward
function is not called; ``extra_fields["reward_extra_info"]`` gives verl ``score``, ``success`` and
``num_turns`` (validation metrics; dynamic filtering with ``filter_groups.metric=score``), and
``extra_fields["arlkit"]`` holds the steps' rewards, states, remaining budgets and token spans
(:class:`~arlkit.integrations.verl_steps.OutputInfo`) that the trainer hook
(:mod:`arlkit.integrations.verl_trainer`) needs for GiGPO and EMPG. A prompt longer than
``rollout.prompt_length`` (step layout) or a conversation reaching ``rollout.response_length``
(trajectory layout) ends the trajectory as ``context_length_exceeded``, as arlkit's own backends do.

With ``ARLKIT_VERL_TRAJECTORIES=DIR`` each worker process appends the finished trajectories to
``DIR/trajectories-<host>-<pid>.jsonl`` (arlkit's trajectory records with token ids, as in an eval run's
``trajectories.jsonl``).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from arlkit.envs import make
from arlkit.envs.capabilities import steps_block
from arlkit.integrations.verl_data import AGENT_LOOP_CONFIG, AGENT_NAME, RowEpisode, row_episode, task_pool
from arlkit.integrations.verl_steps import EXTRA_KEY, OutputInfo, TurnInfo
from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, Reply, Request
from arlkit.rollout.turns import LiveTrajectory, next_request, record_reply, start_trajectory
from arlkit.train.batch import score_trajectory

__all__ = ["AGENT_LOOP_CONFIG", "TRAJECTORIES_ENV", "ArlkitAgentLoop"]

TRAJECTORIES_ENV = "ARLKIT_VERL_TRAJECTORIES"
"""Environment variable: a directory where every worker process appends its finished trajectories."""
T = TypeVar("T")


class _Environments:
    """Environments and task pools of one worker process: a run takes an idle environment of its
    kind (or makes one) and gives it back; each task pool is built once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, str, str, int], list[Any]] = {}
        self._pools: dict[tuple[str, str, str, int], list[Any]] = {}

    def take(self, episode: RowEpisode) -> tuple[Any, Any]:
        """``(environment, task)`` for ``episode``."""
        key = episode.env_key
        with self._lock:
            idle = self._idle.setdefault(key, [])
            env = idle.pop() if idle else None
            pool = self._pools.get(key)
        env = env if env is not None else make(episode.env, **episode.env_args)
        if pool is None:
            pool = task_pool(env, episode.split, episode.tasks)
            with self._lock:
                self._pools.setdefault(key, pool)
        task = pool[episode.task_index]
        if task.task_id != episode.task_id:
            raise ValueError(f"the row's task {episode.task_id!r} is {task.task_id!r} here: the environment's task set "
                             "differs from the one the data was written with (arlkit version or env args)")
        return env, task

    def give_back(self, episode: RowEpisode, env: Any) -> None:
        with self._lock:
            self._idle.setdefault(episode.env_key, []).append(env)


_ENVIRONMENTS = _Environments()
_RECORD_LOCK = threading.Lock()


@register(AGENT_NAME)
class ArlkitAgentLoop(AgentLoopBase):
    """arlkit's agent loop (module docstring).

    Args:
        max_turn_tokens: the most tokens one reply may take (``None``: what verl's server allows,
            ``rollout.response_length`` at most). Set it in the agent-loop YAML.
    """

    def __init__(self, *args: Any, max_turn_tokens: int | None = None, **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # verl hands every agent loop its tool list; arlkit's environments are the tools
        super().__init__(*args, **kwargs)
        self.max_turn_tokens = max_turn_tokens
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput | list[AgentLoopOutput]:
        episode = row_episode(kwargs["extra_info"])
        sample = int(kwargs.get("session_id") or 0)  # verl's v1 trainer numbers the samples of a group
        env, task = await asyncio.to_thread(_ENVIRONMENTS.take, episode)
        try:
            job = episode.job(task, sample)
            live = await self._env_call(env, start_trajectory, env, task, sample=sample, budget=episode.budget,
                                        env_seed=job.env_seed, policy_seed=job.policy_seed, group=job.group,
                                        policy_name="verl", prompt=episode.prompt)
            _check_row_prompt(kwargs.get("raw_prompt"), next_request(live).messages)
            play = self._play_steps if episode.layout == "step" else self._play_trajectory
            return await play(live, episode, sample, dict(sampling_params))
        finally:
            _ENVIRONMENTS.give_back(episode, env)

    # -- the two layouts -------------------------------------------------------------------------------

    async def _play_steps(self, live: LiveTrajectory, episode: RowEpisode, sample: int,
                          sampling: dict[str, Any]) -> list[AgentLoopOutput]:
        request_id, steps = uuid.uuid4().hex, []
        if self.max_turn_tokens:
            sampling["max_tokens"] = min(self.max_turn_tokens, self.response_length)
        timing = {"generate": 0.0, "env": 0.0}
        while True:
            request = next_request(live)
            prompt_ids = await self._prompt_ids(request)
            if len(prompt_ids) > self.prompt_length:
                record_reply(live, request, Reply("", finish_reason=CONTEXT_LENGTH_EXCEEDED), False)
                break
            reply = await self._sample(request_id, prompt_ids, sampling, timing)
            steps.append((prompt_ids, reply))
            if await self._record(live, request, reply, timing):
                break
        spans = [(0, min(len(r.token_ids or ()), self.response_length)) for _, r in steps]
        info = self._finish(live, episode, sample, "step", spans)
        metrics = AgentLoopMetrics(generate_sequences=timing["generate"], tool_calls=timing["env"])
        outputs = []
        for (prompt_ids, reply), turn in zip(steps, info.turns, strict=True):
            ids = list(reply.token_ids or ())[: self.response_length]
            record = replace(info, turns=(turn,))
            outputs.append(AgentLoopOutput(
                prompt_ids=prompt_ids, response_ids=ids, response_mask=[1] * len(ids),
                response_logprobs=list(reply.logprobs)[: len(ids)] if reply.logprobs is not None else None,
                reward_score=info.score, num_turns=2, metrics=metrics, extra_fields=_extra_fields(record),
            ))
        return outputs

    async def _play_trajectory(self, live: LiveTrajectory, episode: RowEpisode, sample: int,
                               sampling: dict[str, Any]) -> AgentLoopOutput:
        request_id, timing = uuid.uuid4().hex, {"generate": 0.0, "env": 0.0}
        request = next_request(live)
        messages = [dict(m) for m in request.messages]
        runtime = await self._prompt_ids(request)
        fits = len(runtime) <= self.prompt_length
        mask: list[int] = []
        logprobs: list[float] = []
        spans: list[tuple[int, int]] = []
        while True:
            room = self.response_length - len(mask)
            if room < 1 or not fits:
                record_reply(live, request, Reply("", finish_reason=CONTEXT_LENGTH_EXCEEDED), False)
                break
            turn_sampling = {**sampling, "max_tokens": min(room, self.max_turn_tokens or room)}
            reply = await self._sample(request_id, runtime, turn_sampling, timing)
            merged, mask, merged_lp = await self.ct_merge_assistant_token(
                runtime, list(reply.token_ids or ()), mask, logprobs if (logprobs or reply.logprobs) else None,
                assistant_logprobs=list(reply.logprobs) if reply.logprobs is not None else None)
            runtime, logprobs = merged.token_ids, merged_lp or []
            spans.append((len(mask) - merged.appended_token_count, len(mask)))
            if await self._record(live, request, reply, timing):
                break
            previous = [*messages, {"role": "assistant", "content": live.trajectory.turns[-1].reply}]
            request = next_request(live)
            messages = [dict(m) for m in request.messages]
            merged, new_mask, new_lp = await self.ct_merge_context_msg(
                previous, messages, runtime, mask, logprobs if logprobs else None)
            if len(new_mask) >= self.response_length:  # the next observation does not fit
                record_reply(live, request, Reply("", finish_reason=CONTEXT_LENGTH_EXCEEDED), False)
                break
            runtime, mask, logprobs = merged.token_ids, new_mask, new_lp or []
        info = self._finish(live, episode, sample, "trajectory", spans)
        prompt_ids, response = runtime[: len(runtime) - len(mask)], runtime[len(runtime) - len(mask):]
        return AgentLoopOutput(
            prompt_ids=prompt_ids[-self.prompt_length:],  # longer only when nothing was sampled after it
            response_ids=response[: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=info.score, num_turns=1 + 2 * len(live.trajectory.turns),
            metrics=AgentLoopMetrics(generate_sequences=timing["generate"], tool_calls=timing["env"]),
            extra_fields=_extra_fields(info),
        )

    # -- one turn ---------------------------------------------------------------------------------------

    async def _prompt_ids(self, request: Request) -> list[int]:
        """The request's prompt as verl's continuous-token builder renders it (the chat template with
        verl's ``apply_chat_template_kwargs``), never truncated."""
        return await asyncio.to_thread(self.continuous_token_builder.build_initial_tokens,
                                       [dict(m) for m in request.messages])

    async def _sample(self, request_id: str, prompt_ids: list[int], sampling: dict[str, Any],
                      timing: dict[str, float]) -> Reply:
        """One reply from verl's server manager, as an arlkit :class:`Reply` (text decoded from the ids)."""
        started = time.perf_counter()
        out = await self.server_manager.generate(request_id=request_id, prompt_ids=list(prompt_ids),
                                                 sampling_params=dict(sampling))
        timing["generate"] += time.perf_counter() - started
        ids = [int(i) for i in out.token_ids]
        text = await asyncio.to_thread(self.tokenizer.decode, ids, skip_special_tokens=True)
        logprobs = tuple(float(x) for x in out.log_probs) if out.log_probs else None
        return Reply(text=text, token_ids=tuple(ids), logprobs=logprobs, prompt_ids=tuple(prompt_ids))

    async def _record(self, live: LiveTrajectory, request: Request, reply: Reply, timing: dict[str, float]) -> bool:
        """Step the environment on ``reply`` (off the event loop when its steps block); whether the trajectory ended."""
        started = time.perf_counter()
        ended = await self._env_call(live.env, record_reply, live, request, reply, False)
        timing["env"] += time.perf_counter() - started
        return ended

    @staticmethod
    async def _env_call(env: Any, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if steps_block(env):
            return await asyncio.to_thread(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    def _finish(self, live: LiveTrajectory, episode: RowEpisode, sample: int, layout: str,
                spans: list[tuple[int, int]]) -> OutputInfo:
        """arlkit's record of the finished trajectory (and its line in ``$ARLKIT_VERL_TRAJECTORIES``)."""
        trajectory = live.trajectory
        outcome = score_trajectory(trajectory, episode.reward)
        turns = tuple(
            TurnInfo(step=t, reward=outcome.step_rewards[t], state=repr(turn.state) if turn.state != "" else "",
                     remaining=episode.budget - t, valid=turn.valid, strict_format=turn.strict_format,
                     start=spans[t][0], end=spans[t][1])
            for t, turn in enumerate(trajectory.turns)
        )
        _write_record(trajectory.to_json(with_tokens=True))
        return OutputInfo(layout=layout, env=episode.env, task_id=episode.task_id, sample=sample, budget=episode.budget,
                          budgetmix=episode.budget_spec == "budgetmix", score=outcome.score, success=trajectory.success,
                          ended_by=str(trajectory.ended_by), num_turns=len(turns), turns=turns)


def _extra_fields(info: OutputInfo) -> dict[str, Any]:
    """An output's ``extra_fields``: arlkit's record, and verl's ``reward_extra_info`` (what verl logs
    per data source in validation, and what its dynamic filtering reads: ``filter_groups.metric=score``)."""
    reward_info = {"score": info.score, "success": float(info.success), "num_turns": info.num_turns}
    return {EXTRA_KEY: info.as_dict(), "reward_extra_info": reward_info}


def _check_row_prompt(raw_prompt: Any, messages: Any) -> None:
    """The row's prompt must be the first prompt arlkit builds for its task (else the data is stale)."""
    if raw_prompt is None:
        return
    shown = [(str(m["role"]), str(m["content"])) for m in list(raw_prompt)]
    ours = [(str(m["role"]), str(m["content"])) for m in messages]
    if shown != ours:
        raise ValueError("the row's prompt is not the first prompt arlkit builds for its task, budget and seeds: "
                         "rewrite the data with `arlkit verl data` (check it with `arlkit budgetmix audit`)")


def _write_record(record: dict[str, Any]) -> None:
    folder = os.environ.get(TRAJECTORIES_ENV, "").strip()
    if not folder:
        return
    path = Path(folder) / f"trajectories-{socket.gethostname()}-{os.getpid()}.jsonl"
    line = json.dumps(record, ensure_ascii=False) + "\n"
    with _RECORD_LOCK:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line)

