"""Sokoban: rules, generation, the exact BFS oracle and the environment contract."""

from __future__ import annotations

import functools
import json
import random
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arlkit.config import ConfigError
from arlkit.envs import ActionSpace, Env, Oracle, Task, make
from arlkit.envs.sokoban.env import (
    ACTIONS,
    GAMMA,
    Room,
    SokobanConfig,
    SokobanEnv,
    SolverLimitError,
    distance_table,
    generate_room,
    solve,
)
from arlkit.envs.splits import content_id, split_of

# -- an independent reference: the rules applied to the drawn grid, character by character -------

_STEP = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def ref_step(rows: tuple[str, ...], action: str) -> tuple[str, ...]:
    """gym-sokoban's push rule on a drawing: the player walks, or pushes one box when the cell
    behind it is floor or an empty target; otherwise nothing changes."""
    grid = [list(row) for row in rows]
    pr, pc = next((r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch in "PS")
    dr, dc = _STEP[action]

    def at(r: int, c: int) -> str:
        return grid[r][c] if 0 <= r < len(grid) and 0 <= c < len(grid[0]) else "#"

    def put(r: int, c: int, thing: str) -> None:  # thing: "P", "X" or "" (leave floor/target)
        target = grid[r][c] in "OS√"
        grid[r][c] = {"P": "S" if target else "P", "X": "√" if target else "X", "": "O" if target else "_"}[thing]

    nr, nc = pr + dr, pc + dc
    if at(nr, nc) in "_O":
        put(pr, pc, ""), put(nr, nc, "P")
    elif at(nr, nc) in "X√" and at(nr + dr, nc + dc) in "_O":
        put(nr + dr, nc + dc, "X"), put(pr, pc, ""), put(nr, nc, "P")
    return tuple("".join(row) for row in grid)


def ref_solved(rows: tuple[str, ...]) -> bool:
    return not any("X" in row for row in rows)


def ref_graph(rows: tuple[str, ...]) -> dict[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """Every drawing reachable from ``rows`` (not moving on from solved ones) and its moves."""
    graph: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}
    queue = deque([rows])
    while queue:
        s = queue.popleft()
        if s in graph:
            continue
        graph[s] = {} if ref_solved(s) else {a: ref_step(s, a) for a in ACTIONS}
        queue.extend(graph[s].values())
    return graph


def ref_q(graph, horizon: int) -> list[dict[tuple[str, ...], dict[str, float]]]:
    """Finite-horizon DP: Q_h(s, a) = 1 if a solves, else gamma * max_a' Q_{h-1}(s', a'); Q_0 = 0."""
    q = [{s: dict.fromkeys(ACTIONS, 0.0) for s in graph}]
    for _ in range(horizon):
        prev = q[-1]
        value = {s: max(prev[s].values()) for s in graph}
        step = {}
        for s, moves in graph.items():  # a solved drawing has no moves: the episode is over
            step[s] = {a: 1.0 if ref_solved(n) else GAMMA * value[n] for a, n in moves.items()}
            step[s] = step[s] or dict.fromkeys(ACTIONS, 0.0)
        q.append(step)
    return q


def ref_distance(graph, rows: tuple[str, ...]) -> int | None:
    """Forward BFS from ``rows`` to the nearest solved drawing."""
    dist, queue = {rows: 0}, deque([rows])
    while queue:
        s = queue.popleft()
        if ref_solved(s):
            return dist[s]
        for n in graph[s].values():
            if n not in dist:
                dist[n] = dist[s] + 1
                queue.append(n)
    return None


def env_at(rows) -> SokobanEnv:
    env = make("sokoban")
    env.reset(SokobanEnv.task_from_room(list(rows)), seed=0)
    return env


GENERATED = [
    (dict(), 30),
    (dict(dim_room=7, num_boxes=2), 10),
    (dict(dim_room=8), 6),
    (dict(dim_room=5, num_boxes=2), 4),
]


def generated_tasks():
    for config, n in GENERATED:
        env = make("sokoban", **config)
        for task in env.tasks("train", n // 2 + n % 2) + env.tasks("test", n // 2):
            yield env, task


# -- protocol and registry ---------------------------------------------------------------------


def test_registered_and_satisfies_protocols():
    env = make("sokoban")
    assert isinstance(env, Env) and isinstance(env, Oracle) and isinstance(env, ActionSpace)
    assert env.name == "sokoban" and env.t_max == 15
    assert env.config == SokobanConfig(dim_room=6, num_boxes=1, t_max=15)
    assert list(env.admissible_actions()) == ["up", "down", "left", "right"]


@pytest.mark.parametrize(
    "bad", [{"dim_room": 3}, {"num_boxes": 0}, {"num_boxes": 15}, {"t_max": 0}, {"min_solution_length": 0},
            {"min_solution_length": 5, "max_solution_length": 4}, {"p_change_direction": 1.5}, {"colour": "red"}]
)
def test_bad_config_is_refused(bad):
    with pytest.raises(ConfigError):
        make("sokoban", **bad)


def test_config_strings_are_coerced():
    env = make("sokoban", dim_room="7", num_boxes="2", max_solution_length="none")
    assert env.config.dim_room == 7 and env.config.num_boxes == 2 and env.config.max_solution_length is None


# -- generation ----------------------------------------------------------------------------------


def test_every_generated_room_is_solved_by_replaying_the_bfs_solution():
    count = 0
    for env, task in generated_tasks():
        first = env.reset(task, seed=0)
        room = Room.from_rows(task.payload["room"])
        assert first == room.text() and not room.solved
        assert task.task_id == "sk-" + content_id(room.text())
        # outer walls intact, one player, as many boxes as targets
        rows = task.payload["room"]
        assert set(rows[0]) == set(rows[-1]) == {"#"} and all(r[0] == r[-1] == "#" for r in rows)
        d = env.shortest_solution_length()
        plan = solve(room)
        assert d is not None and d >= env.config.min_solution_length and plan is not None and len(plan) == d
        for i, action in enumerate(plan):
            result = env.step(action)
            assert result.valid and result.done == (i == d - 1) and result.success == (i == d - 1)
            assert result.reward == (1.0 if i == d - 1 else 0.0)
        assert env.shortest_solution_length() == 0
        count += 1
    assert count == sum(n for _, n in GENERATED) == 50


def test_generated_rooms_match_the_reference_search():
    # The cached backward BFS agrees with a forward BFS over drawings built by the reference rules.
    env = make("sokoban")
    for task in env.tasks("train", 15):
        rows = tuple(task.payload["room"])
        env.reset(task, 0)
        assert env.shortest_solution_length() == ref_distance(ref_graph(rows), rows)


def test_same_seed_same_rooms_and_another_seed_other_rooms():
    a, b = make("sokoban"), make("sokoban")
    assert a.tasks("train", 20) == b.tasks("train", 20)
    assert a.tasks("test", 10) == b.tasks("test", 10)
    other = {t.task_id for t in make("sokoban", seed=1).tasks("train", 20)}
    assert len(other & {t.task_id for t in a.tasks("train", 20)}) < 5
    cfg = SokobanConfig()
    assert generate_room(cfg, random.Random("x")) == generate_room(cfg, random.Random("x"))


def test_train_and_test_are_disjoint_by_content():
    env = make("sokoban")
    train, test = env.tasks("train", 120), env.tasks("test", 40)
    train_rooms = {"\n".join(t.payload["room"]) for t in train}
    test_rooms = {"\n".join(t.payload["room"]) for t in test}
    assert len(train_rooms) == 120 and len(test_rooms) == 40 and not train_rooms & test_rooms
    assert all(split_of(room) == "train" for room in train_rooms)
    assert all(split_of(room) == "test" for room in test_rooms)
    assert env.tasks("train", 30) == train[:30]  # a prefix of a longer request


def test_solution_length_window_is_respected():
    env = make("sokoban", min_solution_length=4, max_solution_length=6)
    for task in env.tasks("train", 15):
        env.reset(task, 0)
        assert 4 <= env.shortest_solution_length() <= 6


def test_impossible_generation_request_fails_clearly():
    env = make("sokoban", dim_room=4, num_boxes=1, min_solution_length=30)  # 2x2 inside: never 30 moves
    with pytest.raises(ValueError, match="no usable Sokoban room"):
        env.tasks("train", 1)
    with pytest.raises(ValueError, match="unknown split"):
        make("sokoban").tasks("validation", 1)


# -- rules -------------------------------------------------------------------------------------


def test_walking_and_pushing():
    env = env_at(["######", "#_X_O#", "#_P__#", "######"])
    r = env.step("left")
    assert r.valid and not r.done and r.reward == 0.0 and r.observation.startswith("You moved left.")
    assert env.render() == "######\n#_X_O#\n#P___#\n######"
    env.step("up")
    r = env.step("right")
    assert r.observation.startswith("You pushed a box right.") and env.render() == "######\n#_PXO#\n#____#\n######"
    r = env.step("right")
    assert (r.valid, r.done, r.success, r.reward) == (True, True, True, 1.0)
    assert env.render() == "######\n#__P√#\n#____#\n######"
    after = env.step("left")  # the episode is over: nothing more happens
    assert (after.valid, after.done, after.success, after.reward) == (False, True, False, 0.0)
    assert env.render() == "######\n#__P√#\n#____#\n######"


def test_player_on_target_and_box_leaving_target():
    env = env_at(["#######", "#S√X__#", "#_____#", "#######"])  # 2 boxes, 2 targets (one under the player)
    r = env.step("right")  # box on target pushed into the other box: stuck
    assert r.valid and "cannot push" in r.observation and env.render() == "#######\n#S√X__#\n#_____#\n#######"
    env.step("down")  # player leaves the target it stood on
    assert env.render() == "#######\n#O√X__#\n#P____#\n#######"


@pytest.mark.parametrize(
    "rows, action, message",
    [
        (["#####", "#_PX#", "#O__#", "#####"], "right", "cannot push"),  # box into wall
        (["#######", "#PXX_O#", "#____O#", "#######"], "right", "cannot push"),  # box into box
        (["#####", "#_PX#", "#O__#", "#####"], "up", "wall"),  # player into wall
        (["___", "PXO"], "left", "wall"),  # the edge of a room drawn without walls is a wall too
        (["P__", "_XO"], "up", "wall"),
    ],
)
def test_blocked_moves_are_valid_and_change_nothing(rows, action, message):
    env = env_at(rows)
    before = env.render()
    r = env.step(action)
    assert r.valid and not r.done and r.reward == 0.0 and message in r.observation
    assert env.render() == before


@pytest.mark.parametrize("action", ["Up", " LEFT ", "down.", "Right"])
def test_action_names_are_case_insensitive(action):
    env = env_at(["#####", "#___#", "#_P_#", "#_XO#", "#####"])
    assert env.step(action).valid


@pytest.mark.parametrize(
    "junk", ["", "north", "up down", "<action>up</action>", "\x00\xff\ud800", "up" * 100_000, "1", "push box"]
)
def test_invalid_actions_leave_the_state_unchanged(junk):
    env = env_at(["#####", "#___#", "#_P_#", "#_XO#", "#####"])
    before = env.snapshot()
    r = env.step(junk)
    assert (r.valid, r.done, r.success, r.reward) == (False, False, False, 0.0)
    assert "Invalid action" in r.observation and "up, down, left, right" in r.observation
    assert len(r.observation) < 500 and r.observation.endswith(env.render())
    assert env.snapshot() == before


def test_non_text_action_is_invalid_not_an_exception():
    env = env_at(["#####", "#PXO#", "#####"])
    for junk in (None, b"up", 3):
        assert env.step(junk).valid is False  # type: ignore[arg-type]


@functools.cache
def _seven_by_seven_tasks() -> list[Task]:
    return make("sokoban", dim_room=7, num_boxes=2).tasks("train", 30)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(ACTIONS) + ["junk"]), max_size=30), st.integers(0, 29))
