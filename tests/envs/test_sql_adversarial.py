"""Hostile SQL: every attempt is refused or cut off with a clear observation, within its time limit,
and the database file is byte-for-byte unchanged afterwards."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from arlkit.envs import make
from arlkit.envs.sql.env import SqlEnv
from arlkit.envs.sql.safe import HEAP_LIMIT_BYTES, QueryLimits, ReadOnlyDatabase, format_result

TIMEOUT = 0.5


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> SqlEnv:
    e = make("sql", cache_dir=str(tmp_path_factory.mktemp("sqlcache")), timeout_s=TIMEOUT, max_rows=1000)
    assert isinstance(e, SqlEnv)
    return e


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def university(env: SqlEnv) -> Path:
    return env.task_set.databases["university"]


def run(env: SqlEnv, action: str):  # type: ignore[no-untyped-def]
    task = next(t for t in env.tasks("test", 38) if t.payload["db_id"] == "university")
    env.reset(task, 0)
    path = university(env)
    before, files_before = sha(path), sorted(os.listdir(path.parent))
    start = time.monotonic()
    result = env.step(action)
    elapsed = time.monotonic() - start
    assert sha(path) == before, f"database changed by {action!r}"
    assert sorted(os.listdir(path.parent)) == files_before, "a file appeared next to the database"
    # The database still answers normally afterwards.
    check = env.step("SELECT count(*) FROM student")
    assert check.valid and "600" in check.observation
    return result, elapsed


REFUSED = [
    ("DROP TABLE student", "DROP is not allowed"),
    ("drop table if exists enrollment;", "DROP is not allowed"),
    ("INSERT INTO student VALUES (1, 'x', 1, 1, 4.0, 'Oslo')", "INSERT is not allowed"),
    ("UPDATE student SET gpa = 4.0", "UPDATE is not allowed"),
    ("DELETE FROM enrollment", "DELETE is not allowed"),
    ("CREATE TABLE pwned(x)", "CREATE is not allowed"),
    ("CREATE TEMP TABLE pwned AS SELECT * FROM student", "CREATE is not allowed"),
    ("ATTACH DATABASE '/tmp/arlkit_attack.db' AS evil", "ATTACH is not allowed"),
    ("PRAGMA writable_schema = ON", "PRAGMA is not allowed"),
    ("PRAGMA query_only = 0", "PRAGMA is not allowed"),
    ("PRAGMA journal_mode = DELETE", "PRAGMA is not allowed"),
    ("VACUUM INTO '/tmp/arlkit_vacuum.db'", "VACUUM is not allowed"),
    ("BEGIN IMMEDIATE", "BEGIN is not allowed"),
    ("SELECT load_extension('/tmp/evil.so')", "the function load_extension() is not allowed"),
    ("/* hi */ DROP TABLE course", "DROP is not allowed"),
    ("WITH x AS (SELECT 1) DELETE FROM student", "WITH is not allowed"),
]


@pytest.mark.parametrize(("sql", "reason"), REFUSED)
def test_writes_and_settings_are_refused(env: SqlEnv, sql: str, reason: str) -> None:
    result, _ = run(env, sql)
    assert not result.valid and not result.done
    assert result.observation.startswith("Error executing query: not authorized: ")
    assert reason in result.observation and "read-only" in result.observation
    assert not Path("/tmp/arlkit_attack.db").exists() and not Path("/tmp/arlkit_vacuum.db").exists()


def test_attach_is_blocked_even_without_the_authorizer(env: SqlEnv) -> None:
    # Defence in depth: the attached-database limit is 0, so ATTACH fails even if the authorizer
    # allowed it (simulated by removing the hook on a private connection).
    db = ReadOnlyDatabase(university(env))
    db._conn.set_authorizer(None)
    result = db.execute("ATTACH DATABASE '/tmp/arlkit_attack2.db' AS evil")
    db.close()
    assert not result.ok and "too many attached databases" in (result.error or "")
    assert not Path("/tmp/arlkit_attack2.db").exists()


def test_query_only_cannot_be_switched_off_to_write(env: SqlEnv) -> None:
    run(env, "PRAGMA query_only = 0")
    result, _ = run(env, "INSERT INTO department VALUES (99, 'Evil', 'x', 1)")
    assert not result.valid


def test_huge_cross_join_counting_is_interrupted(env: SqlEnv) -> None:
    result, elapsed = run(env, "SELECT count(*) FROM enrollment AS a, enrollment AS b, enrollment AS c")
    assert result.valid and "interrupted: the query exceeded the time limit of 0.5 s" in result.observation
    assert elapsed < TIMEOUT + 1.0


def test_huge_cross_join_rows_are_cut_at_the_row_cap(env: SqlEnv) -> None:
    result, elapsed = run(env, "SELECT * FROM enrollment, student, course")
    assert result.valid and "(1000 rows fetched; the result was cut off" in result.observation
    assert elapsed < TIMEOUT + 1.0
    assert env.last_result is not None  # the check query replaced it; rerun to inspect the cut result
    env.step("SELECT * FROM enrollment, student, course")
    assert env.last_result.truncated and len(env.last_result.rows) == 1000


def test_endless_recursive_cte_is_interrupted(env: SqlEnv) -> None:
    endless = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT max(x) FROM r"
    result, elapsed = run(env, endless)
    assert result.valid and "exceeded the time limit" in result.observation
    assert elapsed < TIMEOUT + 1.0


def test_endless_recursive_cte_streaming_rows_is_cut(env: SqlEnv) -> None:
    result, elapsed = run(env, "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r")
    assert "cut off at the row/size limit" in result.observation and elapsed < TIMEOUT + 1.0


def test_hundred_thousand_rows_are_cut_and_flagged(env: SqlEnv) -> None:
    sql = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 100000) SELECT x FROM r"
    result, elapsed = run(env, sql)
    assert "(1000 rows fetched; the result was cut off" in result.observation
    assert elapsed < TIMEOUT + 1.0
    env.step(sql)
    assert env.last_result is not None and env.last_result.truncated and len(env.last_result.rows) == 1000


def test_giant_strings_hit_the_length_limit(env: SqlEnv) -> None:
    result, _ = run(env, "SELECT zeroblob(1000000000)")
    assert result.valid and "string or blob too big" in result.observation
    # printf gives NULL instead of a string over the length limit: contained either way.
    result, _ = run(env, "SELECT length(printf('%.*c', 5000000, 'x'))")
    assert result.valid and (result.observation.splitlines()[1] == "NULL" or "too big" in result.observation)


def test_wide_values_hit_the_byte_cap(tmp_path_factory: pytest.TempPathFactory, env: SqlEnv) -> None:
    db = ReadOnlyDatabase(university(env), QueryLimits(timeout_s=2.0, max_rows=1000, max_bytes=100_000))
    result = db.execute("SELECT printf('%.*c', 10000, 'x') FROM student")
    db.close()
    assert result.ok and result.truncated and len(result.rows) <= 10


def test_several_statements_and_parameters_are_errors(env: SqlEnv) -> None:
    result, _ = run(env, "SELECT 1; DROP TABLE student")
    assert "only one SQL statement can be run per action" in result.observation
    result, _ = run(env, "SELECT * FROM student WHERE student_id = ?")
    assert "query parameters (?) are not supported" in result.observation


def test_overlong_query_is_rejected_before_running(env: SqlEnv) -> None:
    result, _ = run(env, "SELECT " + "1 + " * 5000 + "1")
    assert not result.valid and "characters long; the limit is 10000" in result.observation


def test_database_file_is_opened_read_only(env: SqlEnv) -> None:
    # Even a connection without the authorizer cannot write through the mode=ro URI.
    db = ReadOnlyDatabase(university(env))
    db._conn.set_authorizer(None)
    result = db.execute("DELETE FROM student")
    db.close()
    assert not result.ok and "readonly" in (result.error or "").replace("-", "").replace(" ", "")


def _temp_files_while(action) -> list[str]:  # type: ignore[no-untyped-def]
    """SQLite temp files (``etilqs_*``) this process holds open while ``action()`` runs."""
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for fd in os.listdir("/proc/self/fd"):
                try:
                    target = os.readlink(f"/proc/self/fd/{fd}")
                except OSError:
                    continue
                if "etilqs" in target:
                    seen.append(target)
            done.wait(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        action()
    finally:
        done.set()
        watcher.join()
    return seen


def test_a_growing_recursive_query_stays_in_memory_and_ends_at_the_cap(env: SqlEnv) -> None:
    # A recursive UNION keeps every distinct row it made; by default SQLite spills that table to
    # temp files on the host disk (gigabytes within the time limit). Here it grows in memory only
    # and stops at the heap cap with a clear error, well before its (generous) time limit.
    sql = (
        "WITH RECURSIVE r(x, pad) AS (SELECT 1, randomblob(1000) UNION SELECT x + 1, randomblob(1000) FROM r) "
        "SELECT count(*) FROM r"
    )
    db = ReadOnlyDatabase(university(env), QueryLimits(timeout_s=120.0))
    results = []
    try:
        start = time.monotonic()
        temp_files = _temp_files_while(lambda: results.append(db.execute(sql)))
        elapsed = time.monotonic() - start
        after = db.execute("SELECT count(*) FROM student")
    finally:
        db.close()
    result = results[0]
    assert temp_files == [], f"temp files on disk: {sorted(set(temp_files))[:3]}"
    assert not result.ok and not result.timed_out and elapsed < 120.0
    assert f"the memory limit of {HEAP_LIMIT_BYTES >> 20} MiB" in format_result(result)
    assert format_result(result).startswith("Error executing query: out of memory")
    assert after.ok and after.rows == ((600,),)  # the connection still works
