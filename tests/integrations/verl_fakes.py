"""Fakes for the verl integration tests (loaded by the ``verl_fakes`` fixture, tests/integrations/conftest.py):
an in-process stand-in for verl's server manager that returns scripted token ids, the agent loop built
as verl's workers build it, and arlkit's engine replaying the same replies."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.workers.rollout.replica import TokenOutput

from arlkit.envs import make
from arlkit.integrations.verl_agent import ArlkitAgentLoop
from arlkit.integrations.verl_data import row_episode, task_pool
from arlkit.policies import Reply
from arlkit.rollout import run_rollouts
from arlkit.rollout.records import Trajectory

HOSTILE = "<action>Down</action><action>Up</action>" + "\x00\x1b[2J" * 50 + "'); DROP TABLE x; --" * 40
SCRIPTS = {
    "frozenlake": ["<think>go</think><action>Down</action>", "no tags at all", HOSTILE,
                   "<think>r</think><action>Right</action>", "<action>Fly</action>"],
    "sokoban": [HOSTILE, "<think>a</think><action>up</action>", "<action>left</action>", "<action>down</action>"],
    "sql": ["<think>look</think><action>SELECT count(*) FROM student</action>",
            "<action>DROP TABLE student</action>", HOSTILE, "<action>submit SELECT 1</action>"],
}
ENV_ARGS = {"frozenlake": {"size": 4}, "sokoban": {}, "sql": {}}


class FakeServer:
    """verl's server manager, scripted: reply i is ``script[i]`` (the last one repeats), encoded by
    ``encode`` and ended by ``<|im_end|>``; log-probs are made up but distinct per token."""

    def __init__(self, tokenizer: Any, script: Sequence[str], encode: Callable[[str], list[int]] | None = None) -> None:
        self.tokenizer, self.script = tokenizer, list(script)
        self.encode = encode or (lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"]))
        self.calls: list[dict[str, Any]] = []
        self.sampled: list[list[int]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **_: Any) -> TokenOutput:
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "sampling": dict(sampling_params)})
        text = self.script[min(len(self.calls) - 1, len(self.script) - 1)]
        ids = self.encode(text) + [self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        limit = sampling_params.get("max_tokens")
        ids = ids[:limit] if limit else ids
        self.sampled.append(ids)
        return TokenOutput(token_ids=ids, log_probs=[-0.01 * (k + 1) for k in range(len(ids))])


def _loop(tokenizer: Any, server: FakeServer, *, prompt_length: int = 8192, response_length: int = 8192,
          **kwargs: Any) -> ArlkitAgentLoop:
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": prompt_length,
                                                                  "response_length": response_length}}, "data": {}})
    return ArlkitAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                           processor=None, dataset_cls=None, data_config=DictConfigWrap(config.data),
                           hf_model_type="qwen2", **kwargs)


def play(tokenizer: Any, row: dict[str, Any], script: Sequence[str], *, session: int = 0,
         encode: Callable[[str], list[int]] | None = None, **loop_kwargs: Any) -> tuple[list[Any], FakeServer]:
    """Run the agent loop on ``row`` (inside an event loop, as verl's workers do)."""
    server = FakeServer(tokenizer, script, encode)

    async def go() -> Any:
        return await _loop(tokenizer, server, **loop_kwargs).run(
            {"temperature": 1.0}, extra_info=row["extra_info"], raw_prompt=row["prompt"], session_id=session)

    out = asyncio.run(go())
    return (out if isinstance(out, list) else [out]), server


class Replay:
    """A scripted arlkit policy that answers turn t with the fake server's reply t (text and ids)."""

    name = "replay"

    def __init__(self, tokenizer: Any, server: FakeServer) -> None:
        self.tokenizer, self.server = tokenizer, server

    def generate(self, requests: Sequence[Any]) -> list[Reply]:
        out = []
        for request in requests:
            ids = self.server.sampled[request.turn]
            out.append(Reply(self.tokenizer.decode(ids, skip_special_tokens=True), token_ids=tuple(ids)))
        return out


def engine_trajectory(row: dict[str, Any], replay: Replay, session: int = 0) -> Trajectory:
    """What arlkit's rollout engine plays for the row's job ``session`` on the same replies."""
    episode = row_episode(row["extra_info"])
    env = make(episode.env, **episode.env_args)
    task = task_pool(env, episode.split, episode.tasks)[episode.task_index]
    job = episode.job(task, session)
    return run_rollouts(lambda: make(episode.env, **episode.env_args), [job], replay, episode.prompt,
                        keep_prompts=True, policy_name="verl")[0]
