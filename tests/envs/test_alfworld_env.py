"""The ALFWorld environment on ALFWorld's own TextWorld engine: ARLArena's observation and action
conventions, the planner oracle, state replay through the game pool, a real-layout download, and
the whole stack through `arlkit eval`. (The checker runs in tests/envs/test_checker.py, a missing
package in tests/cli/test_cli_benchmarks.py; the shipped games are checked in tests/envs/test_alfworld_data.py.)"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("alfworld")

from arlkit.config import ConfigError  # noqa: E402
from arlkit.envs import make  # noqa: E402
from arlkit.envs.alfworld import backend  # noqa: E402
from arlkit.envs.alfworld import env as env_module  # noqa: E402
from arlkit.envs.alfworld.env import GAMMA, AlfworldEnv  # noqa: E402
from arlkit.envs.capabilities import action_quality  # noqa: E402
from arlkit.policies import make_policy  # noqa: E402
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "alfworld"


@pytest.fixture(scope="module")
def env() -> AlfworldEnv:
    return make("alfworld")  # type: ignore[return-value]


def test_observations_list_admissible_commands_without_help_and_the_task(env: AlfworldEnv) -> None:
    task = env.tasks("test", 1)[0]
    first = env.reset(task, 0)
    assert first.startswith("-= Welcome to TextWorld, ALFRED! =-") and "Your task is to: " in first
    admissible = env.admissible_actions()
    assert "help" not in admissible and "look" in admissible and "help" in env.view.admissible
    assert all(f"'{c}'" in first for c in admissible) and "'help'" not in first
    assert "Your task is to: " + task.payload["game"]["task"] in env.prompt_text().instruction
    assert env.t_max == 50


def test_invalid_and_non_admissible_actions_change_nothing(env: AlfworldEnv) -> None:
    env.reset(env.tasks("test", 1)[0], 0)
    key, observation = env.state_key(), env.render()
    for action in ("help", "take unicorn 1 from cabinet 1", "go to the moon", "", "\x00"):
        result = env.step(action)
        assert not result.valid and result.reward == 0.0 and not result.done and "Invalid action" in result.observation
        assert env.state_key() == key and env.render() == observation
    parsed = env.parse_action("<think>x</think><action>  LOOK  </action>")
    assert parsed.action == "look" and parsed.strict_format  # lower-cased, ARLArena's strict format
    assert not env.parse_action("<action>look</action>").strict_format
    assert env.parse_action("<action>look</action><action>look</action>").action is None
    assert env.step("LOOK").valid and env.commands == ("look",)


def test_the_walkthrough_wins_with_reward_ten_and_then_the_episode_is_over(env: AlfworldEnv) -> None:
    task = env.tasks("test", 2)[1]
    env.reset(task, 0)
    walkthrough = task.payload["game"]["walkthrough"]
    assert env.shortest_solution_length() == len(walkthrough)
    rewards = [env.step(command.upper()).reward for command in walkthrough]
    assert rewards == [0.0] * (len(walkthrough) - 1) + [10.0] and env.view.won
    after = env.step("look")
    assert after.done and not after.valid and not after.success
    assert env.success_probability(1) == 1.0 and env.plan() == ()


def test_off_the_walkthrough_the_planner_replans_and_its_plan_wins(env: AlfworldEnv) -> None:
    task = env.tasks("train", 3)[2]
    env.reset(task, 0)
    walkthrough = tuple(task.payload["game"]["walkthrough"])
    detour = next(c for c in env.admissible_actions() if c.startswith("go to") and c != walkthrough[0])
    env.step(detour)
    plan = env.plan()
    assert plan is not None and len(walkthrough) - 1 <= len(plan) <= len(walkthrough)  # one "go to" from the path
    assert env.success_probability(len(plan)) == 1.0 and env.success_probability(len(plan) - 1) == 0.0
    for command in plan:
        result = env.step(command)
    assert result.success and env.plan() == ()


def test_putting_the_object_back_costs_one_more_step_and_step_quality_restores(env: AlfworldEnv) -> None:
    task = next(t for t in env.tasks("test", 120) if t.payload["game"]["task_type"] == "pick_and_place_simple")
    env.reset(task, 0)
    walkthrough = task.payload["game"]["walkthrough"]
    d = len(walkthrough)
    best = env.optimal_actions(d)[0]
    assert best == walkthrough[0] and env.action_values(d) == {best: pytest.approx(GAMMA ** (d - 1))}
    key = env.state_key()
    assert action_quality(env, best, d) == pytest.approx(GAMMA ** (d - 1))
    assert action_quality(env, best, d - 1) == 0.0  # the shortest solution no longer fits
    assert action_quality(env, "inventory", d + 1) == pytest.approx(GAMMA**d)  # a wasted turn
    assert action_quality(env, "take unicorn", d) == 0.0 and env.state_key() == key
    take = next(i for i, c in enumerate(walkthrough) if c.startswith("take "))
    for command in walkthrough[: take + 1]:
        env.step(command)
    held, place = walkthrough[take].removeprefix("take ").split(" from ")
    left = env.shortest_solution_length()
    assert left == d - take - 1
    assert env.step(f"move {held} to {place}").valid and env.shortest_solution_length() == left + 1  # take it again


def test_games_handed_to_other_environments_come_back_by_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env_module, "POOL", backend.BackendPool(capacity=1))
    a, b = make("alfworld", max_games=1), make("alfworld", max_games=1)
    task = a.tasks("test", 1)[0]
    a.reset(task, 0)
    b.reset(task, 0)
    walk = task.payload["game"]["walkthrough"]
    plans = [list(walk), ["inventory", *walk]]  # the same game, two histories
    results = []
    for i in range(3):  # interleaved on one game in memory: every step replays the other's commands
        for env, plan in zip((a, b), plans):
            results.append(env.step(plan[i]))
    for env, plan in zip((a, b), plans):
        results += [env.step(command) for command in plan[3:]]
    assert a.view.won and b.view.won and all(r.valid for r in results) and env_module.POOL.size == 1
    assert b.commands == tuple(plans[1]) and a.commands == tuple(walk)
    saved = a.snapshot()
    a.reset(task, 0)
    assert not a.view.won
    a.restore(saved)
    assert a.view.won and a.step("look").done


def test_a_download_in_alfworlds_layout_loads_unchanged() -> None:
    real = make("alfworld", data_dir=str(SAMPLE))
    (test,) = real.tasks("test", 1)  # valid_seen: the unsolvable and the movable-receptacle game are skipped
    with pytest.raises(ValueError, match="only 1 test ALFWorld games"):
        real.tasks("test", 2)
    assert real.tasks("train", 1)[0].task_id != test.task_id
    assert make("alfworld", data_dir=str(SAMPLE / "json_2.1.1")).tasks("test", 1) == [test]
    document = json.loads(Path(test.payload["game_file"]).read_text())
    first = real.reset(test, 0)
    assert "Your task is to: cool some apple and put it in countertop." in first
    assert "cool some apple and put it in countertop" in real.prompt_text().instruction
    assert real.shortest_solution_length() == len(document["walkthrough"])  # planned afresh, same length
    for command in real.plan() or ():
        result = real.step(command)
    assert result.success and result.reward == 10.0
    with pytest.raises(ValueError, match="no ALFWorld split folder"):
        make("alfworld", data_dir=str(SAMPLE), eval_split="valid_unseen").tasks("test", 1)


def test_hidden_budgets_and_the_random_policy_through_the_engine(env: AlfworldEnv) -> None:
    tasks = env.tasks("test", 4)
    lengths = [len(t.payload["game"]["walkthrough"]) for t in tasks]
    budget = min(lengths)
    played = run_rollouts(lambda: make("alfworld"), make_jobs(tasks, 1, budget, seed=1), make_policy("oracle"),
                          PromptConfig(budget_mode="hidden", history=2))  # fmt: skip
    assert [t.success for t in played] == [n <= budget for n in lengths] and any(n > budget for n in lengths)
    played = run_rollouts(lambda: make("alfworld"), make_jobs(tasks[:2], 1, 3, seed=1), make_policy("random"),
                          PromptConfig(history=2))  # fmt: skip
    assert all(len(t.turns) == 3 and all(turn.valid for turn in t.turns) for t in played)


def test_arlkit_eval_oracle_meets_the_structural_bound(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "ev"
    done = run_child([sys.executable, "-m", "arlkit", "eval", "--out", str(out), "--env", "alfworld", "--policy",
                      "oracle", "--tasks", "4", "--samples", "1", "--budgets", "5,full", "--history", "2"],
                     capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {r["T"]: r for r in csv.DictReader(open(out / "passkt.csv")) if r["k"] == "1"}
    assert float(rows["50"]["pass"]) == float(rows["50"]["expected_optimum"]) == 1.0
    assert float(rows["5"]["pass"]) == float(rows["5"]["expected_optimum"]) < 1.0  # the bound binds at 5 turns


def test_modules_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "_MODULES", {})
    monkeypatch.setitem(sys.modules, "textworld", None)  # importing it now raises ImportError
    checkout = re.escape(str(Path(__file__).resolve().parents[2]))  # arlkit is installed from this checkout
    with pytest.raises(ConfigError, match=rf"pip install -e '{checkout}\[alfworld\]' or `make install-extras` there"):
        backend.modules()
