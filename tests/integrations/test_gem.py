"""GEM both ways (``arlkit.integrations.gem``), against the real ``gem-llm`` package: GEM's games under
``arlkit eval`` (Pass@(K,T) with announced budgets, a game ended by its own turn limit is no success,
every environment closed), the bridge's rules in process, arlkit's environments driven by GEM's
``make``, wrappers and vector environment, and the one-line errors."""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import arlkit.integrations.gem as arlkit_gem
import gem
from arlkit.envs import make
from arlkit.envs.bridge import TRUNCATED_NOTE
from arlkit.envs.protocol import Task
from gem.envs.registration import ENV_REGISTRY
from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gem_fixtures  # noqa: E402 - registers the test games in GEM's registry

GUESS = "game:GuessTheNumber-v0-hard"


def _eval(  # type: ignore[no-untyped-def]
        run_child, out: Path, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    if log is not None:
        env[gem_fixtures.LOG_ENV] = str(log)
    return run_child([sys.executable, "-m", "arlkit", "eval", "--env", "gem", *args, "--bootstrap", "100",
                      "--out", str(out)], capture_output=True, text=True, env=env)


def _trajectories(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]


def test_guess_the_number_under_arlkit_eval_with_announced_budgets(  # type: ignore[no-untyped-def]
        tmp_path: Path, run_child) -> None:
    done = _eval(run_child, tmp_path / "ev", "--env-arg", f"id={GUESS}", "--policy", "gem_fixtures:bisect",
                 "--tasks", "8", "--samples", "4", "--budgets", "2,4,full")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "ev" / "passkt.csv")))
    cells = {(int(r["T"]), int(r["k"])): float(r["pass"]) for r in rows}
    assert set(cells) == {(t, k) for t in (2, 4, 7) for k in (1, 2, 4)}
    assert cells[(2, 1)] < cells[(4, 1)] < cells[(7, 1)] and cells[(7, 1)] <= cells[(7, 4)]
    trajectories = _trajectories(tmp_path / "ev")
    assert len(trajectories) == 8 * 4 * 3
    # The announced budget is the game's turn limit: at T=2 GEM ends the game itself, after turn 2,
    # terminated and truncated, with a partial reward for the last guess's distance: no success.
    limited = [t for t in trajectories if t["turns"][-1]["observation"].endswith(TRUNCATED_NOTE)]
    assert limited and all(not t["success"] and t["ended_by"] == "terminal" for t in limited)
    assert any(t["turns"][-1]["reward"] > 0.5 for t in limited)  # the partial reward is kept
    assert {len(t["turns"]) for t in limited if t["budget"] == 2} == {2}
    assert all(t["turns"][-1]["reward"] == 1.0 and "Congratulations" in t["turns"][-1]["observation"]
               for t in trajectories if t["success"])


def test_a_game_ended_by_its_own_limit_is_no_success_and_every_env_is_closed(  # type: ignore[no-untyped-def]
        tmp_path: Path, run_child) -> None:
    log = tmp_path / "log.txt"
    done = _eval(run_child, tmp_path / "ev", "--env-arg", "id=arlkit-test:Milestones-v0",
                 "--env-arg", "module=gem_fixtures", "--policy", "gem_fixtures:stubborn", "--tasks", "3", "--samples", "2",
                 "--budgets", "full", log=log)
    assert done.returncode == 0, done.stderr[-2000:]
    trajectories = _trajectories(tmp_path / "ev")
    assert len(trajectories) == 6
    for trajectory in trajectories:  # terminated and truncated at the game's limit, reward 0.25
        last = trajectory["turns"][-1]
        assert not trajectory["success"] and last["reward"] == 0.25 and last["observation"].endswith(TRUNCATED_NOTE)
    assert all(float(r["pass"]) == 0.0 for r in csv.DictReader(open(tmp_path / "ev" / "passkt.csv")))
    events = log.read_text().split()
    assert events.count("closed") == events.count("made") >= 6


def test_success_needs_the_whole_return_and_no_truncation() -> None:
    env = make("gem", id="arlkit-test:Milestones-v0")
    task = env.tasks("test", 1)[0]

    def play(*moves: str) -> list:
        env.reset(task, 0)
        return [env.step(f"<think>t</think><action>\\boxed{{{m}}}</action>") for m in moves]

    solved = play("go", "go")
    assert solved[-1].done and solved[-1].success and env.episode_return == 1.0
    assert solved[0].observation == "Turn 1.\nMoves so far: 1."  # GEM's suffix follows the observation
    stopped = play("go", "stop")  # terminated, not truncated, a positive reward, but a return of 0.75: a failure
    assert stopped[-1].done and stopped[-1].reward > 0 and not stopped[-1].success and env.episode_return == 0.75
    limited = play("x", "x", "x")
    assert limited[-1].done and not limited[-1].success and limited[-1].reward == 0.25
    assert limited[-1].observation.endswith(TRUNCATED_NOTE)
    broke = play("boom")[0]
    assert not broke.valid and not broke.done and "the environment raised RuntimeError: the game broke" in broke.observation
    assert play("go", "go")[-1].success  # the bridge goes on after the exception
    env.close()
    assert env.closed and gem_fixtures.COUNTS["closed"] >= 1


