"""skyrl-gym both ways: its ``text2sql`` and ``gsm8k_multi_turn`` environments evaluated by ``arlkit eval``
with announced budgets (the budget is their ``max_turns``; an end by the turn limit is no success, its
partial reward kept; every environment closed), the bridge's one-line errors, and arlkit environments
made by ``skyrl_gym.make`` and played in SkyRL's generator loop from rows ``skyrl_dataset`` writes."""

from __future__ import annotations

import copy
import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas
import pytest
import skyrl_gym
from omegaconf import DictConfig

import arlkit.integrations.skyrl_gym as bridge
from arlkit.envs import make
from arlkit.envs.bridge import TRUNCATED_NOTE
from arlkit.integrations.episode import ArlkitEpisode

HERE = Path(__file__).parent
FIXTURES = "arlkit_skyrl_fixtures"


@pytest.fixture(scope="module")
def fx() -> ModuleType:
    """``arlkit_skyrl_fixtures.py``, imported under its own name so ``id=arlkit_skyrl_fixtures:ID`` finds it."""
    if FIXTURES not in sys.modules:
        spec = importlib.util.spec_from_file_location(FIXTURES, HERE / f"{FIXTURES}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[FIXTURES] = module
        spec.loader.exec_module(module)
    return sys.modules[FIXTURES]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _arlkit(run_child, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    return run_child([sys.executable, "-m", "arlkit", *args], capture_output=True, text=True, env=env)


def _trajectories(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]


@pytest.fixture
def sql(fx: ModuleType, tmp_path: Path) -> tuple[Path, str]:
    """``text2sql`` rows and the ``env_config`` pointing at their sqlite database."""
    root = fx.make_sql_db(tmp_path / "sql")
    return _jsonl(tmp_path / "sql.jsonl", fx.sql_rows()), json.dumps({"db_path": str(root)})


def test_text2sql_passkt_with_announced_budgets_and_whole_replies(  # type: ignore[no-untyped-def]
        sql: tuple[Path, str], tmp_path: Path, run_child) -> None:
    data, env_config = sql
    out = tmp_path / "run"
    done = _arlkit(run_child, "eval", "--env", "skyrl-gym", "--env-arg", f"data={data}", "--env-arg", "id=text2sql",
                   "--env-arg", f"env_config={env_config}", "--policy", f"{FIXTURES}:sql_policy",
                   "--tasks", "3", "--samples", "4", "--budgets", "1,2,4", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    cells = {(int(r["T"]), int(r["k"])): float(r["pass"]) for r in csv.DictReader((out / "passkt.csv").open())}
    assert set(cells) == {(t, k) for t in (1, 2, 4) for k in (1, 2, 4)}
    assert 0 < cells[(4, 1)] < 1 and cells[(1, 1)] < cells[(4, 1)] <= cells[(4, 4)]
    rows = _trajectories(out)
    assert len(rows) == 3 * 4 * 3
    for row in rows:
        last = row["turns"][-1]
        assert len(row["turns"]) <= row["budget"]
        if row["success"]:  # the whole reply reached text2sql: its <think> earns the reward, not -1
            assert last["reward"] == 1.0 and "<solution>" in last["reply"]
        elif "<solution>" not in last["reply"]:  # still exploring at the limit: truncated
            assert len(row["turns"]) == row["budget"] and last["observation"].endswith(TRUNCATED_NOTE)
    # the announced budget is text2sql's max_turns: its reminder counts the same turns as arlkit
    explored = [r for r in rows if r["budget"] == 4 and len(r["turns"]) > 1]
    assert explored and all("You have 3 turns left" in r["turns"][0]["observation"] for r in explored)
    assert "T_max = 5" in (out / "summary.md").read_text()  # text2sql's own max_turns


def test_turn_limit_keeps_partial_reward_without_success_and_closes_every_env(  # type: ignore[no-untyped-def]
        fx: ModuleType, tmp_path: Path, run_child) -> None:
    data = _jsonl(tmp_path / "gsm.jsonl", fx.gsm8k_rows(2))
    log, out = tmp_path / "made-closed.log", tmp_path / "run"
    done = _arlkit(run_child, "eval", "--env", "skyrl-gym", "--env-arg", f"data={data}",
                   "--env-arg", f"id={FIXTURES}:counting-gsm8k", "--env-arg", f"env_config={json.dumps({'log': str(log)})}",
                   "--policy", f"{FIXTURES}:gsm8k_policy:last-right", "--tasks", "2", "--samples", "4",
                   "--budgets", "1,3", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = _trajectories(out)
    limited = [r for r in rows if not r["success"]]
    solved = [r for r in rows if r["success"]]
    assert limited and solved
    for row in limited:  # wrong answers to the end: gsm8k_multi_turn's format score, never a success
        assert len(row["turns"]) == row["budget"] and row["ended_by"] == "terminal"
        assert row["return"] == pytest.approx(0.2) and row["turns"][-1]["observation"].endswith(TRUNCATED_NOTE)
    for row in solved:  # the right answer on the last announced turn is the environment's own end
        assert len(row["turns"]) == row["budget"] and row["turns"][-1]["reward"] == 1.0
    lines = [line.split() for line in log.read_text().splitlines()]
    made = {(pid, obj) for what, pid, obj in lines if what == "made"}
    closed = [(pid, obj) for what, pid, obj in lines if what == "closed"]
    assert len(made) >= len(rows) and sorted(closed) == sorted(made)  # each one closed, once


def test_success_rule_at_the_limit_probe_and_truncate(fx: ModuleType, tmp_path: Path) -> None:
    data = str(_jsonl(tmp_path / "gsm.jsonl", fx.gsm8k_rows(1)))
    for at_limit, right_counts in (("probe", True), ("truncate", False)):
        env = make("skyrl-gym", data=data, id="gsm8k_multi_turn", at_limit=at_limit)
        task = env.tasks("test", 1)[0]
        env.set_budget(2)
        env.reset(task, 0)
        assert env._env.max_turns == 2  # the announced budget
        first = env.step("#### 7")
        assert not first.done and first.reward == pytest.approx(0.1)
        last = env.step("#### 42")  # right, on the last turn
        assert last.done and last.success is right_counts and last.reward == 1.0
        env.reset(task, 0)
        env.step("#### 7")
        snapshot, key = env.snapshot(), env.state_key()
        wrong = env.step("#### 7")
        env.restore(snapshot)  # made again, the replies replayed
        assert env.state_key() == key and env._env.turns == 1 and env.step("#### 7") == wrong
        assert wrong.done and not wrong.success and wrong.reward == pytest.approx(0.1)
        assert wrong.observation.endswith(TRUNCATED_NOTE)
        env.close()
        assert env.closed


def test_without_data_the_example_rows_serve_both_splits() -> None:
    env = make("skyrl-gym")
    test, train = env.tasks("test", 20), env.tasks("train", 40)
    assert env.t_max == 5 and not {t.task_id for t in test} & {t.task_id for t in train}
    assert "Anna has 3 apples" in env.reset(test[0], 0) and env.step("#### 13").success
    env.close()


def test_foreign_exceptions_are_invalid_steps_and_error_observations(fx: ModuleType, tmp_path: Path) -> None:
    rows = [{"prompt": [{"role": "user", "content": "go"}], "env_class": "raising"},
            {"prompt": [{"role": "user", "content": "go"}], "env_class": "raising", "fail": "init"}]
    env = make("skyrl-gym", data=str(_jsonl(tmp_path / "r.jsonl", rows)), id=f"{FIXTURES}:raising")
    good, bad = env.tasks("test", 2)
    env.reset(good, 0)
    result = env.step("<think>x</think><action>boom</action>")
    assert not result.valid and not result.done and "the environment raised KeyError: 'boom'" in result.observation
    assert env.step("fine").valid
    first = env.reset(bad, 0)
    assert first == "The environment could not start: RuntimeError: no sandbox for this task"
    ended = env.step("anything")
    assert ended.done and not ended.success
    action_only = make("skyrl-gym", data=str(tmp_path / "r.jsonl"), id=f"{FIXTURES}:raising", action_text="action")
    assert action_only.parse_action("<think>x</think><action>fine</action>").action == "fine"
    assert env.parse_action("<think>x</think><action>fine</action>").action.startswith("<think>")


def test_rows_from_parquet_are_the_same_tasks(sql: tuple[Path, str], tmp_path: Path) -> None:
    data, env_config = sql
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    parquet = tmp_path / "sql.parquet"
    pandas.DataFrame(rows).to_parquet(parquet)
    from_jsonl = make("skyrl-gym", data=str(data), env_config=env_config)  # ids from each row's env_class
    from_parquet = make("skyrl-gym", data=str(parquet), env_config=env_config)
    assert from_parquet.tasks("test", 3) == from_jsonl.tasks("test", 3) and from_parquet.t_max == 5
    assert from_parquet.reset(from_parquet.tasks("test", 3)[1], 0) == "List the names of users older than 30."
    assert from_parquet.prompt_text().instruction.startswith("Answer the question with one SQL query")
    from_parquet.close()
    with pytest.raises(ValueError, match="unknown split 'train'; valid choices: test"):
        from_jsonl.tasks("train", 1)


@pytest.mark.parametrize(("args", "expected"), [
    (["id=text2sq"], "unknown skyrl-gym environment 'text2sq'. Did you mean text2sql?"),
    (["id=text2sql"], "cannot make the skyrl-gym environment 'text2sql'"),  # no db_path in env_config
    (["id=text2sql", "at_limit=never"], "unknown at_limit 'never'; valid choices: probe, truncate"),
    (["id=no_such_module:text2sql"], "cannot import no_such_module"),
    (["data=no/such/rows.jsonl"], "data file not found: no/such/rows.jsonl"),
])
def test_bad_input_is_one_line_exit_2(  # type: ignore[no-untyped-def]
        sql: tuple[Path, str], tmp_path: Path, args: list[str], expected: str, run_child) -> None:
    given = args if args[0].startswith("data=") else [f"data={sql[0]}", *args]
    env_args = [x for a in given for x in ("--env-arg", a)]
    done = _arlkit(run_child, "eval", "--env", "skyrl-gym", *env_args, "--policy", f"{FIXTURES}:sql_policy", "--tasks", "1",
                   "--samples", "1", "--budgets", "1", "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and expected in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_missing_package_names_the_extra(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    code = ("import sys; sys.modules['skyrl_gym'] = None\nfrom arlkit.cli import main\n"
            f"sys.exit(main(['eval', '--env', 'skyrl-gym', '--env-arg', 'data=x.jsonl', '--out', {str(tmp_path)!r}]))")
    done = run_child([sys.executable, "-c", code], capture_output=True, text=True)
    hint = f"needs skyrl-gym: pip install -e '{Path(__file__).resolve().parents[2]}[skyrl]'"  # this checkout
    assert done.returncode == 2 and hint in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def _generator_loop(row: dict[str, Any], replies: Any, max_turns: int = 20) -> dict[str, Any]:
    """One trajectory as SkyRL's generator plays it: make the row's env_class with the row's other keys
    as extras (plus the generator's max_turns), init on the prompt, step until done, metrics, close."""
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    extras["max_turns"] = max_turns
    env = skyrl_gym.make(row["env_class"], env_config=DictConfig({}), extras=extras)
    chat, _ = env.init(copy.deepcopy(row["prompt"]))
    steps, done = [], False
    while not done:
        out = env.step(replies(env, chat))
        steps.append(out)
        chat += [{"role": "assistant", "content": "..."}, *out["observations"]]
        done = out["done"]
    metrics = env.get_metrics()
    env.close()
    env.close()
    return {"chat": chat, "steps": steps, "metrics": metrics, "env": env}


def test_arlkit_envs_in_skyrl_gyms_registry_and_generator_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"arlkit-frozenlake", "arlkit-sokoban", "arlkit-sql"} <= set(skyrl_gym.registry)
    plain = skyrl_gym.make("arlkit-sokoban")  # no row: a task drawn from the test split, T_max as the budget
    assert plain.init([])[0][0]["role"] == "system" and plain.max_turns == make("sokoban").t_max
    plain.close()
    closes: list[int] = []
    original_close = ArlkitEpisode.close
    monkeypatch.setattr(ArlkitEpisode, "close", lambda self: (closes.append(id(self)), original_close(self)))
    path = tmp_path / "rows.parquet"
    bridge.skyrl_dataset("frozenlake", split="train", n=6, budget=[2, 8], path=path, size=3, slippery=False)
    closes.clear()
    rows = pandas.read_parquet(path).to_dict(orient="records")  # as SkyRL's dataset reads a parquet file
    assert len(rows) == 6 and {int(r["extra_info"]["budget"]) for r in rows} == {2, 8}
    assert {r["env_class"] for r in rows} == {"arlkit-frozenlake"}
    oracle = make("frozenlake", size=3, slippery=False)
    tasks = {t.task_id: t for t in oracle.tasks("train", 6)}
    episodes = []
    for row in rows:
        info = row["extra_info"]
        budget = int(info["budget"])
        assert f"Turn budget: {budget} turns" in row["prompt"][0]["content"]
        oracle.reset(tasks[info["task_id"]], 0)
        need = oracle.shortest_solution_length()

        def replies(env: Any, chat: list[dict[str, str]]) -> str:
            move = oracle.optimal_actions(budget - env.turns)[0]
            oracle.step(move)
            return f"<think>plan</think><action>{move}</action>"

        played = _generator_loop(dict(row, prompt=list(row["prompt"])), replies)
        env, steps = played["env"], played["steps"]
        episodes.append(id(env.episode))
        assert played["chat"][0]["content"] == row["prompt"][0]["content"] and env.max_turns == budget
        assert len(steps) <= budget and all(s["metadata"]["valid"] for s in steps)
        if len(steps) > 1:
            counter = f"[Turns: 1 completed, {budget - 1} remaining of {budget}]"
            assert steps[0]["observations"][0]["content"].endswith(counter)
        solved = need is not None and need <= budget  # the oracle solves exactly these within the budget
        assert steps[-1]["metadata"]["success"] is solved and played["metrics"]["success"] == float(solved)
        assert steps[-1]["reward"] > 0 if solved else steps[-1]["metadata"]["truncated"] or steps[-1]["reward"] <= 0
    assert sorted(closes) == sorted(episodes)  # each closed once, though the loop closes twice
