"""The ``sql`` environment: protocol, submit semantics, oracle, snapshots, and the contract checker."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arlkit.config import ConfigError
from arlkit.envs import Oracle, make
from arlkit.envs.checker import check_env
from arlkit.envs.protocol import Env, StepResult
from arlkit.envs.sql.env import SqlEnv


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("sqlcache"))


@pytest.fixture()
def env(cache: str) -> SqlEnv:
    e = make("sql", cache_dir=cache, timeout_s=0.5)
    assert isinstance(e, SqlEnv)
    return e


def university_task(env: SqlEnv, template: str):  # type: ignore[no-untyped-def]
    for split in ("train", "test"):
        for sql_task, task in zip(
            env.task_set.split(split), env.tasks(split, len(env.task_set.split(split))), strict=True
        ):
            if sql_task.query.startswith(template):
                return task
    raise LookupError(template)


def test_registered_and_protocols(env: SqlEnv) -> None:
    assert isinstance(env, Env) and isinstance(env, Oracle)
    assert env.name == "sql" and env.t_max == 10


def test_first_observation_has_question_and_schema(env: SqlEnv) -> None:
    task = env.tasks("test", 1)[0]
    obs = env.reset(task, 0)
    assert obs.startswith("Question: " + task.payload["question"])
    assert "Database 'university'" in obs
    assert "instructor(instructor_id INTEGER PK, name TEXT, dept_id INTEGER -> department.dept_id" in obs


def test_query_then_submit_scores_the_last_result(env: SqlEnv) -> None:
    task = university_task(env, "SELECT count(*) FROM student WHERE year = 1")
    env.reset(task, 0)
    r = env.step("SELECT count(*) FROM student WHERE year = 2")
    assert r.valid and not r.done and r.reward == 0.0
    assert r.observation.startswith("count(*)\n") and r.observation.endswith("(1 row)")
    r = env.step("SELECT count(*) FROM student WHERE year = 1")
    r = env.step("submit")
    assert (r.valid, r.done, r.success, r.reward) == (True, True, True, 1.0)
    after = env.step("SELECT 1")
    assert not after.valid and after.done


def test_submit_with_query_is_one_turn(env: SqlEnv) -> None:
    task = env.tasks("test", 3)[2]
    env.reset(task, 0)
    r = env.step("submit " + task.payload["query"])
    assert r.success and r.reward == 1.0 and r.done
    assert env.shortest_solution_length() == 0


def test_wrong_answers_score_partially_or_zero(env: SqlEnv) -> None:
    task = university_task(env, "SELECT name FROM instructor WHERE hire_year > 2015 ORDER BY name")
    env.reset(task, 0)
    # Same rows in reverse order: IoU 1, every pair discordant -> tau -1 -> clipped to 0.
    r = env.step("submit SELECT name FROM instructor WHERE hire_year > 2015 ORDER BY name DESC")
    assert r.reward == 0.0 and not r.success
    env.reset(task, 0)
    # Strict superset (hire_year > 2010 adds rows): IoU = 12 / n < 1 with order kept -> reward = IoU.
    r = env.step("submit SELECT name FROM instructor WHERE hire_year > 2010 ORDER BY name")
    assert 0.0 < r.reward < 1.0 and not r.success


def test_error_and_empty_submissions_score_zero(env: SqlEnv) -> None:
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    r = env.step("submit")
    assert r.done and r.reward == 0.0 and "no query was run" in r.observation
    env.reset(task, 0)
    r = env.step("SELEC nonsense")
    assert r.valid and r.observation.startswith("Error executing query: ")
    r = env.step("submit ;")
    assert r.done and r.reward == 0.0


def test_invalid_actions_leave_the_state_unchanged(env: SqlEnv) -> None:
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    env.step("SELECT 1")
    key = env.state_key()
    for action in ("", "   ", "DELETE FROM student", "PRAGMA query_only = 0", "submit DROP TABLE student"):
        r = env.step(action)
        assert not r.valid and not r.done
        assert env.state_key() == key


def test_fenced_sql_is_accepted(env: SqlEnv) -> None:
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    r = env.step("```sql\nSELECT 2 + 2\n```")
    assert r.valid and "\n4\n" in r.observation
    r = env.step("submit\n```sql\n" + task.payload["query"] + "\n```")
    assert r.success
    env.reset(task, 0)
    env.step(task.payload["query"])
    assert env.step("Submit.").success


def test_long_results_are_shortened_for_display(env: SqlEnv) -> None:
    env.reset(env.tasks("test", 1)[0], 0)
    r = env.step("SELECT student_id FROM student")
    assert "(600 rows; showing the first 20)" in r.observation
    assert len(r.observation.splitlines()) == 1 + 20 + 1


def test_snapshot_restore_round_trip(env: SqlEnv) -> None:
    task = env.tasks("test", 2)[1]
    env.reset(task, 0)
    env.step("SELECT count(*) FROM student")
    snap, key = env.snapshot(), env.state_key()
    first = env.step("submit")
    env.restore(snap)
    assert env.state_key() == key and env.history == ("SELECT count(*) FROM student",)
    assert env.step("submit") == first
    # A snapshot restores into a fresh environment as well.
    other = make("sql", cache_dir=env.config.cache_dir, timeout_s=0.5)
    other.restore(snap)
    assert other.state_key() == key and other.step("submit") == first


def test_state_key_tracks_the_last_result(env: SqlEnv) -> None:
    env.reset(env.tasks("test", 1)[0], 0)
    k0 = env.state_key()
    env.step("SELECT 1")
    k1 = env.state_key()
    env.step("SELECT 2")
    k2 = env.state_key()
    env.step("SELECT 1")
    assert len({k0, k1, k2}) == 3 and env.state_key() == k1


def test_oracle_solves_every_task_in_one_turn(env: SqlEnv) -> None:
    for split in ("test", "train"):
        for task in env.tasks(split, len(env.task_set.split(split))):
            env.reset(task, 0)
            assert env.shortest_solution_length() == 1 and env.success_probability(1) == 1.0
            assert env.success_probability(0) == 0.0
            r = env.step(env.optimal_actions(env.t_max)[0])
            assert r.success, task.task_id


def test_oracle_values_offer_plain_submit_once_the_answer_is_on_screen(env: SqlEnv) -> None:
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    assert set(env.action_values(3)) == {"submit " + task.payload["query"]}
    env.step(task.payload["query"])
    assert env.action_values(3)["submit"] == 1.0
    assert env.action_values(0)["submit"] == 0.0


def test_task_split_sizes_and_hardness_filter(cache: str) -> None:
    env = make("sql", cache_dir=cache)
    assert len(env.tasks("test", 38)) == 38
    with pytest.raises(ValueError, match="only 38 test tasks"):
        env.tasks("test", 39)
    hard = make("sql", cache_dir=cache, hardness="hard,extra")
    assert all(t.payload["hardness"] in ("hard", "extra") for t in hard.tasks("train", 20))


@pytest.mark.parametrize(
    "override",
    [{"hardness": "impossible"}, {"timeout_s": 0}, {"max_rows": 0}, {"t_max": 0}, {"display_rows": 0}, {"nope": 1}],
)
def test_bad_config_is_refused(override: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        make("sql", **override)


def test_contract_checker_passes(cache: str) -> None:
    report = check_env("sql", n_tasks=4, cache_dir=cache, timeout_s=0.5)
    assert not report.problems


def test_spider_data_from_disk(tmp_path: Path) -> None:
    import json
    import sqlite3

    (tmp_path / "database" / "zoo").mkdir(parents=True)
    conn = sqlite3.connect(tmp_path / "database" / "zoo" / "zoo.sqlite")
    conn.executescript(
        "CREATE TABLE animal(id INTEGER PRIMARY KEY, name TEXT, legs INT);"
        "INSERT INTO animal VALUES (1, 'ant', 6), (2, 'bee', 6), (3, 'cat', 4);"
    )
    conn.commit()
    conn.close()
    (tmp_path / "train_spider.json").write_text(
        json.dumps(
            [{"db_id": "zoo", "question": "How many animals?", "query": "SELECT count(*) FROM animal", "sql": {}}]
        )
    )
    (tmp_path / "dev.json").write_text(
        json.dumps(
            [{"db_id": "zoo", "question": "Animals with 6 legs?", "query": "SELECT name FROM animal WHERE legs = 6"}]
        )
    )
    env = make("sql", data_dir=str(tmp_path))
    task = env.tasks("test", 1)[0]
    assert "animal(id INTEGER PK, name TEXT, legs INT)" in env.reset(task, 0)
    r = env.step("submit SELECT name FROM animal WHERE legs > 5")
    assert r.success


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_parse_and_step_never_raise(env: SqlEnv, text: str) -> None:
    env.reset(env.tasks("test", 1)[0], 0)
    parsed = env.parse_action(text)
    assert parsed.action is None or isinstance(parsed.action, str)
    for action in (text, "submit " + text, "SELECT " + text):
        assert isinstance(env.step(action), StepResult)
