"""Advantage estimators: hand-derived numbers, slow references on random batches, invariants, numerics."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from arlkit.algos import (
    ADV_ESTIMATORS,
    AdvantageInputs,
    AdvantageOutput,
    budget_anchor,
    compute_advantage,
    compute_gae_advantage_return,
    register_adv_estimator,
)

F64 = torch.float64
PROPS = settings(max_examples=50, deadline=None)
EPS = 1e-6


def _rows(scores: list[float], lengths: list[int], width: int | None = None) -> tuple[Tensor, Tensor]:
    width = width or max(lengths)
    mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(width)] for n in lengths], dtype=F64)
    return torch.tensor(scores, dtype=F64), mask


# --------------------------------------------------------------------------------------------------------------------
# GRPO / Dr.GRPO


def test_grpo_hand_computed() -> None:
    # group a: [1, 0, 0, 1] -> mu 0.5, unbiased sigma sqrt(4 * 0.25 / 3) = sqrt(1/3) -> +-0.5 / (sqrt(1/3) + eps)
    # group b: [2] singleton -> mu 0, sigma 1 -> 2 / (1 + eps) ; group c: [3, 3] -> 0
    scores, mask = _rows([1, 0, 0, 1, 2, 3, 3], [2, 1, 3, 2, 1, 2, 2])
    index = ["a", "a", "a", "a", "b", "c", "c"]
    out = compute_advantage("grpo", AdvantageInputs(mask, scores=scores, index=index))
    a = 0.5 / (math.sqrt(1 / 3) + EPS)
    row = torch.tensor([a, -a, -a, a, 2 / (1 + EPS), 0.0, 0.0], dtype=F64)
    torch.testing.assert_close(out.advantages, row.unsqueeze(-1) * mask, rtol=0, atol=1e-12)
    torch.testing.assert_close(out.returns, out.advantages)
    assert out.metrics["adv/singleton_groups"].item() == 1.0
    assert out.metrics["adv/uniform_groups"].item() == 1.0
    # Dr.GRPO: s - mu only
    dr = compute_advantage("grpo", AdvantageInputs(mask, scores=scores, index=index), norm_adv_by_std_in_grpo=False)
    row = torch.tensor([0.5, -0.5, -0.5, 0.5, 2.0, 0.0, 0.0], dtype=F64)
    torch.testing.assert_close(dr.advantages, row.unsqueeze(-1) * mask, rtol=0, atol=1e-12)


def test_grpo_reads_token_level_rewards_like_verl() -> None:
    mask = torch.ones(2, 3, dtype=F64)
    rewards = torch.tensor([[0, 0, 1.0], [0, 0, 0]], dtype=F64)  # outcome on the last token
    out = compute_advantage("grpo", AdvantageInputs(mask, token_level_rewards=rewards, index=[0, 0]))
    # scores 1, 0 -> mu 0.5, sigma sqrt(0.5) -> +-0.5 / sqrt(0.5) = +-0.7071
    a = 0.5 / (math.sqrt(0.5) + EPS)
    torch.testing.assert_close(out.advantages[:, 0], torch.tensor([a, -a], dtype=F64))


def test_grpo_step_rows_cross_step_vs_per_trajectory() -> None:
    # One group: trajectory X has 3 step rows (score 1), Y one step row (score 0).
    #  cross_step: [1, 1, 1, 0] -> mu 0.75, sigma sqrt((3 * .0625 + .5625) / 3) = 0.5 -> X 0.5, Y -1.5
    #  per_trajectory: [1, 0] -> mu 0.5, sigma sqrt(0.5) -> X 0.7071, Y -0.7071
    scores, mask = _rows([1, 1, 1, 0], [1, 1, 1, 1])
    inputs = AdvantageInputs(mask, scores=scores, index=["g"] * 4, traj_index=["X", "X", "X", "Y"],
                             step_index=torch.tensor([0, 1, 2, 0]))
    cross = compute_advantage("grpo", inputs)
    x, y = 0.25 / (0.5 + EPS), -0.75 / (0.5 + EPS)
    torch.testing.assert_close(cross.advantages[:, 0], torch.tensor([x, x, x, y], dtype=F64))
    per = compute_advantage("grpo", inputs, step_stats="per_trajectory")
    a = 0.5 / (math.sqrt(0.5) + EPS)
    torch.testing.assert_close(per.advantages[:, 0], torch.tensor([a, a, a, -a], dtype=F64))


def test_grpo_per_trajectory_rejects_inconsistent_scores() -> None:
    scores, mask = _rows([1, 0], [1, 1])
    inputs = AdvantageInputs(mask, scores=scores, index=["g", "g"], traj_index=["X", "X"])
    with pytest.raises(ValueError, match="same score"):
        compute_advantage("grpo", inputs, step_stats="per_trajectory")


def _grpo_reference(scores: list[float], index: list[int], norm: bool) -> list[float]:
    """verl-style dictionary loop."""
    members: dict[int, list[float]] = defaultdict(list)
    for s, g in zip(scores, index):
        members[g].append(s)
    out = []
    for s, g in zip(scores, index):
        vals = members[g]
        if len(vals) == 1:
            mu, sd = 0.0, 1.0
        else:
            mu = sum(vals) / len(vals)
            sd = math.sqrt(sum((v - mu) ** 2 for v in vals) / (len(vals) - 1))
        out.append((s - mu) / (sd + EPS) if norm else s - mu)
    return out


@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(1, 24), groups=st.integers(1, 6), norm=st.booleans(),
       binary=st.booleans())
def test_grpo_matches_reference_and_has_zero_mean_per_group(seed: int, n: int, groups: int, norm: bool,
                                                            binary: bool) -> None:
    g = torch.Generator().manual_seed(seed)
    index = torch.randint(0, groups, (n,), generator=g).tolist()
    scores = (torch.rand(n, generator=g) < 0.5).to(F64) if binary else torch.randn(n, generator=g, dtype=F64)
    mask = (torch.rand(n, 4, generator=g) < 0.8).to(F64)
    out = compute_advantage("grpo", AdvantageInputs(mask, scores=scores, index=index), norm_adv_by_std_in_grpo=norm)
    row = torch.tensor(_grpo_reference(scores.tolist(), index, norm), dtype=F64)
    torch.testing.assert_close(out.advantages, row.unsqueeze(-1) * mask, rtol=1e-9, atol=1e-9)
    for k in set(index):
        members = [i for i, gi in enumerate(index) if gi == k]
        if len(members) > 1:
            assert abs(sum(row[i].item() for i in members)) < 1e-6
    assert torch.isfinite(out.advantages).all()


# --------------------------------------------------------------------------------------------------------------------
# RLOO and REINFORCE++-baseline


def test_rloo_hand_computed() -> None:
    # group a: [1, 0, 0, 1] -> 1 - 1/3 = 2/3 ; 0 - 2/3 = -2/3 ; singleton b: baseline 0 -> 5
    scores, mask = _rows([1, 0, 0, 1, 5], [1, 1, 1, 1, 1])
    out = compute_advantage("rloo", AdvantageInputs(mask, scores=scores, index=list("aaaab")))
    torch.testing.assert_close(out.advantages[:, 0], torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3, 5.0], dtype=F64))


@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(1, 16), groups=st.integers(1, 4))
def test_rloo_matches_leave_one_out_loop(seed: int, n: int, groups: int) -> None:
    g = torch.Generator().manual_seed(seed)
    index = torch.randint(0, groups, (n,), generator=g).tolist()
    scores = torch.randn(n, generator=g, dtype=F64)
    out = compute_advantage("rloo", AdvantageInputs(torch.ones(n, 2, dtype=F64), scores=scores, index=index))
    for i in range(n):
        others = [scores[j].item() for j in range(n) if j != i and index[j] == index[i]]
        baseline = sum(others) / len(others) if others else 0.0
        assert out.advantages[i, 0].item() == pytest.approx(scores[i].item() - baseline, abs=1e-9)


def test_reinforce_pp_baseline_hand_computed() -> None:
    # s - mu_g: group a [1, 0] -> 0.5, -0.5 ; singleton b [3] -> 3. Rows have 1, 1, 2 tokens:
    # tokens [0.5, -0.5, 3, 3]: mean 1.5, centred [-1, -2, 1.5, 1.5], unbiased var (1 + 4 + 2.25 + 2.25) / 3
    scores, mask = _rows([1, 0, 3], [1, 1, 2])
    out = compute_advantage("reinforce_plus_plus_baseline", AdvantageInputs(mask, scores=scores, index=list("aab")))
    sd = math.sqrt(9.5 / 3 + 1e-8)
    expected = torch.tensor([[-1 / sd, 0.0], [-2 / sd, 0.0], [1.5 / sd, 1.5 / sd]], dtype=F64)
    torch.testing.assert_close(out.advantages, expected)


# --------------------------------------------------------------------------------------------------------------------
# GiGPO


def _gigpo_example() -> AdvantageInputs:
    # Group g, gamma 0.5:
    #  tau1: A -> B -> C, rewards 0, 0, 1 (score 1) ; returns 0.25, 0.5, 1
    #  tau2: A -> D,      rewards 0, 0    (score 0) ; returns 0, 0
    #  tau3: A -> B -> E, rewards 0, 0, 0 (score 0) ; returns 0, 0, 0
    # Group h: tau4: A, reward 1 (score 1): the same state key, another group -> a different anchor.
    traj = ["t1", "t1", "t1", "t2", "t2", "t3", "t3", "t3", "t4"]
    return AdvantageInputs(
        torch.ones(9, 2, dtype=F64),
        scores=torch.tensor([1, 1, 1, 0, 0, 0, 0, 0, 1], dtype=F64),
        index=["g"] * 8 + ["h"],
        traj_index=traj,
        step_index=torch.tensor([0, 1, 2, 0, 1, 0, 1, 2, 0]),
        step_rewards=torch.tensor([0, 0, 1, 0, 0, 0, 0, 0, 1], dtype=F64),
        anchor_keys=["A", "B", "C", "A", "D", "A", "B", "E", "A"],
    )


def test_gigpo_hand_computed_mean_norm() -> None:
    # Episode (per trajectory, mean_norm): g: [1, 0, 0] -> mu 1/3 -> tau1 2/3, tau2 = tau3 = -1/3 ; h singleton -> 1
    # Step: anchor (g, A): returns [0.25, 0, 0] -> mu 1/12 -> [1/6, -1/12, -1/12]
    #       anchor (g, B): returns [0.5, 0] -> mu 0.25 -> [0.25, -0.25] ; C, D, E and (h, A) singletons -> 0
    out = compute_advantage("gigpo", _gigpo_example(), gamma=0.5, mode="mean_norm")
    expected = [2 / 3 + 1 / 6, 2 / 3 + 0.25, 2 / 3, -1 / 3 - 1 / 12, -1 / 3, -1 / 3 - 1 / 12, -1 / 3 - 0.25, -1 / 3, 1.0]
    torch.testing.assert_close(out.advantages[:, 0], torch.tensor(expected, dtype=F64))
    torch.testing.assert_close(out.advantages[:, 1], out.advantages[:, 0])
    assert out.metrics["adv/step_adv_rows_frac"].item() == pytest.approx(5 / 9)


def test_gigpo_hand_computed_mean_std_norm_and_omega() -> None:
    # Episode: g [1, 0, 0]: sigma = sqrt(((2/3)^2 + 2 (1/3)^2) / 2) = sqrt(1/3) ; h singleton: 1 / (1 + eps)
    # Step (g, A): [0.25, 0, 0], sigma = sqrt(((1/6)^2 + 2 (1/12)^2) / 2) = sqrt(1/48)
    #      (g, B): [0.5, 0], sigma = sqrt(2 * 0.25^2) = sqrt(1/8)
    out = compute_advantage("gigpo", _gigpo_example(), gamma=0.5, step_advantage_w=2.0)
    se, sa, sb = math.sqrt(1 / 3) + EPS, math.sqrt(1 / 48) + EPS, math.sqrt(1 / 8) + EPS
    e1, e0 = (2 / 3) / se, (-1 / 3) / se
    expected = [
        e1 + 2 * (1 / 6) / sa, e1 + 2 * 0.25 / sb, e1,
        e0 + 2 * (-1 / 12) / sa, e0,
        e0 + 2 * (-1 / 12) / sa, e0 + 2 * (-0.25) / sb, e0,
        1 / (1 + EPS),
    ]
    torch.testing.assert_close(out.advantages[:, 0], torch.tensor(expected, dtype=F64))


def test_gigpo_budget_anchors_separate_same_state_with_different_remaining_budget() -> None:
    # Two trajectories of one group (budget T = 5) both visit state "S": tau1 at t = 0 (remaining 5),
    # tau2 at t = 2 (remaining 3). Their returns differ (1 vs 0).
    inputs = {
        "response_mask": torch.ones(4, 1, dtype=F64),
        "scores": torch.tensor([1, 0, 0, 0], dtype=F64),
        "index": ["g"] * 4,
        "traj_index": ["t1", "t2", "t2", "t2"],
        "step_index": torch.tensor([0, 0, 1, 2]),
        "step_rewards": torch.tensor([1, 0, 0, 0], dtype=F64),
    }
    states = ["S", "P", "Q", "S"]
    steps = [0, 0, 1, 2]
    budget_keys = [budget_anchor(s, 5, t) for s, t in zip(states, steps)]
    assert budget_keys[0] == ("S", 5) and budget_keys[3] == ("S", 3)
    episode = compute_advantage("gigpo", AdvantageInputs(**inputs, anchor_keys=budget_keys), step_advantage_w=0.0)
    with_budget = compute_advantage("gigpo", AdvantageInputs(**inputs, anchor_keys=budget_keys))
    # every (state, remaining budget) anchor is a singleton: A^S = 0, A = A^E
    torch.testing.assert_close(with_budget.advantages, episode.advantages)
    # keyed by state alone, rows 0 and 3 would share an anchor and get a step advantage
    state_only = compute_advantage("gigpo", AdvantageInputs(**inputs, anchor_keys=states))
    assert not torch.allclose(state_only.advantages, episode.advantages)
    with pytest.raises(ValueError, match="completed_turns"):
        budget_anchor("S", 5, 6)


def test_gigpo_zero_variance_anchor_gets_zero_step_advantage() -> None:
    # Two steps share anchor A with equal returns (0.9 * 1 = 0.9 each): zero variance -> A^S = 0 in both modes.
    inputs = AdvantageInputs(
        torch.ones(4, 1, dtype=F64), scores=torch.tensor([1, 1, 1, 1.0], dtype=F64), index=["g"] * 4,
        traj_index=["x", "x", "y", "y"], step_index=torch.tensor([0, 1, 0, 1]),
        step_rewards=torch.tensor([0, 1, 0, 1], dtype=F64), anchor_keys=["A", "B", "A", "B"],
    )
    for mode in ("mean_norm", "mean_std_norm"):
        out = compute_advantage("gigpo", inputs, mode=mode)
        assert torch.equal(out.advantages, torch.zeros_like(out.advantages))
        assert out.metrics["adv/step_adv_rows_frac"].item() == 0.0


def test_gigpo_names_missing_inputs_and_duplicate_steps() -> None:
    base = _gigpo_example()
    with pytest.raises(ValueError, match="anchor_keys"):
        compute_advantage("gigpo", AdvantageInputs(base.response_mask, scores=base.scores, index=base.index,
                                                   traj_index=base.traj_index, step_index=base.step_index,
                                                   step_rewards=base.step_rewards))
    dup = AdvantageInputs(torch.ones(2, 1), scores=torch.ones(2), index=["g", "g"], traj_index=["x", "x"],
                          step_index=torch.tensor([0, 0]), step_rewards=torch.zeros(2), anchor_keys=["A", "A"])
    with pytest.raises(ValueError, match="step_index"):
        compute_advantage("gigpo", dup)


def _gigpo_reference(rows: list[dict], gamma: float, omega: float, std: bool) -> list[float]:
    """Loop form: episode advantage per trajectory, then per-anchor normalisation of discounted returns."""
    trajs: dict[tuple, dict[int, float]] = defaultdict(dict)
    for r in rows:
        trajs[(r["g"], r["traj"])][r["step"]] = r["reward"]
    def ret(key: tuple, t: int) -> float:
        steps = trajs[key]
        return sum(gamma ** (k - t) * steps.get(k, 0.0) for k in range(t, max(steps) + 1))
    ep_scores: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        ep_scores[r["g"]][r["traj"]] = r["score"]
    anchors: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        anchors[(r["g"], r["anchor"])].append(ret((r["g"], r["traj"]), r["step"]))
    out = []
    for r in rows:
        vals = list(ep_scores[r["g"]].values())
        mu, sd = (0.0, 1.0) if len(vals) == 1 else (
            sum(vals) / len(vals), math.sqrt(sum((v - sum(vals) / len(vals)) ** 2 for v in vals) / (len(vals) - 1)))
        a_e = (r["score"] - mu) / (sd + EPS) if std else r["score"] - mu
        group = anchors[(r["g"], r["anchor"])]
        a_s = 0.0
        if len(group) > 1 and max(group) != min(group):
            m = sum(group) / len(group)
            s = math.sqrt(sum((v - m) ** 2 for v in group) / (len(group) - 1))
            r_t = ret((r["g"], r["traj"]), r["step"])
            a_s = (r_t - m) / (s + EPS) if std else r_t - m
        out.append(a_e + omega * a_s)
    return out


@PROPS
@given(seed=st.integers(0, 10_000), std=st.booleans(), gamma=st.sampled_from([0.5, 0.95, 1.0]))
def test_gigpo_matches_loop_reference_on_random_rollouts(seed: int, std: bool, gamma: float) -> None:
    g = torch.Generator().manual_seed(seed)
    rows = []
    for group in ("g0", "g1"):
        for k in range(int(torch.randint(1, 4, (1,), generator=g))):
            length = int(torch.randint(1, 5, (1,), generator=g))
            rewards = [(-0.1 if torch.rand(1, generator=g).item() < 0.3 else 0.0) for _ in range(length)]
            rewards[-1] += float(torch.randint(0, 2, (1,), generator=g))
            for t in range(length):
                anchor = (int(torch.randint(0, 3, (1,), generator=g)), length - t)
                rows.append({"g": group, "traj": f"{group}-{k}", "step": t, "reward": rewards[t],
                             "score": sum(rewards), "anchor": anchor})
    order = torch.randperm(len(rows), generator=g).tolist()  # rows arrive in any order
    rows = [rows[i] for i in order]
    inputs = AdvantageInputs(
        torch.ones(len(rows), 1, dtype=F64), scores=torch.tensor([r["score"] for r in rows], dtype=F64),
        index=[r["g"] for r in rows], traj_index=[r["traj"] for r in rows],
        step_index=torch.tensor([r["step"] for r in rows]),
        step_rewards=torch.tensor([r["reward"] for r in rows], dtype=F64),
        anchor_keys=[r["anchor"] for r in rows],
    )
    out = compute_advantage("gigpo", inputs, gamma=gamma, mode="mean_std_norm" if std else "mean_norm")
    expected = torch.tensor(_gigpo_reference(rows, gamma, 1.0, std), dtype=F64)
    torch.testing.assert_close(out.advantages[:, 0], expected, rtol=1e-7, atol=1e-7)


# --------------------------------------------------------------------------------------------------------------------
# GAE


def test_gae_hand_computed_skips_masked_tokens() -> None:
    # gamma 0.9, lambda 0.8 ; position 2 is an observation token (masked: its value 9 and reward 5 are ignored).
    # valid chain 0 -> 1 -> 3: d3 = 1 - 0.2 = 0.8 ; d1 = 0 + 0.9 * 0.2 - 0.4 = -0.22 ; d0 = 0.9 * 0.4 - 0.5 = -0.14
    # A3 = 0.8 ; A1 = -0.22 + 0.72 * 0.8 = 0.356 ; A0 = -0.14 + 0.72 * 0.356 = 0.11632 ; returns = A + V
    rewards = torch.tensor([[0.0, 0.0, 5.0, 1.0]], dtype=F64)
    values = torch.tensor([[0.5, 0.4, 9.0, 0.2]], dtype=F64)
    mask = torch.tensor([[1, 1, 0, 1]], dtype=F64)
    adv, ret = compute_gae_advantage_return(rewards, values, mask, gamma=0.9, lam=0.8)
    torch.testing.assert_close(adv, torch.tensor([[0.11632, 0.356, 0.0, 0.8]], dtype=F64))
    torch.testing.assert_close(ret, torch.tensor([[0.61632, 0.756, 0.0, 1.0]], dtype=F64))
    out = compute_advantage("gae", AdvantageInputs(mask, token_level_rewards=rewards, values=values), gamma=0.9, lam=0.8)
    torch.testing.assert_close(out.returns, ret)
    valid = torch.tensor([0.11632, 0.356, 0.8], dtype=F64)  # whitened over the valid tokens
    expected = (valid - valid.mean()) / torch.sqrt(valid.var() + 1e-8)
    torch.testing.assert_close(out.advantages[mask.bool()], expected)


def _gae_reference(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float) -> Tensor:
    """Backward loop over each row's valid tokens; the value after the last valid token is 0."""
    out = torch.zeros_like(values)
    for i in range(values.shape[0]):
        valid = [t for t in range(values.shape[1]) if mask[i, t]]
        running, next_value = 0.0, 0.0
        for t in reversed(valid):
            delta = rewards[i, t].item() + gamma * next_value - values[i, t].item()
            running = delta + gamma * lam * running
            out[i, t] = running
            next_value = values[i, t].item()
    return out


