"""Budget headroom and first-move gain (docs/metrics.md#budget-headroom) and the screened FrozenLake task sets."""

from __future__ import annotations

import numpy as np
import pytest

from arlkit.envs import make
from arlkit.envs.frozenlake.maps import GAMMA, generate_random_map, lake_model, reaches_goal
from arlkit.envs.frozenlake.sets import SHIPPED_SETS, budget_fork_maps, budget_sensitive_maps, quarter_budget


def test_headroom_on_a_hand_made_map() -> None:
    # Map  S F      cells 0 1     slippery, success rate p = 0.8, T_max = 60, budget T = 2.
    #      H G            2 3
    # From S: Right reaches F with p and slips Down into the hole with (1-p)/2 (Up stays);
    # Up stays with p + (1-p)/2 and slips Right to F with (1-p)/2 -- slow but it never falls.
    # From F: Down reaches G with p.
    # Budget-aware optimum within 2 turns: Right then Down = p * p = 0.64.
    # "success" criterion, T_max = 60: the safe Up route succeeds almost surely within 60 turns,
    # the risky Right route at most 0.8 / 0.9 = 0.889, so the full-budget policy plays Up at S.
    # At F with 59 turns left it plays Right: that never leaves F (the move hits the border, the
    # Up slip stays, the Down slip reaches G with 0.1), while Down would send it back to the slow
    # S with 0.1; it switches to Down only when time runs short. So within 2 turns it succeeds only
    # by slipping Right at S (0.1) and then slipping Down at F (0.1): 0.01.
    # headroom = 0.64 - 0.01 = 0.63.
    model = lake_model(("SF", "HG"), True, 0.8)
    policy = model.planning_policy(60, "success")
    assert policy[0, 0].tolist() == [0, 0, 0, 1]  # turn 0 at S: Up
    assert policy[1, 1].tolist() == [0, 0, 1, 0]  # turn 1 at F: Right
    assert policy[58, 1].tolist() == [0, 1, 0, 0]  # one turn left at F: Down (0.8 beats 0.1)
    assert model.headroom(2, 60, "success") == pytest.approx(0.63, abs=1e-12)
    # "discounted" criterion: with gamma = 0.95 the slow Up route is worth less than the risky one
    # (Q*(S, Right) > Q*(S, Up) at every horizon), so both planners play Right, Down: headroom 0.
    q = model.q_values(60)
    assert all(q[h, 0, 2] > q[h, 0, 3] for h in range(2, 61))  # Right (2) beats Up (3)
    assert model.headroom(2, 60, "discounted") == pytest.approx(0.0, abs=1e-12)
    assert GAMMA == 0.95


def test_headroom_is_zero_at_full_budget_and_on_deterministic_maps() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        desc = tuple(generate_random_map(4, 0.8, rng))
        slippery = lake_model(desc, True, 0.8)
        for criterion in ("discounted", "success"):
            assert slippery.headroom(24, 24, criterion) == pytest.approx(0.0, abs=1e-12)
        assert slippery.headroom(6, 24, "success") >= -1e-12  # V*_T is the optimum
        deterministic = lake_model(desc, False, 1.0)
        for T in (6, 8, 12, 24):
            assert deterministic.headroom(T, 24) == pytest.approx(0.0, abs=1e-12)


def _slow_success_within(desc: tuple[str, ...], p: float, policy: np.ndarray, budget: int) -> float:
    """Independent reference: forward propagation of the state distribution for ``budget`` turns."""
    model = lake_model(desc, True, p)
    dist = np.zeros(len("".join(desc)))
    dist[model.start] = 1.0
    won = 0.0
    for t in range(budget):
        nxt = np.zeros_like(dist)
        for s, mass in enumerate(dist):
            if mass == 0 or model.terminal[s]:
                continue
            for a in range(4):
                for s2 in range(len(dist)):
                    prob = mass * policy[t, s, a] * model.transitions[s, a, s2]
                    if prob == 0:
                        continue
                    if model.goal_reward[s2] > 0:
                        won += prob
                    elif not model.terminal[s2]:
                        nxt[s2] += prob
        dist = nxt
    return won


def test_policy_evaluation_matches_forward_simulation_of_the_distribution() -> None:
    rng = np.random.default_rng(5)
    for _ in range(5):
        desc = tuple(generate_random_map(4, 0.75, rng))
        model = lake_model(desc, True, 0.8)
        policy = model.planning_policy(24)
        for budget in (6, 10, 24):
            fast = model.policy_success_probability(policy, budget)[model.start]
            assert fast == pytest.approx(_slow_success_within(desc, 0.8, policy, budget), abs=1e-12)


def test_standard_maps_have_little_headroom() -> None:
    rng = np.random.default_rng(0)
    values = [lake_model(tuple(generate_random_map(4, 0.8, rng)), True, 0.8).headroom(6, 24) for _ in range(200)]
    assert 0.0 < float(np.mean(values)) < 0.04  # about 2 points (docs/metrics.md#budget-headroom)