def test_the_announced_budget_becomes_the_games_turn_limit() -> None:
    env = make("gem", id=GUESS)
    assert env.t_max == 7
    task = env.tasks("test", 1)[0]
    env.set_budget(3)
    env.reset(task, 0)
    assert "within 3 turns" in env.prompt_text().instruction
    results = [env.step("<action>\\boxed{50}</action>" if i == 0 else f"\\boxed{{{i}}}") for i in range(3)]
    assert results[-1].done and results[-1].observation.endswith(TRUNCATED_NOTE) and not results[-1].success
    env.set_budget(None)  # hidden: the game keeps its own limit
    env.reset(task, 0)
    assert "within 7 turns" in env.prompt_text().instruction
    fixed = make("gem", id=GUESS, set_max_turns=False)
    fixed.set_budget(3)
    fixed.reset(task, 0)
    assert "within 7 turns" in fixed.prompt_text().instruction
    assert make("gem", id=GUESS, kwargs='{"max_turns": 5}').t_max == 5
    assert make("gem", id=GUESS, t_max=9).t_max == 9


def test_whole_reply_by_default_action_content_by_option() -> None:
    reply = "<think>maybe \\boxed{7}</think><action>\\boxed{9}</action>"
    assert make("gem", id=GUESS).parse_action(reply).action == reply
    assert make("gem", id=GUESS, action_text="action").parse_action(reply).action == "\\boxed{9}"
    assert not make("gem", id=GUESS).parse_action("   ").action


def test_games_replay_the_same_and_leave_the_callers_generators_alone() -> None:
    moves = ["\\boxed{left}", "\\boxed{up}", "\\boxed{right}", "\\boxed{down}"] * 3
    task = Task("2048#seed5", {"seed": 5})
    alone = make("gem", id="game:Game2048-v0-easy")
    alone.reset(task, 0)
    expected = [alone.step(m).observation for m in moves]
    one, two = make("gem", id="game:Game2048-v0-easy"), make("gem", id="game:Game2048-v0-easy")
    random.seed(123)
    np.random.seed(123)
    one.reset(task, 0)
    two.reset(task, 0)
    seen = []
    for move in moves:  # interleaved: each game draws its tiles from its own generators
        seen.append(one.step(move).observation)
        two.step(move)
    assert seen == expected and two.render() == one.render()
    after = random.random(), np.random.random()
    random.seed(123)
    np.random.seed(123)
    assert after == (random.random(), np.random.random())
    key = one.state_key()
    one.restore(one.snapshot())
    assert one.state_key() == key and one.render() == seen[-1]


def test_arlkit_envs_through_gems_make_wrappers_and_vector_env() -> None:
    assert {"arlkit:frozenlake", "arlkit:sokoban", "arlkit:sql"} <= set(ENV_REGISTRY)
    assert "arlkit:gem" not in ENV_REGISTRY
    single = gem.make("arlkit:frozenlake", size=4, slippery=False, budget=2)
    assert isinstance(single, arlkit_gem.ArlkitGemEnv) and isinstance(single, gem.Env)
    observation, info = single.reset(seed=0)
    assert observation.startswith(info["system_prompt"]) and "Turn budget: 2" in observation
    assert single.reset(seed=0)[0] == observation
    tracked = WRAPPER_FACTORY["episode_tracking"](gem.make("arlkit:sokoban", budget=3))
    tracked.reset(seed=1)
    _, _, _, _, step_info = tracked.step("<think>t</think><action>Up</action>")
    assert step_info["step_counter"] == 1 and step_info["turn"] == 1
    vec = gem.make_vec(["arlkit:frozenlake"] * 2, wrappers=[WRAPPER_FACTORY["concat_with_action"]], seed=0,
                       size=4, slippery=False, budget=2)
    first, infos = vec.reset(seed=0)
    assert all("Turn budget: 2" in o for o in first) and all(i["budget"] == 2 for i in infos)
    nowhere = ["<think>t</think><action>Nowhere</action>"] * 2
    observations, rewards, terminated, truncated, infos = vec.step(nowhere)
    assert not any(terminated) and not any(truncated) and not any(i["valid"] for i in infos)
    assert all("[Turns: 1 completed, 1 remaining of 2]" in o for o in observations)
    observations, rewards, terminated, truncated, infos = vec.step(nowhere)
    assert all(truncated) and not any(terminated)  # the announced budget is spent
    assert all(o.startswith("You are an agent") for o in observations)  # GEM reset them (same step)
    chained = gem.make("arlkit:gymnasium", id="arlkit/guess-number-v0")  # GEM -> arlkit -> Gymnasium
    chained.reset(seed=0)
    assert chained.step("<action>50</action>")[4]["valid"]
    chained.close()
    assert chained.episode.env.closed


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["id=game:GuessTheNumbr-v0-hard"], "did you mean game:GuessTheNumber-v0-hard"),
        (["id=arlkit-test:Broken-v0", "module=gem_fixtures"], "LookupError: ***** Resource words not found."),
    ],
)
def test_bad_gem_input_is_one_line_and_exit_2(  # type: ignore[no-untyped-def]
        tmp_path: Path, args: list[str], needle: str, run_child) -> None:
    done = _eval(run_child, tmp_path / "ev", *[p for a in args for p in ("--env-arg", a)],
                 "--policy", "gem_fixtures:stubborn", "--tasks", "2")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and needle in lines[0], lines


def test_bad_options_in_process_are_one_line() -> None:
    for options, needle in [({"action_text": "all"}, "valid choices: action, reply"),
                            ({"module": "no_such_module_xyz"}, "no_such_module_xyz"),
                            ({"kwargs": "[1, 2]"}, "kwargs must be a JSON object"),
                            ({"kwargs": "max_turns=3"}, "kwargs must be a JSON object")]:
        with pytest.raises(Exception, match=needle) as caught:
            make("gem", id=GUESS, **options)
        assert "\n" not in str(caught.value)