@PROPS
@given(seed=st.integers(0, 10_000), b=st.integers(1, 4), l=st.integers(1, 40), gamma=st.sampled_from([1.0, 0.99, 0.5]),
       lam=st.sampled_from([1.0, 0.95, 0.0]))
def test_gae_matches_loop_reference(seed: int, b: int, l: int, gamma: float, lam: float) -> None:
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(b, l, generator=g, dtype=F64)
    values = torch.randn(b, l, generator=g, dtype=F64)
    mask = (torch.rand(b, l, generator=g) < 0.7).to(F64)
    adv, ret = compute_gae_advantage_return(rewards, values, mask, gamma, lam)
    ref = _gae_reference(rewards, values, mask, gamma, lam)
    torch.testing.assert_close(adv, ref, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(ret, (ref + values) * mask, rtol=1e-9, atol=1e-9)


def test_gae_needs_values() -> None:
    with pytest.raises(ValueError, match="values"):
        compute_advantage("gae", AdvantageInputs(torch.ones(1, 2), token_level_rewards=torch.zeros(1, 2)))


# --------------------------------------------------------------------------------------------------------------------
# EMPG


def test_empg_hand_computed() -> None:
    # One group, base Dr.GRPO (cross-step): trajectory X steps 0, 1 (score 1), Y step 0 (score 0):
    #   mu = 2/3 -> A = [1/3, 1/3, -2/3]
    # Step entropies H = [0.2, 0.6, 1.0] -> Hn = [0, 0.5, 1]
    # g = e^-Hn / mean(e^-Hn) ; f = e^-Hn ; only X step 0 has a next step (X step 1): bonus 0.05 * e^-0.5
    # A' = g A + bonus ; then minus the batch mean
    mask = torch.tensor([[1, 1], [1, 0], [1, 1]], dtype=F64)
    entropy = torch.tensor([[0.1, 0.3], [0.6, 99.0], [1.0, 1.0]], dtype=F64)  # row means 0.2, 0.6, 1.0
    inputs = AdvantageInputs(mask, scores=torch.tensor([1, 1, 0], dtype=F64), index=["g"] * 3,
                             traj_index=["X", "X", "Y"], step_index=torch.tensor([0, 1, 0]), old_entropy=entropy)
    out = compute_advantage("empg", inputs, norm_adv_by_std_in_grpo=False)
    e = [1.0, math.exp(-0.5), math.exp(-1.0)]
    g = [x / (sum(e) / 3) for x in e]
    mod = [g[0] / 3 + 0.05 * e[1], g[1] / 3, g[2] * (-2 / 3)]
    final = [m - sum(mod) / 3 for m in mod]
    torch.testing.assert_close(out.advantages, torch.tensor(final, dtype=F64).unsqueeze(-1) * mask)


def test_empg_uniform_entropy_reduces_to_centred_base_plus_bonus() -> None:
    # All H equal -> Hn = 0, g = 1, f = 1: A' = A + 0.05 [has next] ; minus the batch mean
    mask = torch.ones(3, 2, dtype=F64)
    inputs = AdvantageInputs(mask, scores=torch.tensor([1, 1, 0], dtype=F64), index=["g"] * 3,
                             traj_index=["X", "X", "Y"], step_index=torch.tensor([0, 1, 0]),
                             old_entropy=torch.full((3, 2), 0.7, dtype=F64))
    out = compute_advantage("empg", inputs, norm_adv_by_std_in_grpo=False)
    mod = [1 / 3 + 0.05, 1 / 3, -2 / 3]
    torch.testing.assert_close(out.advantages[:, 0], torch.tensor([m - sum(mod) / 3 for m in mod], dtype=F64))


def _empg_reference(scores, index, traj, steps, entropy, mask, k=1.0, k_f=1.0, zeta=0.05) -> list[float]:
    """Loop form of EMPG (docs/algorithms.md#advantage-estimators) on a GRPO (cross-step, std-normalised) base."""
    n = len(scores)
    base = _grpo_reference(scores, index, True)
    valid = [any(mask[i]) for i in range(n)]
    h = [sum(e for e, m in zip(entropy[i], mask[i]) if m) / max(sum(mask[i]), 1) for i in range(n)]
    hv = [h[i] for i in range(n) if valid[i]]
    lo, hi = (min(hv), max(hv)) if hv else (0.0, 0.0)
    hn = [(h[i] - lo) / (hi - lo) if valid[i] and hi > lo else 0.0 for i in range(n)]
    scale = [math.exp(-k * x) for x in hn]
    mean_scale = sum(scale[i] for i in range(n) if valid[i]) / max(sum(valid), 1)
    out = []
    for i in range(n):
        nxt = [j for j in range(n) if traj[j] == traj[i] and steps[j] == steps[i] + 1 and valid[j]]
        bonus = zeta * math.exp(-k_f * hn[nxt[0]]) if nxt else 0.0
        out.append(scale[i] / mean_scale * base[i] + bonus)
    mean = sum(out[i] for i in range(n) if valid[i]) / max(sum(valid), 1)
    return [out[i] - mean if valid[i] else 0.0 for i in range(n)]


@PROPS
@given(seed=st.integers(0, 10_000))
def test_empg_matches_loop_reference_on_random_rollouts(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    index, traj, steps = [], [], []
    for k in range(int(torch.randint(1, 6, (1,), generator=g))):
        for t in range(int(torch.randint(1, 4, (1,), generator=g))):
            index.append(k % 2)
            traj.append(k)
            steps.append(t)
    n = len(index)
    episode = torch.randint(0, 2, (6,), generator=g).to(F64)
    scores = [episode[tr].item() for tr in traj]
    mask = (torch.rand(n, 3, generator=g) < 0.8).to(F64)
    entropy = torch.rand(n, 3, generator=g, dtype=F64)
    inputs = AdvantageInputs(mask, scores=torch.tensor(scores, dtype=F64), index=index, traj_index=traj,
                             step_index=torch.tensor(steps), old_entropy=entropy)
    out = compute_advantage("empg", inputs)
    ref = _empg_reference(scores, index, traj, steps, entropy.tolist(), mask.tolist())
    torch.testing.assert_close(out.advantages, torch.tensor(ref, dtype=F64).unsqueeze(-1) * mask,
                               rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------------------------------------------------
# Numerics and the registry


@pytest.mark.parametrize("name", ["grpo", "rloo", "reinforce_plus_plus_baseline", "gigpo", "gae", "empg"])
def test_estimators_stay_finite_on_empty_rows_all_masked_and_uniform_groups(name: str) -> None:
    for mask in (torch.tensor([[1, 1], [0, 0], [1, 0], [0, 0]], dtype=F64), torch.zeros(4, 2, dtype=F64)):
        inputs = AdvantageInputs(
            mask, token_level_rewards=torch.zeros(4, 2, dtype=F64), scores=torch.ones(4, dtype=F64),
            index=["g", "g", "h", "h"], traj_index=["a", "b", "c", "d"], step_index=torch.tensor([0, 0, 0, 0]),
            step_rewards=torch.zeros(4, dtype=F64), anchor_keys=["s"] * 4, values=torch.zeros(4, 2, dtype=F64),
            old_entropy=torch.zeros(4, 2, dtype=F64),
        )
        out = compute_advantage(name, inputs)
        assert torch.isfinite(out.advantages).all() and torch.isfinite(out.returns).all()
        assert torch.equal(out.advantages * (1 - mask), torch.zeros_like(mask))
        if name != "gae":  # uniform scores within every group: no signal
            assert torch.allclose(out.advantages, torch.zeros_like(mask), atol=1e-12)


def test_every_estimator_has_one_signature_and_unknown_names_list_the_known_ones() -> None:
    assert set(ADV_ESTIMATORS.names()) >= {"grpo", "rloo", "reinforce_plus_plus_baseline", "gigpo", "gae", "empg"}
    with pytest.raises(ValueError, match="grpo"):
        compute_advantage("grpo2", AdvantageInputs(torch.ones(1, 1)))
    with pytest.raises(ValueError, match="index"):
        compute_advantage("grpo", AdvantageInputs(torch.ones(1, 1), scores=torch.ones(1)))


@dataclass(frozen=True)
class _ConstConfig:
    value: float = 1.0
    """The advantage every valid token gets."""


def test_user_registered_estimator() -> None:
    @register_adv_estimator("test_const", _ConstConfig)
    def _const(inputs: AdvantageInputs, config: _ConstConfig) -> AdvantageOutput:
        out = inputs.response_mask.to(F64) * config.value
        return AdvantageOutput(out, out, {})

    try:
        got = compute_advantage("test_const", AdvantageInputs(torch.ones(2, 2)), value="2.5")
        assert torch.equal(got.advantages, torch.full((2, 2), 2.5, dtype=F64))
        with pytest.raises(ValueError, match="already registered"):
            register_adv_estimator("test_const", _ConstConfig)(_const)
    finally:
        ADV_ESTIMATORS.unregister("test_const")
