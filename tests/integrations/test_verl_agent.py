"""arlkit's agent loop inside verl (verl 0.9.1, installed by ``make test``), driven by an in-process fake
server manager that returns scripted token ids from the nano model's tokenizer.

What is checked: the loop plays exactly the trajectory ``arlkit eval``'s engine plays on the same
replies and seeds (FrozenLake, Sokoban, SQL; invalid, unparsable and hostile replies included); the
step layout's prompts are the engine's prompts token for token and its responses the sampled ids;
the trajectory layout carries the sampled ids across turns unchanged (even a non-canonical
tokenisation) with the mask on exactly those tokens; budgets end episodes at T; context limits end
them as arlkit's backends do; ``extra_fields`` carry the steps' rewards, states and remaining budgets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="verl is installed by `make test` (Makefile: VERL_PIN)")
from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry  # noqa: E402

from arlkit.algos import RewardConfig  # noqa: E402
from arlkit.envs import make  # noqa: E402
from arlkit.integrations.verl_agent import AGENT_LOOP_CONFIG, TRAJECTORIES_ENV  # noqa: E402
from arlkit.integrations.verl_data import AGENT_NAME, build_rows, row_episode, task_pool  # noqa: E402
from arlkit.integrations.verl_steps import EXTRA_KEY, OutputInfo  # noqa: E402
from arlkit.policies.chat import ChatTokens  # noqa: E402
from arlkit.rollout import PromptConfig  # noqa: E402
from arlkit.rollout.records import Trajectory  # noqa: E402
from arlkit.train.batch import score_trajectory  # noqa: E402

def _turns(trajectory: Trajectory) -> list[tuple[Any, ...]]:
    return [(t.reply, t.action, t.valid, t.reward, t.observation, t.state, t.strict_format) for t in trajectory.turns]


@pytest.mark.parametrize("env_name", ["frozenlake", "sokoban", "sql"])
def test_step_layout_plays_what_arlkit_eval_plays(verl_fakes: Any, env_name: str, tokenizer: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRAJECTORIES_ENV, str(tmp_path))
    row = build_rows(env_name, verl_fakes.ENV_ARGS[env_name], budget="full", groups=1, tasks=2, seed=5, layout="step",
                     reward=RewardConfig(invalid_action_penalty=0.25))[0]
    outputs, server = verl_fakes.play(tokenizer, row, verl_fakes.SCRIPTS[env_name], session=2)
    [line] = (tmp_path / next(p.name for p in tmp_path.iterdir())).read_text().splitlines()
    ours = Trajectory.from_json(json.loads(line))
    reference = verl_fakes.engine_trajectory(row, verl_fakes.Replay(tokenizer, server), session=2)
    assert _turns(ours) == _turns(reference) and ours.ended_by == reference.ended_by
    assert (ours.env_seed, ours.policy_seed) == (reference.env_seed, reference.policy_seed)
    hostile = verl_fakes.SCRIPTS[env_name].index(verl_fakes.HOSTILE)
    assert len(ours.turns) > hostile and not ours.turns[hostile].valid  # a hostile reply is an invalid action
    outcome = score_trajectory(reference, RewardConfig(invalid_action_penalty=0.25))
    chat = ChatTokens(tokenizer)
    assert len(outputs) == len(reference.turns)
    for t, (output, turn) in enumerate(zip(outputs, reference.turns, strict=True)):
        assert output.prompt_ids == chat.prompt_ids(turn.prompt.messages)  # the engine's prompt, token for token
        assert output.prompt_ids == server.calls[t]["prompt_ids"]
        assert output.response_ids == server.sampled[t] and output.response_mask == [1] * len(server.sampled[t])
        assert output.response_logprobs == pytest.approx([-0.01 * (k + 1) for k in range(len(server.sampled[t]))])
        assert output.reward_score == pytest.approx(outcome.score)
        info = OutputInfo.from_dict(output.extra_fields[EXTRA_KEY])
        [step] = info.turns
        assert (info.layout, info.sample, info.budget, info.num_turns) == ("step", 2, reference.budget, len(outputs))
        assert (step.step, step.remaining, step.valid) == (t, reference.budget - t, turn.valid)
        assert step.reward == pytest.approx(outcome.step_rewards[t])
        assert step.state == (repr(turn.state) if turn.state != "" else "")
    assert len({c["request_id"] for c in server.calls}) == 1  # one sticky session per trajectory


def test_samples_of_a_group_get_the_seeds_of_arlkit_train_jobs() -> None:
    row = build_rows("frozenlake", {"size": 4, "slippery": True}, budget="full", groups=1, tasks=1, seed=1)[0]
    episode = row_episode(row["extra_info"])
    task = task_pool(make("frozenlake", size=4, slippery=True), episode.split, episode.tasks)[episode.task_index]
    seeds = {episode.job(task, j).env_seed for j in range(4)}
    assert len(seeds) == 4 and episode.job(task, 0).env_seed == row["extra_info"]["env_seed"]


@pytest.mark.parametrize("prompt", [PromptConfig(counters="observation"), PromptConfig(profile="compact"),
                                    PromptConfig("hidden")])
def test_trajectory_layout_carries_the_sampled_ids(verl_fakes: Any, prompt: PromptConfig, tokenizer: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRAJECTORIES_ENV, str(tmp_path))

    def one_char_per_token(text: str) -> list[int]:  # a tokenisation the tokenizer itself would never produce
        return [i for ch in text for i in tokenizer(ch, add_special_tokens=False)["input_ids"]]

    row = build_rows("frozenlake", {"size": 4}, budget="full", groups=1, tasks=2, seed=2, prompt=prompt,
                     layout="trajectory")[0]
    [output], server = verl_fakes.play(tokenizer, row, verl_fakes.SCRIPTS["frozenlake"], encode=one_char_per_token)
    info = OutputInfo.from_dict(output.extra_fields[EXTRA_KEY])
    assert info.layout == "trajectory" and info.num_turns == len(server.sampled) == len(info.turns)
    assert output.prompt_ids == server.calls[0]["prompt_ids"]
    response, mask, logprobs = output.response_ids, output.response_mask, output.response_logprobs
    assert len(response) == len(mask) == len(logprobs)
    trained = [k for k, m in enumerate(mask) if m]
    assert trained == [k for t in info.turns for k in range(t.start, t.end)]
    for t, sampled in zip(info.turns, server.sampled, strict=True):
        assert response[t.start:t.end] == sampled  # exactly the sampled ids, never re-tokenised
        assert logprobs[t.start:t.end] == pytest.approx([-0.01 * (k + 1) for k in range(len(sampled))])
    assert all(logprobs[k] == 0.0 for k in range(len(mask)) if not mask[k])
    for t in range(1, len(server.calls)):  # each request is the previous stream plus the observation
        stream = output.prompt_ids + response
        assert server.calls[t]["prompt_ids"] == stream[: len(server.calls[t]["prompt_ids"])]
    # the observations between the replies are the chat template's rendering of arlkit's next prompt
    [line] = (tmp_path / next(p.name for p in tmp_path.iterdir())).read_text().splitlines()
    ours = Trajectory.from_json(json.loads(line))
    reference = verl_fakes.engine_trajectory(row, verl_fakes.Replay(tokenizer, server))
    assert _turns(ours) == _turns(reference)
    chat = ChatTokens(tokenizer)
    for t in range(1, len(reference.turns)):
        text = tokenizer.decode(server.calls[t]["prompt_ids"])
        assert text == chat.render(reference.turns[t].prompt.messages)


def test_budget_ends_the_episode_at_t(verl_fakes: Any, tokenizer: Any) -> None:
    wall = ["<think>w</think><action>Up</action>"]  # the agent starts on the top row: a valid move that changes nothing
    for layout in ("step", "trajectory"):
        row = build_rows("frozenlake", {"size": 4}, budget="10%", groups=1, tasks=1, seed=0, layout=layout,
                         prompt=PromptConfig(counters="observation"))[0]
        budget = row["extra_info"]["budget"]
        outputs, server = verl_fakes.play(tokenizer, row, wall)
        info = OutputInfo.from_dict(outputs[-1].extra_fields[EXTRA_KEY])
        assert len(server.calls) == budget and info.num_turns == budget and info.ended_by == "budget"
        assert len(outputs) == (budget if layout == "step" else 1)
        assert [t.remaining for t in info.turns][-1] == 1


def test_context_limits_end_the_trajectory(verl_fakes: Any, tokenizer: Any) -> None:
    row = build_rows("frozenlake", {"size": 4}, budget="full", groups=1, tasks=1, seed=0, layout="step")[0]
    first = len(ChatTokens(tokenizer).prompt_ids(row["prompt"]))
    outputs, _ = verl_fakes.play(tokenizer, row, verl_fakes.SCRIPTS["frozenlake"], prompt_length=first + 5)
    assert len(outputs) == 1
    assert OutputInfo.from_dict(outputs[0].extra_fields[EXTRA_KEY]).ended_by == "context_length_exceeded"
    row = build_rows("frozenlake", {"size": 4}, budget="full", groups=1, tasks=1, seed=0, layout="trajectory",
                     prompt=PromptConfig(profile="compact"))[0]
    [output], server = verl_fakes.play(tokenizer, row, verl_fakes.SCRIPTS["frozenlake"][:1], response_length=60)
    info = OutputInfo.from_dict(output.extra_fields[EXTRA_KEY])
    assert info.ended_by == "context_length_exceeded" and 0 < len(output.response_ids) <= 60
    assert all(c["sampling"]["max_tokens"] <= 60 for c in server.calls)


def test_max_turn_tokens_caps_every_reply(verl_fakes: Any, tokenizer: Any) -> None:
    row = build_rows("sokoban", budget="full", groups=1, tasks=1, seed=0, layout="step")[0]
    outputs, server = verl_fakes.play(tokenizer, row, verl_fakes.SCRIPTS["sokoban"], max_turn_tokens=3)
    assert all(c["sampling"]["max_tokens"] == 3 for c in server.calls)
    assert all(len(o.response_ids) <= 3 for o in outputs)


def test_stale_rows_and_impossible_layouts_are_refused(verl_fakes: Any, tokenizer: Any) -> None:
    row = build_rows("frozenlake", {"size": 4}, budget="full", groups=1, tasks=2, seed=0)[0]
    stale = {**row, "prompt": [{"role": "user", "content": "something else"}]}
    with pytest.raises(ValueError, match="not the first prompt arlkit builds"):
        verl_fakes.play(tokenizer, stale, ["<action>Down</action>"])
    with pytest.raises(ValueError, match="counters=observation"):
        build_rows("frozenlake", {"size": 4}, groups=1, tasks=1, layout="trajectory")
    with pytest.raises(ValueError, match="history"):
        build_rows("frozenlake", {"size": 4}, groups=1, tasks=1, layout="trajectory",
                   prompt=PromptConfig(profile="compact", history=2))


def test_the_shipped_agent_loop_config_names_the_loop() -> None:
    [entry] = OmegaConf.load(AGENT_LOOP_CONFIG)
    assert entry.name == AGENT_NAME and entry["_target_"] == "arlkit.integrations.verl_agent.ArlkitAgentLoop"
    assert _agent_loop_registry[AGENT_NAME]["_target_"] == entry["_target_"]


def test_trajectory_layout_through_verls_own_worker(verl_fakes: Any, tokenizer: Any) -> None:
    """verl's (legacy) agent-loop worker pads the trajectory output into its batch: the mask covers the
    sampled tokens and the score sits on the last response token."""
    import asyncio

    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    row = build_rows("frozenlake", {"size": 4}, budget="full", groups=1, tasks=1, seed=3, layout="trajectory",
                     prompt=PromptConfig(profile="compact"))[0]
    [output], _ = verl_fakes.play(tokenizer, row, verl_fakes.SCRIPTS["frozenlake"], prompt_length=256,
                                  response_length=1024)
    worker = object.__new__(AgentLoopWorker)  # with what its postprocessing reads of a worker
    worker.rollout_config = OmegaConf.create({"prompt_length": 256, "response_length": 1024})
    worker.tokenizer, worker.processor, worker.mm_processor_kwargs = tokenizer, None, {}
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False
    padded = asyncio.run(worker._agent_loop_postprocess(output, False, raw_prompt=row["prompt"]))
    batch = worker._postprocess([padded]).batch
    n = len(output.response_ids)
    assert batch["responses"][0, :n].tolist() == output.response_ids
    assert batch["prompts"][0, -len(output.prompt_ids):].tolist() == output.prompt_ids
    assert batch["response_mask"][0].tolist() == output.response_mask + [0] * (1024 - n)
    scores = batch["rm_scores"][0]
    assert float(scores[n - 1]) == pytest.approx(output.reward_score) and int(torch.count_nonzero(scores)) <= 1
