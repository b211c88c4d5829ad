"""Training rows in both layouts, the prefix-sharing forward, and rewards (docs/algorithms.md#rewards)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from arlkit.algos import RewardConfig
from arlkit.envs import make
from arlkit.policies import SamplingConfig
from arlkit.policies.hf import HFPolicy
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts, turn_messages
from arlkit.rollout.records import Prompt, Trajectory, TurnRecord
from arlkit.train.batch import ChatTokens, build_batch, score_trajectory
from arlkit.train.forward import Critic, TokenRow, _plan, backward_rows, score_rows
from arlkit.train.model import load_model

from .conftest import EASY_ENV


def _rollouts(model_dir: Path, history: int | None, budget: int = 6, counters: str = "system"):
    model, tokenizer = load_model(model_dir, attn_implementation="eager")
    policy = HFPolicy(model, tokenizer, SamplingConfig(temperature=1.0, max_new_tokens=10), attn_implementation="eager")
    tasks = make("frozenlake", **EASY_ENV).tasks("train", 3)
    trajectories = run_rollouts(lambda: make("frozenlake", **EASY_ENV), make_jobs(tasks, 3, budget, 0, group="g"),
                                policy, PromptConfig("announced", history, counters), keep_prompts=True)
    return model, tokenizer, policy, trajectories


def _with_prompts(trajectories: list[Trajectory], prompts) -> list[Trajectory]:  # type: ignore[no-untyped-def]
    """Copies of ``trajectories`` whose turn k holds ``prompts(trajectory, k)`` as its recorded prompt."""
    return [dataclasses.replace(t, turns=[dataclasses.replace(turn, prompt=prompts(t, k)) for k, turn in enumerate(t.turns)])
            for t in trajectories]


def _rerendered(history: int | None, counters: str):  # type: ignore[no-untyped-def]
    """The prompt of turn k rebuilt from the trajectory's record by ``turn_messages`` (no token ids)."""
    env = make("frozenlake", **EASY_ENV)
    tasks = {task.task_id: task for task in env.tasks("train", 3)}

    def prompt(t: Trajectory, k: int) -> Prompt:
        env.reset(tasks[t.task_id], t.env_seed)
        messages = turn_messages(env.name, env.prompt_text().instruction, env.prompt_text().action_format, budget=t.budget,
                                 observations=[t.initial_observation, *(x.observation for x in t.turns[:k])],
                                 replies=[x.reply for x in t.turns[:k]], prompt=PromptConfig("announced", history, counters))
        return Prompt(messages)

    return prompt


def test_step_rows_are_the_exact_prompts_and_reproduce_sampling_logprobs(bc_dir: Path) -> None:
    model, tokenizer, policy, trajectories = _rollouts(bc_dir, history=1)
    chat = ChatTokens(tokenizer)
    outcomes = [score_trajectory(t, RewardConfig()) for t in trajectories]
    batch = build_batch(trajectories, outcomes, chat, step_rows=True, budget_anchors=True)
    assert len(batch.rows) == sum(len(t.turns) for t in trajectories)
    scored = score_rows(model, batch.rows, precision="fp32", pad_id=chat.pad_id)
    for i, row in enumerate(batch.rows):
        t = trajectories[batch.traj[i]]
        turn = t.turns[batch.step[i]]
        prompt = policy.prompt_ids(turn.prompt.messages)
        assert list(row.ids) == prompt + turn.token_ids
        # the training forward gives the log-probs the sampler drew from (temperature 1)
        assert torch.allclose(scored.logprobs[i], torch.tensor(turn.logprobs), atol=1e-4)
        assert batch.anchors[i] == (turn.state, t.budget - batch.step[i])
    assert batch.mask.sum() == sum(len(turn.token_ids) for t in trajectories for turn in t.turns)
    # rows reuse the ids the backend sampled after; re-encoding the recorded messages gives the same rows,
    # and so do the prompts rebuilt from the record by turn_messages (the rows are what they always were)
    assert all(turn.prompt.ids is not None for t in trajectories for turn in t.turns)
    messages_only = _with_prompts(trajectories, lambda t, k: Prompt(t.turns[k].prompt.messages))
    rerendered = _with_prompts(trajectories, _rerendered(history=1, counters="system"))
    for other in (messages_only, rerendered):
        fallback = build_batch(other, outcomes, chat, step_rows=True, budget_anchors=True)
        assert [r.ids for r in fallback.rows] == [r.ids for r in batch.rows]
        assert [r.targets for r in fallback.rows] == [r.targets for r in batch.rows]
    assert [[turn.prompt.messages for turn in t.turns] for t in rerendered] == [
        [turn.prompt.messages for turn in t.turns] for t in trajectories]
    with pytest.raises(ValueError, match="keep_prompts"):
        build_batch(_with_prompts(trajectories, lambda t, k: None), outcomes, chat, step_rows=True, budget_anchors=True)


