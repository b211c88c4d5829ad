"""From finished trajectories to training rows and ``(B, L)`` tensors, in both layouts (docs/algorithms.md#conventions).

Both read what the model was shown from the trajectories (``TurnRecord.prompt``: the rollouts keep
it with ``run_rollouts(keep_prompts=True)``).

- **Step rows** (ARLArena's layout, ``AlgoConfig.step_rows``): one row per environment step, holding
  exactly the prompt the model was shown at that step (system prompt with that turn's counters, the
  first observation and the history window) followed by the reply's generated tokens. The row's
  log-probs are the sampling distribution's, token for token.
- **Trajectory rows** (RT's GRPO layout): one row per trajectory: the first turn's prompt, then each
  reply followed by the next observation rendered by the chat template; only reply tokens are targets,
  observation tokens are context (masked out of the loss). A row holds one system prompt, so later
  turns see the first turn's counters rather than the rebuilt ones they were sampled under; old
  log-probs are therefore recomputed on the row itself (with the sampling weights), which makes the
  importance ratios start at exactly 1. Needs the full chat (``history: null``).

``(B, L)`` tensors are compact: column j of a row is its j-th target (reply) token, so ``L`` is the
longest row's number of reply tokens and observation tokens never take a column.

Rewards (docs/algorithms.md#rewards; :mod:`arlkit.algos.rewards`): a step is invalid when no action was executed or
admitted, or, under the strict format, when the reply is not exactly ``<think>…</think><action>…</action>``;
each invalid step costs the penalty; the outcome reward is the success reward, 0 when the budget was
exhausted without success (RT App. A.4), else 0; the trajectory score is the sum of step rewards.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from arlkit.algos import RewardConfig, budget_anchor, classify_step, episode_reward, step_rewards
from arlkit.policies.chat import ChatTokens
from arlkit.rollout.records import Prompt, Trajectory, TurnRecord
from arlkit.train.forward import TokenRow

__all__ = [
    "ChatTokens",
    "Outcome",
    "RowBatch",
    "build_batch",
    "pad_rows",
    "score_trajectory",
    "trajectory_row",
]

def _prompt(turn: TurnRecord) -> Prompt:
    """What the policy was shown before ``turn``, as the rollout recorded it."""
    if turn.prompt is None:
        raise ValueError("training rows need the prompts the policy was shown: run the rollouts with keep_prompts=True")
    return turn.prompt


@dataclass(frozen=True)
class Outcome:
    """The rewards of one trajectory (docs/algorithms.md#rewards).

    Attributes:
        invalid: one flag per turn.
        step_rewards: one reward per turn (penalties, plus the outcome on the last turn).
        outcome: the outcome reward (success reward, or 0).
        score: the sum of the step rewards (the group-advantage score).
        exhausted: the whole budget was used without success.
    """

    invalid: tuple[bool, ...]
    step_rewards: tuple[float, ...]
    outcome: float
    score: float
    exhausted: bool


def score_trajectory(trajectory: Trajectory, reward: RewardConfig) -> Outcome:
    """Step rewards, outcome and score of one finished trajectory."""
    invalid = []
    for turn in trajectory.turns:
        found = turn.action is not None and turn.valid
        invalid.append(classify_step(found, turn.strict_format, strict_format=reward.strict_format).invalid)
    exhausted = len(trajectory.turns) >= trajectory.budget and not trajectory.success
    outcome = episode_reward(trajectory.success, budget_exhausted=exhausted, success_reward=reward.success_reward)
    rewards = step_rewards(invalid, outcome, invalid_action_penalty=reward.invalid_action_penalty, dtype=torch.float64)
    values = tuple(float(r) for r in rewards)
    return Outcome(tuple(invalid), values, outcome, float(sum(values)), exhausted)


def pad_rows(values: Sequence[Tensor], width: int, fill: float = 0.0) -> Tensor:
    """Stack 1-D tensors of different lengths into ``(B, width)``, right-padded with ``fill``
    (differentiable)."""
    if not values:
        return torch.zeros(0, width)
    padded = [torch.nn.functional.pad(v, (0, width - v.shape[0]), value=fill) for v in values]
    return torch.stack(padded)


@dataclass
class RowBatch:
    """The training rows of one rollout batch and their per-row metadata.

    Attributes:
        rows: the token rows (targets = reply tokens).
        traj: trajectory index (into the batch's trajectory list) of each row.
        group: group label of each row (the task's group in this step).
        step: 0-based turn index of each row (step rows), or 0 (trajectory rows).
        step_reward: ``(B,)`` reward of the row's step (step rows) or the trajectory score.
        score: ``(B,)`` the trajectory score of each row (the GRPO score).
        anchors: GiGPO anchor key of each row (step rows): the environment state, with the remaining
            budget under BudgetMix.
        reward_at: ``(B, L)`` token-level rewards: each step's reward on its last reply token.
        mask: ``(B, L)`` 0/1 response mask.
        turn_sizes: per row, the number of reply tokens of each turn it holds.
    """

    rows: list[TokenRow]
    traj: list[int]
    group: list[str]
    step: list[int]
    step_reward: Tensor
    score: Tensor
    anchors: list[Hashable]
    reward_at: Tensor
    mask: Tensor
    turn_sizes: list[list[int]] = field(default_factory=list)

    @property
    def width(self) -> int:
        """``L``."""
        return int(self.mask.shape[1])

    def select(self, index: Sequence[int]) -> RowBatch:
        """The rows at ``index`` (columns trimmed to the longest of them)."""
        idx = list(index)
        width = max((len(self.rows[i].targets) for i in idx), default=1)
        return RowBatch(
            [self.rows[i] for i in idx], [self.traj[i] for i in idx], [self.group[i] for i in idx],
            [self.step[i] for i in idx], self.step_reward[idx], self.score[idx], [self.anchors[i] for i in idx],
            self.reward_at[idx, :width], self.mask[idx, :width], [self.turn_sizes[i] for i in idx],
        )  # fmt: skip


def trajectory_row(
    chat: ChatTokens,
    trajectory: Trajectory,
    *,
    replies: Sequence[Sequence[int]] | None = None,
    targets_of: Sequence[bool] | None = None,
) -> tuple[TokenRow, list[int]]:
    """The trajectory row: the first turn's recorded prompt, then reply_t and the chat-template text
    between reply_t and reply_{t+1} (the next observation, from turn t+1's recorded prompt).

    ``replies``: token ids of each reply (default: the generated ``token_ids``); ``targets_of``: which
    turns' replies are targets (default: all). Returns the row and the number of target tokens per
    target turn."""
    if not trajectory.turns:
        raise ValueError("a trajectory row needs at least one turn")
    first = _prompt(trajectory.turns[0]).messages
    system = first[0]
    prompt_text = chat.render(first)
    ids = chat.ids(prompt_text)
    targets: list[int] = []
    sizes: list[int] = []
    for t, turn in enumerate(trajectory.turns):
        reply_ids = list(replies[t]) if replies is not None else list(turn.token_ids or [])
        if not reply_ids:
            raise ValueError("trajectory rows need the generated token ids of every reply (an LLM policy)")
        if targets_of is None or targets_of[t]:
            targets.extend(range(len(ids), len(ids) + len(reply_ids)))
            sizes.append(len(reply_ids))
        ids.extend(reply_ids)
        if t + 1 < len(trajectory.turns):
            messages = [system, *list(_prompt(trajectory.turns[t + 1]).messages)[1:]]
            text = chat.render(messages)
            head = prompt_text + turn.reply
            if not text.startswith(head):
                raise ValueError("trajectory rows need a chat template that renders a conversation append-only")
            between = chat.ids(text[len(head):])
            if reply_ids[-1] in chat.eos_ids and between and between[0] == reply_ids[-1]:
                between = between[1:]  # the reply already ended with the end-of-turn token
            ids.extend(between)
            prompt_text = text
    return TokenRow(tuple(ids), tuple(targets)), sizes


def build_batch(
    trajectories: Sequence[Trajectory],
    outcomes: Sequence[Outcome],
    chat: ChatTokens,
    *,
    step_rows: bool,
    budget_anchors: bool,
) -> RowBatch:
    """Training rows of a rollout batch in the chosen layout (module docstring).

    Each step row's prompt is the recorded one: the ids the backend sampled after where it reported
    them, else the recorded messages encoded. Trajectories without turns (a backend error before the
    first reply) contribute no row. ``budget_anchors``: GiGPO anchors are ``(state, remaining budget)``
    (BudgetMix) instead of the state.
    """
    rows: list[TokenRow] = []
    traj_of, group, step, step_reward, score, anchors, sizes = [], [], [], [], [], [], []
    for k, (trajectory, outcome) in enumerate(zip(trajectories, outcomes, strict=True)):
        if not trajectory.turns:
            continue
        label = trajectory.group or trajectory.task_id
        if step_rows:
            for t, turn in enumerate(trajectory.turns):
                reply_ids = list(turn.token_ids or [])
                if not reply_ids:
                    raise ValueError("step rows need the generated token ids of every reply (an LLM policy)")
                shown = _prompt(turn)
                prompt = list(shown.ids) if shown.ids is not None else chat.prompt_ids(shown.messages)
                ids = prompt + reply_ids
                rows.append(TokenRow(tuple(ids), tuple(range(len(prompt), len(ids)))))
                traj_of.append(k)
                group.append(label)
                step.append(t)
                step_reward.append(outcome.step_rewards[t])
                score.append(outcome.score)
                state = turn.state
                anchors.append(budget_anchor(state, trajectory.budget, t) if budget_anchors else state)
                sizes.append([len(reply_ids)])
        else:
            row, turn_sizes = trajectory_row(chat, trajectory)
            rows.append(row)
            traj_of.append(k)
            group.append(label)
            step.append(0)
            step_reward.append(outcome.score)
            score.append(outcome.score)
            anchors.append(trajectory.turns[0].state)
            sizes.append(turn_sizes)
    width = max((len(r.targets) for r in rows), default=1)
    mask = torch.zeros(len(rows), width)
    reward_at = torch.zeros(len(rows), width)
    for i, (row, turn_sizes) in enumerate(zip(rows, sizes, strict=True)):
        mask[i, : len(row.targets)] = 1.0
        k = traj_of[i]
        rewards = outcomes[k].step_rewards
        end = 0
        for j, n in enumerate(turn_sizes):
            end += n
            reward_at[i, end - 1] = rewards[step[i] + j] if step_rows else rewards[j]
    return RowBatch(
        rows, traj_of, group, step, torch.tensor(step_reward, dtype=torch.float32),
        torch.tensor(score, dtype=torch.float32), anchors, reward_at, mask, sizes,
    )  # fmt: skip