def test_steps_match_the_reference_rules(actions, which):
    task = _seven_by_seven_tasks()[which]
    env = make("sokoban", dim_room=7, num_boxes=2)
    env.reset(task, 0)
    rows = tuple(task.payload["room"])
    for action in actions:
        was_solved = ref_solved(rows)
        r = env.step(action)
        if action != "junk" and not was_solved:
            rows = ref_step(rows, action)
        assert env.render() == "\n".join(rows)
        assert r.valid == (action != "junk" and not was_solved)
        assert r.done == ref_solved(rows)
        assert r.success == (r.valid and ref_solved(rows))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_parse_and_step_never_raise(reply):
    env = env_at(["#####", "#___#", "#_P_#", "#_XO#", "#####"])
    parsed = env.parse_action(reply)
    r = env.step(parsed.action if parsed.action is not None else reply)
    assert isinstance(r.observation, str)


def test_bad_rooms_are_refused():
    for rows in ([], ["#P#", "##"], ["#PX#"], ["#PO#"], ["#PXO#", "#P__#"], ["#PXZ#"]):
        with pytest.raises(ValueError):
            SokobanEnv.task_from_room(rows)


# -- snapshot / restore --------------------------------------------------------------------------


def test_snapshot_restore_round_trip():
    env = make("sokoban")
    tasks = env.tasks("train", 2)
    env.reset(tasks[0], 0)
    env.step("up"), env.step("left")
    snap, key, view = env.snapshot(), env.state_key(), env.render()
    d, values = env.shortest_solution_length(), env.action_values(10)
    first_path = [env.step(a).observation for a in ("down", "right", "right", "up")]
    env.reset(tasks[1], 0)  # another task in between
    env.restore(snap)
    assert env.state_key() == key and env.render() == view
    assert env.shortest_solution_length() == d and env.action_values(10) == values
    assert [env.step(a).observation for a in ("down", "right", "right", "up")] == first_path
    hash(env.state_key())


