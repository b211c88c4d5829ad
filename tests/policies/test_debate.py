"""Debate and aggressive debate: majority and tie rules, revision rounds, the judge, budgets count
environment turns, every agent's messages recorded, and a served model driving debate:3@openai."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from arlkit.config import ConfigError
from arlkit.envs import make
from arlkit.metrics.cost import cost_by_policy
from arlkit.policies import make_policy
from arlkit.policies.debate import AGGRESSIVE_INSTRUCTION, AsyncDebatePolicy, DebateConfig, DebatePolicy
from arlkit.policies.loopback import ScriptedServer
from arlkit.policies.protocol import Reply, Request
from arlkit.rollout import make_jobs, run_rollouts
from arlkit.rollout.records import Trajectory


class Says:
    """A scripted agent: always the same action (``None``: a reply without one); records what it saw."""

    def __init__(self, action: str | None) -> None:
        self.action = action
        self.name = f"says-{action}"
        self.seen: list[Request] = []

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        self.seen += list(requests)
        text = "no idea" if self.action is None else f"<think>t</think><action>{self.action}</action>"
        return [Reply(text) for _ in requests]


class Follower(Says):
    """Proposes its own action first; in a revision round, the action most others proposed."""

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        out = []
        for request in requests:
            self.seen.append(request)
            last = request.messages[-1]["content"]
            if "The other agents replied" in last:
                moves = [m for m in ("Left", "Down", "Right", "Up") if f"<action>{m}</action>" in last]
                counts = {m: last.count(f"<action>{m}</action>") for m in moves}
                pick = max(moves, key=lambda m: counts[m]) if moves else self.action
                out.append(Reply(f"<think>follow</think><action>{pick}</action>"))
            else:
                out.append(Reply(f"<think>mine</think><action>{self.action}</action>"))
        return out


def _turn(policy: Any, env_name: str = "frozenlake") -> Reply:
    env = make(env_name, size=4)
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    request = Request(messages=[{"role": "system", "content": "play"}, {"role": "user", "content": "your move"}],
                      seed=7, turn=0, env=env)
    return policy.generate([request])[0]


@pytest.mark.parametrize(("actions", "winner", "agent"), [
    (["Left", "Down", "Left"], "Left", 1),
    (["Down", "Left"], "Down", 1),                       # a tie goes to the first agent
    (["Down", "Left", "Left", "Down"], "Down", 1),
    ([None, "Up", "Right"], "Up", 2),                      # no action, no vote; then the tie rule
    (["Right", None, "Up", "Up"], "Up", 3),
])
def test_majority_and_ties(actions: list[str | None], winner: str, agent: int) -> None:
    reply = _turn(DebatePolicy([Says(a) for a in actions], DebateConfig(rounds=0)))
    assert f"<action>{winner}</action>" in reply.text
    assert reply.details["chosen_agent"] == agent and reply.details["calls"] == len(actions)


def test_nobody_with_an_action_gives_the_first_reply_and_the_env_judges_it() -> None:
    reply = _turn(DebatePolicy([Says(None), Says(None)], DebateConfig(rounds=0)))
    assert reply.text == "no idea" and reply.details["chosen_agent"] is None and reply.details["votes"] == {}


def test_revision_rounds_show_every_agent_the_others_replies() -> None:
    agents = [Follower("Down"), Follower("Left"), Follower("Left")]
    reply = _turn(DebatePolicy(agents, DebateConfig(rounds=2)))
    assert "<action>Left</action>" in reply.text and reply.details["votes"] == {"Left": 3}
    for agent in agents:
        assert len(agent.seen) == 3
        revision = agent.seen[1].messages
        assert revision[-2]["role"] == "assistant" and "The other agents replied" in revision[-1]["content"]
        assert len({r.seed for r in agent.seen}) == 3  # each call samples with its own seed
    rounds = reply.details["messages"]
    assert [len(r) for r in rounds] == [3, 3, 3] and rounds[0][0]["action"] == "Down" and rounds[0][1]["action"] == "Left"


def test_the_judge_decides_and_aggressive_debate_adds_its_instruction() -> None:
    judge_like = Says("Right")  # the first agent also judges: it answers Right to the judging prompt too
    agents = [judge_like, Says("Up"), Says("Up")]
    reply = _turn(DebatePolicy(agents, DebateConfig(rounds=0, aggregator="judge", aggressive=True)))
    assert "<action>Right</action>" in reply.text and reply.details["chosen_agent"] == 1  # Right was agent 1's proposal
    assert reply.details["calls"] == 4 and "proposed these actions" in judge_like.seen[-1].messages[-1]["content"]
    assert all(AGGRESSIVE_INSTRUCTION in r.messages[0]["content"] for r in judge_like.seen)
    plain = Says("Up")
    _turn(DebatePolicy([plain, Says("Up")], DebateConfig(rounds=0)))
    assert AGGRESSIVE_INSTRUCTION not in plain.seen[0].messages[0]["content"]


def test_budget_counts_environment_turns_and_records_keep_every_agent() -> None:
    env = make("frozenlake", size=4)
    policy = make_policy("debate:3,rounds=1@noisy-oracle:0.5")
    trajectories = run_rollouts(lambda: make("frozenlake", size=4), make_jobs(env.tasks("test", 4), 2, 3, 0), policy)
    for trajectory in trajectories:
        assert len(trajectory.turns) <= 3
        assert trajectory.ended_by in ("budget", "success", "terminal")
        for turn in trajectory.turns:
            assert turn.details["calls"] == 6 and len(turn.details["messages"]) == 3
    again = Trajectory.from_json(json.loads(json.dumps(trajectories[0].to_json())))
    assert again.turns[0].details == trajectories[0].turns[0].details
    assert cost_by_policy(trajectories)[trajectories[0].policy].calls_per_turn == 6.0


def test_bad_specs_name_the_valid_forms() -> None:
    for bad in ("debate:3", "debate:1@oracle", "debate:x@oracle", "aggressive-debate:3,loud@oracle"):
        with pytest.raises(ConfigError, match="N@SPEC"):
            make_policy(bad)


def _served(body: dict[str, Any]) -> str:
    move = ("Left", "Down", "Right", "Up")[body["seed"] % 4]
    return f"<think>go</think><action>{move}</action>"


def test_a_served_model_drives_debate_3_through_the_engine() -> None:
    env = make("frozenlake", size=4)
    jobs = make_jobs(env.tasks("test", 3), 2, 4, 0)
    with ScriptedServer(_served) as server:
        policy = make_policy(f"debate:3@openai:scripted@{server.base_url}")
        assert isinstance(policy, AsyncDebatePolicy)
        trajectories = run_rollouts(lambda: make("frozenlake", size=4), jobs, policy)
        single = make_policy(f"openai:scripted@{server.base_url}")
        alone = run_rollouts(lambda: make("frozenlake", size=4), jobs, single)
        requests = server.requests
    turns = [turn for t in trajectories for turn in t.turns]
    assert not any(t.error for t in trajectories) and turns
    assert requests == sum(turn.details["calls"] for turn in turns) + sum(len(t.turns) for t in alone)
    assert all(turn.details["calls"] == 6 and turn.usage == {"prompt_tokens": 6, "completion_tokens": 6}
               for turn in turns)  # the scripted server counts one prompt and one completion token per call
    costs = cost_by_policy(trajectories + alone)
    assert costs[trajectories[0].policy].tokens_per_turn == 12.0 and costs[alone[0].policy].tokens_per_turn == 2.0
    for turn in turns:
        assert turn.action in {m["action"] for m in (r[-1] for r in turn.details["messages"])}
