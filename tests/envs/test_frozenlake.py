"""FrozenLake: Gymnasium parity, map generation, splits and the exact oracle."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from arlkit.envs import make
from arlkit.envs.frozenlake.env import FrozenLakeEnv
from arlkit.envs.frozenlake.maps import ACTIONS, GAMMA, generate_random_map, lake_model

gym_frozen_lake = pytest.importorskip("gymnasium.envs.toy_text.frozen_lake")


def _gym_table(desc: list[str], slippery: bool, success_rate: float) -> dict:
    env = gym_frozen_lake.FrozenLakeEnv(desc=desc, is_slippery=slippery, success_rate=success_rate)
    table: dict = {}
    for s, by_action in env.P.items():
        for a, outcomes in by_action.items():
            merged: dict = defaultdict(float)
            for prob, nxt, reward, terminal in outcomes:
                merged[(nxt, float(reward), bool(terminal))] += prob
            table[(s, a)] = dict(merged)
    return table


def _our_table(desc: list[str], slippery: bool, success_rate: float) -> dict:
    model = lake_model(tuple(desc), slippery, success_rate)
    table: dict = {}
    for s in range(model.transitions.shape[0]):
        for a in range(4):
            out = {}
            for nxt in np.flatnonzero(model.transitions[s, a]):
                terminal = bool(model.terminal[nxt])
                out[(int(nxt), float(model.goal_reward[nxt]) if not model.terminal[s] else 0.0, terminal)] = model.transitions[s, a, nxt]
            table[(s, a)] = out
    return table


@pytest.mark.parametrize("slippery,success_rate", [(False, 1.0), (True, 1.0 / 3.0), (True, 0.8)])
def test_transitions_equal_gymnasium(slippery: bool, success_rate: float) -> None:
    rng = np.random.default_rng(7)
    for size in (3, 4, 5, 6):
        desc = generate_random_map(size, 0.75, rng)
        gym, ours = _gym_table(desc, slippery, success_rate), _our_table(desc, slippery, success_rate)
        assert gym.keys() == ours.keys()
        for key in gym:
            model = lake_model(tuple(desc), slippery, success_rate)
            if model.terminal[key[0]]:
                continue  # Gymnasium's self-loops at terminal states are never used: episodes end there
            assert set(gym[key]) == set(ours[key]), (desc, key)
            for outcome, prob in gym[key].items():
                assert ours[key][outcome] == pytest.approx(prob, abs=1e-12)


def test_generated_maps_are_valid_and_deterministic() -> None:
    env = make("frozenlake", size=5)
    tasks = env.tasks("train", 40)
    for task in tasks:
        desc = task.payload["desc"]
        assert desc[0][0] == "S" and desc[-1][-1] == "G" and len(desc) == 5
        model = lake_model(tuple(desc), False, 1.0)
        assert model.distance[model.start] > 0  # the goal is reachable
    assert [t.task_id for t in make("frozenlake", size=5).tasks("train", 40)] == [t.task_id for t in tasks]


def test_random_starts_move_only_the_start_and_vary_the_distance() -> None:
    args = {"size": 5, "t_max": 32, "success_rate": 0.8, "task_set": "budget_sensitive"}
    corner = make("frozenlake", **args).tasks("train", 200)
    moved = make("frozenlake", **args, start="random").tasks("train", 200)
    distances = set()
    for a, b in zip(corner, moved, strict=True):
        before, after = "".join(a.payload["desc"]), "".join(b.payload["desc"])
        # the same map: holes and goal unchanged, one start on a frozen cell
        assert before.replace("S", "F") == after.replace("S", "F")
        model = lake_model(tuple(b.payload["desc"]), False, 1.0)
        assert after.count("S") == 1 and model.distance[model.start] > 0
        distances.add(int(model.distance[model.start]))
    assert min(distances) <= 2 and max(distances) >= 8  # near and far starts both occur
    assert sum(a.task_id != b.task_id for a, b in zip(corner, moved)) > 150  # most starts move
    again = make("frozenlake", **args, start="random").tasks("train", 200)
    assert [t.task_id for t in again] == [t.task_id for t in moved]  # deterministic
    with pytest.raises(ValueError, match="start: 'middle' is not one of corner, random"):
        make("frozenlake", start="middle")


def test_train_and_test_maps_are_disjoint_by_content() -> None:
    env = make("frozenlake", size=4)
    train = {"\n".join(t.payload["desc"]) for t in env.tasks("train", 300)}
    test = {"\n".join(t.payload["desc"]) for t in env.tasks("test", 100)}
    assert len(train) == 300 and len(test) == 100
    assert not train & test


def test_small_task_space_ends_with_an_error_not_a_hang() -> None:
    env = make("frozenlake", size=2, p_frozen=0.5)  # 2x2: at most 4 distinct maps
    with pytest.raises(ValueError, match="distinct"):
        env.tasks("test", 50)


def test_deterministic_q_star_identity() -> None:
    # On deterministic maps V_h(s) = gamma^(d-1) when the shortest path d <= h, else 0.
    rng = np.random.default_rng(3)
    for _ in range(10):
        desc = generate_random_map(6, 0.8, rng)
        model = lake_model(tuple(desc), False, 1.0)
        q = model.q_values(20)
        for s in range(36):
            if model.terminal[s]:
                continue
            d = int(model.distance[s])
            for h in range(21):
                expected = GAMMA ** (d - 1) if 0 < d <= h else 0.0
                assert q[h, s].max() == pytest.approx(expected, abs=1e-12), (s, h, d)


def test_optimal_actions_follow_a_shortest_path() -> None:
    env = make("frozenlake", slippery=False, size=6)
    for task in env.tasks("test", 10):
        env.reset(task, 0)
        d = env.shortest_solution_length()
        assert d is not None
        for t in range(d):
            action = env.optimal_actions(d - t)[0]
            before = env.shortest_solution_length()
            result = env.step(action)
            if not result.done:
                assert env.shortest_solution_length() == before - 1
        assert result.success


def test_hand_computed_slippery_values() -> None:
    # Map "SG": from S (cell 0) Right reaches G with prob p; the two perpendicular slips (Up, Down)
    # hit the border and stay. So Q_1(S, Right) = p, and with h = 2, Q_2(S, Right) = p + (1-p)*gamma*p.
    p = 0.8
    model = lake_model(("SG",), True, p)
    q = model.q_values(2)
    assert q[1, 0, ACTIONS.index("Right")] == pytest.approx(p)
    assert q[2, 0, ACTIONS.index("Right")] == pytest.approx(p + (1 - p) * GAMMA * p)
    # Left: the intended move and both slips (Down/Up) hit the border, so S stays S:
    # Q_1(S, Left) = 0 and Q_2(S, Left) = gamma * V_1(S) = gamma * p.
    assert q[1, 0, ACTIONS.index("Left")] == pytest.approx(0.0)
    assert q[2, 0, ACTIONS.index("Left")] == pytest.approx(GAMMA * p)
    # Success probability within 2 turns (gamma = 1): 1 - (1 - p)^2.
    assert model.success_probability(0, 2) == pytest.approx(1 - (1 - p) ** 2)


def test_step_rules_and_invalid_actions() -> None:
    env = make("frozenlake", slippery=False)
    task = FrozenLakeEnv.task_from_map(["SFH", "FFF", "HFG"])
    obs = env.reset(task, 0)
    assert obs == "P_O\n___\nO_G"
    r = env.step("Up")  # border: stay
    assert r.valid and not r.done and env.position == 0
    r = env.step("jump")
    assert not r.valid and "Left, Down, Right, Up" in r.observation and env.position == 0
    r = env.step("right")
    assert r.valid and env.position == 1
    r = env.step("Right")  # into the hole
    assert r.done and not r.success and r.reward == 0.0


def test_slippery_moves_match_their_probabilities() -> None:
    env = make("frozenlake", slippery=True, success_rate=0.8)
    task = FrozenLakeEnv.task_from_map(["FFF", "FSF", "FFG"])
    counts: dict = defaultdict(int)
    for seed in range(4000):
        env.reset(task, seed)
        env.step("Right")
        counts[env.position] += 1
    # From the centre (4): Right -> 5 with 0.8; slips Up -> 1 and Down -> 7 with 0.1 each.
    assert set(counts) == {1, 5, 7}
    assert counts[5] / 4000 == pytest.approx(0.8, abs=0.03)
    assert counts[1] / 4000 == pytest.approx(0.1, abs=0.02)


def test_bad_maps_are_refused() -> None:
    with pytest.raises(ValueError):
        FrozenLakeEnv.task_from_map(["SF", "FX"])
    with pytest.raises(ValueError):
        FrozenLakeEnv.task_from_map(["SS", "FG"])