def test_restore_keeps_the_episode_over_flag():
    env = env_at(["#####", "#PXO#", "#####"])
    before = env.snapshot()
    assert env.step("right").done
    done = env.snapshot()
    env.restore(before)
    assert env.step("right").success
    env.restore(done)
    assert env.step("right").valid is False


# -- the exact oracle on hand-made rooms ---------------------------------------------------------


def test_one_push_room():
    # #PXO#: "right" pushes the box onto the target: d = 1.
    # Q_h(right) = 1 for h >= 1. up/down/left hit walls, the state stays at d = 1, so their value is
    # gamma * V_{h-1} = gamma * gamma**0 = 0.95 once h - 1 >= 1, i.e. h >= 2, and 0 at h = 1.
    env = env_at(["#####", "#PXO#", "#####"])
    assert env.shortest_solution_length() == 1
    assert env.action_values(1) == {"up": 0.0, "down": 0.0, "left": 0.0, "right": 1.0}
    assert env.action_values(2) == pytest.approx({"up": 0.95, "down": 0.95, "left": 0.95, "right": 1.0}, abs=1e-12)
    assert env.optimal_actions(2) == ["right"]
    assert env.action_values(0) == dict.fromkeys(ACTIONS, 0.0)
    assert env.success_probability(0) == 0.0 and env.success_probability(1) == 1.0