def test_budget_sensitive_generator_meets_the_threshold() -> None:
    maps = []
    for desc in budget_sensitive_maps(5, 0.8, 32, threshold=0.10, seed=3):
        if desc is not None:
            maps.append(desc)
        if len(maps) == 30:
            break
    assert len(set(maps)) == 30
    for desc in maps:
        assert lake_model(desc, True, 0.8).headroom(quarter_budget(32), 32) >= 0.10
    again = []
    for desc in budget_sensitive_maps(5, 0.8, 32, threshold=0.10, seed=3):
        if desc is not None:
            again.append(desc)
        if len(again) == 30:
            break
    assert again == maps


def test_first_move_gain_on_a_hand_made_map() -> None:
    # Map  S F      cells 0 1     slippery, success rate p = 0.6 (each sideways slip 0.2), T_max = 60.
    #      H G            2 3
    # At S, Right reaches F with p and falls into the hole with 0.2; Up never falls (it stays, or slips
    # Right to F with 0.2). With gamma = 0.95 the discounted oracle plays the safe Up: E[gamma^N] of
    # reaching F is 0.2 g / (1 - 0.8 g) = 0.79 for Up against 0.6 g / (1 - 0.2 g) = 0.70 for Right.
    # Within a budget of 2 turns, with optimal play after the first move (Down at F, p):
    # Right p * p = 0.36; Up 0.2 * p = 0.12; Down (0.6 hole, 0.2 stays, 0.2 to F) 0.2 * p = 0.12.
    # First-move gain at 2 = 0.36 - 0.12 = 0.24; at 60 the oracles agree: 0.
    model = lake_model(("SF", "HG"), True, 0.6)
    assert model.planning_policy(60)[0, 0].tolist() == [0, 0, 0, 1]  # Up
    assert model.first_move_gain(2, 60) == pytest.approx(0.24, abs=1e-12)
    assert model.first_move_gain(60, 60) == pytest.approx(0.0, abs=1e-12)
    assert lake_model(("SF", "HG"), True, 0.8).first_move_gain(2, 60) == pytest.approx(0.0, abs=1e-12)  # Right
    with pytest.raises(ValueError, match="budget must be between 1 and t_max = 60, got 61"):
        model.first_move_gain(61, 60)


def test_reaches_goal_searches_from_the_start() -> None:
    assert reaches_goal(["FFF", "HHH", "SFG"])  # the start is on the bottom row, beside the goal
    assert not reaches_goal(["SFF", "HHH", "FFG"])
    assert reaches_goal(["FFF", "FHH", "FHG"]) is False and reaches_goal(["FFG", "FHH", "FHH"])  # no S: top-left


def test_budget_fork_generator_meets_the_threshold_with_starts_anywhere() -> None:
    def first(n: int) -> list[tuple[str, ...]]:
        return [desc for desc in budget_fork_maps(5, 0.8, 32, threshold=0.2, seed=3, restarts=400)
                if desc is not None][:n]  # fmt: skip

    maps = first(30)
    assert len(set(maps)) == 30 and first(30) == maps  # distinct and deterministic
    starts = {"".join(desc).index("S") for desc in maps}
    assert len(starts) >= 2 and starts != {0}  # the start is not pinned to the corner
    for desc in maps:
        model = lake_model(desc, True, 0.8)
        assert reaches_goal(desc) and model.first_move_gain(quarter_budget(32), 32) >= 0.2
        # the fork: the full-budget oracle's first move is not the best one at 25% of T_max
        best = model.q_values(8, gamma=1.0)[8, model.start]
        assert model.planning_policy(32)[0, model.start] @ best < best.max() - 0.2 + 1e-9


@pytest.mark.parametrize("task_set", sorted(SHIPPED_SETS))
def test_shipped_sets_are_screened_disjoint_and_loaded(task_set: str) -> None:
    shipped = SHIPPED_SETS[task_set]
    p = shipped.params
    env = make("frozenlake", size=p["size"], t_max=p["t_max"], success_rate=p["success_rate"], task_set=task_set,
               headroom_threshold=p["threshold"])  # fmt: skip
    train = env.tasks("train", shipped.counts["train"])
    test = env.tasks("test", shipped.counts["test"])
    assert not {t.task_id for t in train} & {t.task_id for t in test}
    for task in test[::5] + train[::10]:
        env.reset(task, 0)
        if task_set == "budget_sensitive":
            assert env.model.headroom(quarter_budget(32), 32) >= p["threshold"]
        else:
            assert env.model.first_move_gain(quarter_budget(32), 32) >= p["threshold"]
    # the shipped file is what the generator produces
    fresh = type(env)(env.config, use_shipped=False)  # type: ignore[call-arg,attr-defined]
    assert [t.task_id for t in fresh.tasks("train", 10)] == [t.task_id for t in train[:10]]


def test_the_random_generator_never_hangs_on_small_grids() -> None:
    with pytest.raises(ValueError, match="distinct"):
        make("frozenlake", size=3).tasks("train", 200)  # 3x3 has at most 2^7 = 128 maps
    with pytest.raises(ValueError, match="distinct"):
        make("frozenlake", size=2, t_max=8, success_rate=0.8, task_set="budget_sensitive").tasks("test", 3)
