"""The shipped SQL task set and its databases, and the Spider-format loader's error messages."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import arlkit.data
from arlkit.envs.splits import split_of
from arlkit.envs.sql.data import DatasetError, load_spider, read_spider_file, shipped_task_set
from arlkit.envs.sql.databases import DATABASES, SCRIPT_SHA256, build_database, database_script, ensure_databases
from arlkit.envs.sql.safe import ReadOnlyDatabase

DATA = Path(arlkit.data.__file__).resolve().parent / "sql"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sqlcache")


@pytest.mark.parametrize("db_id", DATABASES)
def test_database_scripts_match_their_pinned_checksums(db_id: str) -> None:
    assert hashlib.sha256(database_script(db_id).encode()).hexdigest() == SCRIPT_SHA256[db_id]


def test_shipped_database_scripts_equal_the_generator_output(data_script) -> None:  # type: ignore[no-untyped-def]
    make_databases = data_script("make_sql_databases")
    for db_id in DATABASES:
        assert make_databases.database_script(db_id) == database_script(db_id), db_id


def _dump(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def test_databases_build_identically_and_are_reused(cache: Path, tmp_path: Path) -> None:
    a = build_database("library", cache)
    mtime = a.stat().st_mtime_ns
    assert build_database("library", cache) == a and a.stat().st_mtime_ns == mtime  # cached, not rebuilt
    b = build_database("library", tmp_path)
    assert _dump(a) == _dump(b)
    assert a.name.startswith("library-" + SCRIPT_SHA256["library"][:16])


def test_unwritable_default_cache_falls_back_to_a_temporary_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.delenv("ARLKIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    paths = ensure_databases()
    assert all(p.is_file() and str(p).startswith(str(tmp_path / "tmp")) for p in paths.values())


def test_databases_have_realistic_sizes(cache: Path) -> None:
    taskset = shipped_task_set(cache)
    assert set(taskset.databases) == set(DATABASES)
    for db_id, path in taskset.databases.items():
        with ReadOnlyDatabase(path) as db:
            assert 4 <= len(db.tables) <= 6, db_id
            counts = [db.execute(f"SELECT count(*) FROM {t.name}").rows[0][0] for t in db.tables]
            assert min(counts) >= 6 and max(counts) >= 1000, (db_id, counts)
            assert any(c.references for t in db.tables for c in t.columns), f"{db_id} has no foreign keys"


def test_shipped_files_equal_the_generator_output(cache: Path, data_script) -> None:  # type: ignore[no-untyped-def]
    make_tasks = data_script("make_sql_tasks")
    splits = make_tasks.build_tasks(cache)
    for split, tasks in splits.items():
        assert (DATA / f"{split}.json").read_text(encoding="utf-8") == make_tasks.render(tasks), split


def test_shipped_task_set_size_spread_and_disjoint_splits(cache: Path) -> None:
    taskset = shipped_task_set(cache)
    everything = taskset.train + taskset.test
    assert len(everything) >= 150 and len(taskset.test) >= 30
    for split in (taskset.train, taskset.test):
        assert set(Counter(t.hardness for t in split)) == {"easy", "medium", "hard", "extra"}
    assert {t.db_id for t in taskset.test} == set(DATABASES)
    # Disjoint by content, and by template: no question pattern is on both sides.
    assert not {t.task_id for t in taskset.train} & {t.task_id for t in taskset.test}
    raw = {s: json.loads((DATA / f"{s}.json").read_text()) for s in ("train", "test")}
    templates = {s: {e["template"] for e in raw[s]} for s in raw}
    assert not templates["train"] & templates["test"]
    assert all(split_of(t) == s for s in raw for t in templates[s])
    assert len({t.task_id for t in everything}) == len(everything)


def test_every_gold_query_runs_fast_with_a_small_nonempty_result(cache: Path) -> None:
    taskset = shipped_task_set(cache)
    dbs = {k: ReadOnlyDatabase(v) for k, v in taskset.databases.items()}
    try:
        for task in taskset.train + taskset.test:
            result = dbs[task.db_id].execute(task.query)
            assert result.ok and not result.truncated, (task.question, result.error)
            assert result.rows and any(v is not None for v in result.rows[0]), task.question
            assert len(result.rows) <= 100, task.question
    finally:
        for db in dbs.values():
            db.close()


# -- the Spider-format loader -----------------------------------------------------------------


def make_spider(root: Path, train: object, test: object) -> None:
    (root / "database" / "shop").mkdir(parents=True)
    conn = sqlite3.connect(root / "database" / "shop" / "shop.sqlite")
    conn.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    (root / "train.json").write_text(train if isinstance(train, str) else json.dumps(train))
    (root / "test.json").write_text(test if isinstance(test, str) else json.dumps(test))


GOOD = {"db_id": "shop", "question": "How many items?", "query": "SELECT count(*) FROM item"}


def load(root: Path):  # type: ignore[no-untyped-def]
    return load_spider(root / "train.json", root / "test.json", root / "database")


def test_loader_reads_spider_files(tmp_path: Path) -> None:
    other = dict(GOOD, question="List item names.", query="SELECT name FROM item", hardness="easy")
    make_spider(tmp_path, [GOOD], [other])
    taskset = load(tmp_path)
    assert [t.question for t in taskset.train] == ["How many items?"]
    assert taskset.test[0].hardness == "easy"
    assert set(taskset.databases) == {"shop"}


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ("{not json", r"train\.json: not valid JSON"),
        ({"db_id": "shop"}, r"train\.json: expected a JSON list of entries"),
        ([GOOD, 3], r"train\.json: entry 1: expected an object"),
        ([GOOD, {"db_id": "shop", "question": "q?"}], r"train\.json: entry 1: field 'query' is missing"),
        ([dict(GOOD, question=7)], r"train\.json: entry 0: field 'question' must be a non-empty string"),
        ([dict(GOOD, query="  ")], r"train\.json: entry 0: field 'query' must be a non-empty string"),
        ([dict(GOOD, hardness="trivial")], r"train\.json: entry 0: field 'hardness' must be one of"),
        ([GOOD, dict(GOOD, db_id="farm")], r"train\.json: entry 1: field 'db_id': no database 'farm'"),
    ],
)
def test_malformed_files_name_file_entry_and_field(tmp_path: Path, train: object, message: str) -> None:
    make_spider(tmp_path, train, [])
    with pytest.raises(DatasetError, match=message):
        load(tmp_path)


def test_overlapping_train_and_test_are_refused(tmp_path: Path) -> None:
    same_question = dict(GOOD, question="  how many ITEMS? ", query="SELECT count(id) FROM item")
    make_spider(tmp_path, [dict(GOOD, question="Other?"), GOOD], [same_question])
    with pytest.raises(DatasetError, match=r"train entry 1 and test entry 0 are the same item"):
        load(tmp_path)


def test_missing_files_and_folders_are_reported(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="database folder does not exist"):
        load_spider(None, None, tmp_path / "nowhere")
    with pytest.raises(DatasetError, match="no such file"):
        read_spider_file(tmp_path / "missing.json")


def test_flat_database_layout(tmp_path: Path) -> None:
    (tmp_path / "dbs").mkdir()
    sqlite3.connect(tmp_path / "dbs" / "shop.sqlite").close()
    (tmp_path / "t.json").write_text(json.dumps([GOOD]))
    assert load_spider(None, tmp_path / "t.json", tmp_path / "dbs").test[0].db_id == "shop"