def test_room_with_a_deadlock_choice():
    # ######
    # #_X_O#   the box sits against the top wall, so it can only slide along row 1.
    # #_P__#
    # ######
    # Only way: left, up (player to the cell left of the box), right, right (two pushes): d = 4.
    # From the start at h = 4:
    #   left  -> d' = 3, value gamma**3 = 0.857375 (3 + 1 <= 4)
    #   up    -> pushes the box into the wall, state unchanged (d' = 4): needs 5 turns -> 0
    #   down  -> wall, d' = 4 -> 0
    #   right -> player at (2,3); going up and pushing left would wedge the box in the top-left
    #            corner, so the best is back left three cells then up... d' = 5 -> needs 6 -> 0
    # At h = 5: up and down become gamma**4 = 0.81450625; at h = 6 right becomes gamma**5.
    env = env_at(["######", "#_X_O#", "#_P__#", "######"])
    assert env.shortest_solution_length() == 4
    assert env.action_values(4) == pytest.approx({"left": 0.857375, "up": 0.0, "down": 0.0, "right": 0.0}, abs=1e-12)
    assert env.optimal_actions(4) == ["left"]
    assert env.action_values(5) == pytest.approx(
        {"left": 0.857375, "up": 0.81450625, "down": 0.81450625, "right": 0.0}, abs=1e-12
    )
    assert env.action_values(6)["right"] == pytest.approx(0.7737809375, abs=1e-12)
    assert env.action_values(3) == dict.fromkeys(ACTIONS, 0.0)  # d = 4 > 3: nothing can succeed
    assert env.optimal_actions(3) == list(ACTIONS)
    assert env.success_probability(3) == 0.0 and env.success_probability(4) == 1.0
    assert solve(Room.from_rows(["######", "#_X_O#", "#_P__#", "######"])) == ["left", "up", "right", "right"]
    # Wedge the box: right, up, left pushes it into the top-left corner -> unsolvable.
    for a in ("right", "up", "left"):
        env.step(a)
    assert env.render() == "######\n#XP_O#\n#____#\n######"
    assert env.shortest_solution_length() is None
    assert env.action_values(15) == dict.fromkeys(ACTIONS, 0.0) and env.success_probability(15) == 0.0
    assert solve(Room.from_rows(env.render().splitlines())) is None


