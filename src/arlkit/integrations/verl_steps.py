"""What arlkit's verl agent loop records with each output, and the step rows the trainer hook rebuilds.

verl knows rows of tokens; arlkit's step-level estimators (GiGPO, EMPG) need to know which rows are
steps of which trajectory, what each step earned and which anchor state it acted in. The agent loop
(:mod:`arlkit.integrations.verl_agent`) stores that in each output's ``extra_fields`` under
:data:`EXTRA_KEY`, as a plain JSON-able dict (:meth:`OutputInfo.as_dict`); the trainer hook
(:mod:`arlkit.integrations.verl_trainer`) reads it back with :meth:`OutputInfo.from_dict` and
:func:`step_inputs` turns a batch of step outputs into the :class:`~arlkit.algos.AdvantageInputs`
that ``arlkit train`` builds for the same trajectories (:func:`arlkit.train.batch.build_batch` with
step rows). Nothing here imports verl.

verl's v1 trainer keys every output ``{uid}_{session}_{index}``: ``uid`` is the dataset row's (one
task group), ``session`` is the sample within the group (``rollout.n``), ``index`` the output's place
in its agent-loop run (the step, in the step layout).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor

from arlkit.algos import AdvantageInputs, budget_anchor

__all__ = ["EXTRA_KEY", "LAYOUTS", "OutputInfo", "TurnInfo", "parse_key", "step_inputs"]

EXTRA_KEY = "arlkit"
"""The ``extra_fields`` key of arlkit's record on every agent-loop output."""
LAYOUTS = ("step", "trajectory")
"""``step``: one verl output per environment step (ARLArena's rows; verl's v1 trainer); ``trajectory``:
one output per trajectory, token ids carried across turns, observation tokens masked out (RT's rows)."""


@dataclass(frozen=True)
class TurnInfo:
    """One environment step of the trajectory.

    Attributes:
        step: 0-based turn index t (interactions completed before this action).
        reward: the step's reward r_t (docs/algorithms.md#rewards: penalties, plus the outcome on the last turn).
        state: ``repr`` of the environment's state key before the action ("" without state keys).
        remaining: turns left including this one, ``T − t``.
        valid: the action was parsed and admitted.
        strict_format: the reply was exactly ``<think>…</think><action>…</action>``.
        start: first response token of the turn's reply in the output's ``response_ids``.
        end: one past its last token.
    """

    step: int
    reward: float
    state: str
    remaining: int
    valid: bool
    strict_format: bool
    start: int
    end: int


@dataclass(frozen=True)
class OutputInfo:
    """arlkit's record of one agent-loop output (``extra_fields[EXTRA_KEY]``).

    Attributes:
        layout: ``step`` or ``trajectory`` (:data:`LAYOUTS`).
        env: the environment's registry name.
        task_id: the task.
        sample: the sample within its group (verl's session; 0 under the legacy trainer).
        budget: the trajectory's turn budget T.
        budgetmix: the budget was a BudgetMix draw, so GiGPO's anchors are ``(state, T − t)``.
        score: the trajectory's score (sum of its step rewards): what verl receives as ``reward_score``.
        success: the task was solved.
        ended_by: why the trajectory ended (``success``, ``terminal``, ``budget``, ``context_length_exceeded``, ...).
        num_turns: turns the trajectory took.
        turns: the turns this output holds (one in the step layout, all in the trajectory layout).
    """

    layout: str
    env: str
    task_id: str
    sample: int
    budget: int
    budgetmix: bool
    score: float
    success: bool
    ended_by: str
    num_turns: int
    turns: tuple[TurnInfo, ...]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able dict (what travels through Ray and verl's TransferQueue)."""
        out = asdict(self)
        out["turns"] = [asdict(t) for t in self.turns]
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> OutputInfo:
        """The record back from :meth:`as_dict` (raises ``ValueError`` when it is not arlkit's)."""
        try:
            turns = tuple(TurnInfo(**dict(t)) for t in raw["turns"])
            fields = {k: raw[k] for k in cls.__dataclass_fields__ if k != "turns"}
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not an arlkit agent-loop record ({type(exc).__name__}: {exc}); the rows must come "
                             f"from the arlkit_agent loop") from None
        return cls(**fields, turns=turns)

    def anchor(self, turn: TurnInfo) -> Hashable:
        """GiGPO's anchor key of ``turn``: its state, with the remaining budget under BudgetMix
        (as ``arlkit train`` builds it)."""
        return budget_anchor(turn.state, self.budget, turn.step) if self.budgetmix else turn.state


def parse_key(key: str) -> tuple[str, int, int]:
    """``(uid, session, index)`` of verl's v1 output key ``{uid}_{session}_{index}`` (the uid may hold ``_``)."""
    uid, session, index = key.rsplit("_", 2)
    return uid, int(session), int(index)


def step_inputs(
    keys: Sequence[str],
    infos: Sequence[OutputInfo],
    response_mask: Tensor,
    token_level_rewards: Tensor,
    *,
    entropy: Tensor | None = None,
) -> AdvantageInputs:
    """The advantage inputs of a batch of step-layout outputs.

    Args:
        keys: verl's output keys ``{uid}_{session}_{index}``, one per row.
        infos: arlkit's record of each row.
        response_mask: ``(B, L)`` verl's response mask.
        token_level_rewards: ``(B, L)`` verl's token-level rewards; their row sums are the scores
            (each row carries its trajectory's score, plus what verl added, e.g. a KL penalty in the reward).
        entropy: ``(B, L)`` per-token entropy of the rollout policy (EMPG), or None.

    Rows: the group is the uid, the trajectory the (uid, session) pair, the step, its reward and its
    anchor come from the record. Raises ``ValueError`` for trajectory-layout rows, rows without state
    keys are kept (GiGPO then anchors on ``""``, which the caller checks)."""
    if len(keys) != len(infos) or len(keys) != response_mask.shape[0]:
        raise ValueError(f"{len(keys)} keys, {len(infos)} records and {response_mask.shape[0]} rows must match")
    group, traj, step, rewards, anchors = [], [], [], [], []
    for key, info in zip(keys, infos, strict=True):
        if info.layout != "step" or len(info.turns) != 1:
            raise ValueError("step-level advantages need the step layout (one output per step): write the data with "
                             "`arlkit verl data --layout step`")
        uid, session, _ = parse_key(key)
        turn = info.turns[0]
        group.append(uid)
        traj.append(f"{uid}_{session}")
        step.append(turn.step)
        rewards.append(turn.reward)
        anchors.append(info.anchor(turn))
    return AdvantageInputs(
        response_mask=response_mask,
        token_level_rewards=token_level_rewards,
        scores=token_level_rewards.sum(dim=-1),
        index=group,
        traj_index=traj,
        step_index=torch.tensor(step),
        step_rewards=torch.tensor(rewards, dtype=torch.float32),
        anchor_keys=anchors,
        old_entropy=entropy,
    )