@pytest.mark.parametrize("counters", ["system", "observation"])
def test_trajectory_rows_hold_every_reply_as_targets_and_nothing_else(bc_dir: Path, counters: str) -> None:
    model, tokenizer, _, trajectories = _rollouts(bc_dir, history=None, counters=counters)
    chat = ChatTokens(tokenizer)
    outcomes = [score_trajectory(t, RewardConfig()) for t in trajectories]
    batch = build_batch(trajectories, outcomes, chat, step_rows=False, budget_anchors=False)
    rebuilt = build_batch(_with_prompts(trajectories, _rerendered(history=None, counters=counters)), outcomes, chat,
                          step_rows=False, budget_anchors=False)
    assert [(r.ids, r.targets) for r in rebuilt.rows] == [(r.ids, r.targets) for r in batch.rows]
    assert len(batch.rows) == len(trajectories)
    for i, row in enumerate(batch.rows):
        t = trajectories[i]
        targets = [row.ids[p] for p in row.targets]
        assert targets == [x for turn in t.turns for x in turn.token_ids]
        text = tokenizer.decode(list(row.ids))
        for turn in t.turns[:-1]:  # each observation is context before the next reply
            assert turn.observation in text
        # each step's reward sits on its reply's last token
        ends = np.cumsum([len(turn.token_ids) for turn in t.turns]) - 1
        assert torch.allclose(batch.reward_at[i, ends], torch.tensor(outcomes[i].step_rewards, dtype=torch.float32))
        assert batch.reward_at[i].sum() == pytest.approx(outcomes[i].score, abs=1e-6)
    scored = score_rows(model, batch.rows, precision="fp32", pad_id=chat.pad_id)
    gap = max(float((s.detach() - torch.tensor([x for turn in t.turns for x in turn.logprobs])).abs().max())
              for s, t in zip(scored.logprobs, trajectories, strict=True))
    if counters == "observation":  # earlier messages never change: the row is exactly what was sampled
        assert gap < 1e-4
    else:  # the row holds the first turn's counters; later replies were sampled under rebuilt ones
        assert 0 < gap < 0.5


def _turn(valid: bool, strict: bool = True, reward: float = 0.0) -> TurnRecord:
    return TurnRecord("r", "Left" if valid else None, valid, reward, "o", "s", strict)


def test_rewards_follow_spec_6_6() -> None:
    def traj(turns: list[TurnRecord], budget: int, success: bool) -> Trajectory:
        return Trajectory("frozenlake", "p", "t", 0, budget, "announced", 0, 0, "o", turns, success,
                          len(turns) if success else None)

    cfg = RewardConfig(invalid_action_penalty=0.1, strict_format=True)
    # success at turn 3 with one invalid step and one lenient (non-strict) step
    out = score_trajectory(traj([_turn(False), _turn(True, strict=False), _turn(True, reward=1.0)], 5, True), cfg)
    assert out.invalid == (True, True, False) and out.step_rewards == pytest.approx((-0.1, -0.1, 1.0))
    assert out.outcome == 1.0 and out.score == pytest.approx(0.8) and not out.exhausted
    # budget exhausted without success: outcome 0 (RT App. A.4)
    out = score_trajectory(traj([_turn(True)] * 4, 4, False), cfg)
    assert out.exhausted and out.outcome == 0.0 and out.score == 0.0
    lenient = score_trajectory(traj([_turn(True, strict=False)], 4, False), RewardConfig(strict_format=False))
    assert lenient.invalid == (False,)