def test_two_box_room():
    # #######
    # #PX_O_#   box A at (1,2) -> target (1,4); box B at (2,2) -> target (2,4); row 3 is wall,
    # #_X_O_#   so each box needs two pushes to the right from the cell on its left.
    # #######
    # A first: right, right (player at (1,3)); walk (1,2), (1,1), (2,1) (3 moves; (2,2) holds B);
    # right, right: 2 + 3 + 2 = 7. B first costs 1 + 2 + 3 + 2 = 8, interleaving costs 8: d = 7.
    # At h = 7 only "right" fits: gamma**6. up/left hit walls (d' = 7, needs 8 turns) and down
    # leads to d' = 7 as well (B first then back to (1,1): 2 + 3 + 2), so they are worth 0 at h = 7
    # and gamma**7 at h = 8.
    rows = ("#######", "#PX_O_#", "#_X_O_#", "#######")
    env = env_at(rows)
    assert env.shortest_solution_length() == 7 == ref_distance(ref_graph(rows), rows)
    assert env.action_values(7) == pytest.approx({"up": 0.0, "down": 0.0, "left": 0.0, "right": 0.95**6}, abs=1e-12)
    assert env.action_values(8) == pytest.approx(
        {"up": 0.95**7, "down": 0.95**7, "left": 0.95**7, "right": 0.95**6}, abs=1e-12
    )
    assert solve(Room.from_rows(rows)) == ["right", "right", "left", "left", "down", "right", "right"]


# -- Q* identities -------------------------------------------------------------------------------


def _states_of(rows) -> list[tuple[str, ...]]:
    return [s for s in ref_graph(tuple(rows))]


def test_value_identity_and_reference_dp_on_every_reachable_state():
    # V_h(s) = max_a Q_h(s, a) = gamma**(d - 1) when 1 <= d <= h, else 0; and Q_h equals the slow
    # finite-horizon DP over the reference rules, for every state reachable from the start.
    rooms = [task.payload["room"] for task in make("sokoban").tasks("test", 4)]
    rooms.append(["######", "#_X_O#", "#_P__#", "######"])
    rooms.append(list(make("sokoban", dim_room=6, num_boxes=2).tasks("train", 1)[0].payload["room"]))
    horizon = 20
    for rows in rooms:
        graph = ref_graph(tuple(rows))
        q = ref_q(graph, horizon)
        for state in graph:
            if ref_solved(state):
                continue
            env = env_at(state)
            d = env.shortest_solution_length()
            assert d == ref_distance(graph, state)
            for h in range(0, horizon + 1):
                values = env.action_values(h)
                assert values == pytest.approx(q[h][state], abs=1e-12)
                expected = GAMMA ** (d - 1) if d is not None and d <= h else 0.0
                assert max(values.values()) == pytest.approx(expected, abs=1e-12)
                assert env.success_probability(h) == (1.0 if d is not None and d <= h else 0.0)


def test_following_optimal_actions_solves_in_exactly_d_steps():
    rng = random.Random(7)
    for env, task in generated_tasks():
        env.reset(task, 0)
        d = env.shortest_solution_length()
        for t in range(d):
            remaining = d - t  # the tightest budget that still allows success
            best = env.optimal_actions(remaining)
            assert env.action_values(remaining)[best[0]] == pytest.approx(GAMMA ** (d - t - 1), abs=1e-12)
            r = env.step(rng.choice(best))
            assert env.shortest_solution_length() == d - t - 1
            assert r.done == (t == d - 1)
        assert r.success


def test_distance_table_is_cached_and_capped():
    room = Room.from_rows(["#######", "#P____#", "#_XX__#", "#__OO_#", "#_____#", "#######"])
    assert distance_table(room.layout) is distance_table(Room.from_rows(room.rows()).layout)
    with pytest.raises(SolverLimitError):
        distance_table(room.layout, 10)


def test_task_round_trip_through_the_payload():
    task = make("sokoban").tasks("train", 1)[0]
    clone = Task(task.task_id, {"room": list(task.payload["room"])})
    a, b = env_at(task.payload["room"]), make("sokoban")
    assert b.reset(clone, 123) == a.render()
    assert SokobanEnv.task_from_room(task.payload["room"]) == task
    assert json.loads(json.dumps(task.payload)) == task.payload


def test_texts_carry_the_legend_and_the_format():
    env = make("sokoban")
    text = env.prompt_text().instruction
    for symbol in ("#", "_", "O", "X", "√", "P", "S"):
        assert symbol in text
    assert "<action>" in env.prompt_text().action_format and all(a in env.prompt_text().action_format for a in ACTIONS)


def test_reset_refuses_a_bad_payload():
    env = make("sokoban")
    for payload in ({}, {"room": "#PXO#"}, {"room": ["#PX_#"]}):
        with pytest.raises(ValueError):
            env.reset(Task("bad", payload), 0)


@pytest.mark.parametrize("config", [{}, {"dim_room": 7, "num_boxes": 2}])
def test_public_environment_checker_passes(config):
    from arlkit.envs.checker import check_env

    report = check_env("sokoban", n_tasks=5, **config)
    assert not report.problems and report.checks