def test_chunked_backward_gives_the_gradients_of_one_backward(nano_dir: Path) -> None:
    """``backward_rows`` (``TrainConfig.chunked_backward``): the loss's gradients with respect to the
    log-probs and entropies, carried through the model one chunk at a time, equal one backward through
    the whole graph; a loss nonlinear in both, shared prefixes, several chunks."""
    model, _ = load_model(nano_dir, attn_implementation="arlkit")
    gen = torch.Generator().manual_seed(1)

    def tokens(n: int) -> list[int]:
        return torch.randint(5, 400, (n,), generator=gen).tolist()

    rows = [TokenRow(tuple(ids), tuple(range(len(ids) - 5, len(ids))))
            for prefix in (tokens(60), tokens(30)) for ids in (prefix + tokens(8 + 3 * i) for i in range(4))]
    rows.append(TokenRow(tuple(tokens(25)), tuple(range(1, 25))))
    weights = [torch.rand(len(r.targets), generator=gen) for r in rows]
    assert len(_plan(rows, True, 200)) > 2

    def loss(logps: list[torch.Tensor], ents: list[torch.Tensor] | None) -> torch.Tensor:
        total = sum((torch.exp(lp) * w).sum() for lp, w in zip(logps, weights, strict=True))
        if ents is not None:
            total = total + sum((e ** 2 * w).sum() for e, w in zip(ents, weights, strict=True))
        return total

    def grads() -> torch.Tensor:
        return torch.cat([p.grad.flatten() if p.grad is not None else torch.zeros(p.numel()) for p in model.parameters()])

    for with_entropy in (True, False):
        model.zero_grad(set_to_none=True)
        scored = score_rows(model, rows, entropy=True, max_tokens=200)
        loss(scored.logprobs, scored.entropy if with_entropy else None).backward()
        whole = grads()
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            values = score_rows(model, rows, entropy=True, max_tokens=200)
        logps = [lp.clone().requires_grad_() for lp in values.logprobs]
        assert values.entropy is not None
        ents = [e.clone().requires_grad_() for e in values.entropy]
        loss(logps, ents if with_entropy else None).backward()
        backward_rows(model, rows, [lp.grad for lp in logps],
                      [e.grad for e in ents] if with_entropy else None, max_tokens=200)  # type: ignore[misc]
        chunked = grads()
        assert whole.abs().max() > 0
        assert torch.allclose(whole, chunked, atol=1e-6, rtol=1e-5), (whole - chunked).abs().max()


@pytest.mark.parametrize("attention", ["eager", "arlkit"])
def test_prefix_sharing_equals_full_rows_in_values_and_gradients(nano_dir: Path, attention: str) -> None:
    model, _ = load_model(nano_dir, attn_implementation=attention)
    gen = torch.Generator().manual_seed(0)

    def tokens(n: int) -> list[int]:
        return torch.randint(5, 400, (n,), generator=gen).tolist()

    rows = []
    # two clusters with prefixes of different lengths (80 and 40 shared tokens), so one chunk holds
    # both and pads the shorter prefix; replies of different lengths
    for prefix, count in ((tokens(80), 6), (tokens(40), 3)):
        for i in range(count):
            ids = prefix + tokens(6 + 5 * i)
            rows.append(TokenRow(tuple(ids), tuple(range(len(ids) - 4, len(ids)))))
    rows.append(TokenRow(tuple(rows[0].ids[:20] + (9,) * 12), tuple(range(25, 32))))  # shares 20: alone
    rows.append(TokenRow(tuple(tokens(30)), tuple(range(1, 30))))  # a target at position 1: no prefix
    rows.append(TokenRow(rows[6].ids, rows[6].targets))  # the same row twice
    plan = _plan(rows, True, 4096)
    assert sorted(i for c in plan for i in c.rows) == list(range(len(rows)))
    assert any(len({p for p in c.prefix if p}) > 1 for c in plan)  # a chunk with prefixes of two lengths
    assert any(not any(c.prefix) for c in plan)  # the row with nothing before its first target runs whole
    grads = []
    results = []
    for share in (False, True):
        model.zero_grad()
        scored = score_rows(model, rows, share_prefix=share, entropy=True, precision="fp32")
        torch.cat(scored.logprobs).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
        results.append(scored)
    for a, b in zip(results[0].logprobs, results[1].logprobs, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(grads[0], grads[1], atol=1e-4, rtol=1e-3)
    # a small chunk budget splits the 80-token cluster over chunks: still the same log-probs
    small = score_rows(model, rows, share_prefix=True, precision="fp32", max_tokens=300)
    assert len(_plan(rows, True, 300)) > len(plan)
    for a, b in zip(results[0].logprobs, small.logprobs, strict=True):
        assert torch.allclose(a, b.detach(), atol=1e-5)
    # reference: one plain forward per row
    for row, lp in zip(rows, results[0].logprobs, strict=True):
        logits = model(input_ids=torch.tensor([row.ids])).logits[0].float()
        ref = torch.log_softmax(logits, -1)[[t - 1 for t in row.targets], [row.ids[t] for t in row.targets]]
        assert torch.allclose(lp.detach(), ref.detach(), atol=1e-5)
    critic = Critic(model)
    values = critic.values(rows, precision="fp32")
    assert [v.shape[0] for v in values] == [len(r.targets) for r in rows] and all((v == 0).all() for v in values)
