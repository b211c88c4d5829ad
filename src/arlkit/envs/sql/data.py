"""SQL task sets: arlkit's shipped set and Spider-format data a user has on disk.

A Spider-format dataset is one JSON file per split, each a list of objects with at least
``db_id``, ``question`` and ``query`` (``hardness`` optional: easy, medium, hard or extra; other
fields are ignored), and a folder of SQLite files, either ``<db_dir>/<db_id>/<db_id>.sqlite``
(Spider's layout) or ``<db_dir>/<db_id>.sqlite``.

Malformed files raise :class:`DatasetError` naming the file, the entry (0-based index) and the
field. A task set whose train and test splits share an item (the same database and the same
question, compared case- and whitespace-insensitively) is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from arlkit.envs.splits import content_id
from arlkit.envs.sql.databases import DATABASES, ensure_databases

__all__ = [
    "HARDNESS",
    "DatasetError",
    "SqlTask",
    "SqlTaskSet",
    "check_disjoint",
    "find_databases",
    "load_spider",
    "read_spider_file",
    "shipped_task_set",
]

HARDNESS = ("easy", "medium", "hard", "extra")


class DatasetError(ValueError):
    """A dataset file is malformed or inconsistent; the message names file, entry and field."""


@dataclass(frozen=True)
class SqlTask:
    """One question about one database.

    Attributes:
        db_id: the database the question is about.
        question: the natural-language question.
        query: the gold SQL query.
        hardness: Spider hardness level, or ``None`` when the data does not say.
    """

    db_id: str
    question: str
    query: str
    hardness: str | None = None

    @property
    def task_id(self) -> str:
        """``sql-`` + a hash of (db_id, question, query)."""
        return "sql-" + content_id("\n".join((self.db_id, self.question, self.query)))

    def item_key(self) -> tuple[str, str]:
        """What identifies an item for the train/test overlap check."""
        return self.db_id, " ".join(self.question.lower().split())


@dataclass(frozen=True)
class SqlTaskSet:
    """Tasks of both splits and where each database file is.

    Attributes:
        train: training tasks in file order.
        test: test tasks in file order.
        databases: ``db_id -> path`` of every SQLite file the tasks use.
    """

    train: tuple[SqlTask, ...]
    test: tuple[SqlTask, ...]
    databases: Mapping[str, Path]

    def split(self, name: str) -> tuple[SqlTask, ...]:
        """The tasks of split ``name`` (``train`` or ``test``)."""
        if name == "train":
            return self.train
        if name == "test":
            return self.test
        raise ValueError(f"unknown split {name!r}; valid choices: train, test")


def _field(path: Path, index: int, entry: Mapping[str, Any], name: str) -> str:
    if name not in entry:
        raise DatasetError(f"{path}: entry {index}: field {name!r} is missing")
    value = entry[name]
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{path}: entry {index}: field {name!r} must be a non-empty string, got {value!r:.60}")
    return value


def read_spider_file(path: str | Path, db_ids: Iterable[str] | None = None) -> list[SqlTask]:
    """The tasks of one Spider-format JSON file.

    Args:
        path: the JSON file (a list of objects).
        db_ids: the databases that exist; an entry naming another one is an error.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of entries, got {type(data).__name__}")
    known = set(db_ids) if db_ids is not None else None
    tasks = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise DatasetError(f"{path}: entry {index}: expected an object, got {type(entry).__name__}")
        db_id = _field(path, index, entry, "db_id")
        question = _field(path, index, entry, "question")
        query = _field(path, index, entry, "query")
        hardness = entry.get("hardness")
        if hardness is not None and hardness not in HARDNESS:
            raise DatasetError(
                f"{path}: entry {index}: field 'hardness' must be one of {', '.join(HARDNESS)}, got {hardness!r:.40}"
            )
        if known is not None and db_id not in known:
            raise DatasetError(f"{path}: entry {index}: field 'db_id': no database {db_id!r} in the database folder")
        tasks.append(SqlTask(db_id, question.strip(), query.strip(), hardness))
    return tasks


def find_databases(db_dir: str | Path) -> dict[str, Path]:
    """``db_id -> path`` of the SQLite files in ``db_dir`` (Spider layout or flat)."""
    root = Path(db_dir)
    if not root.is_dir():
        raise DatasetError(f"{root}: the database folder does not exist")
    found: dict[str, Path] = {}
    for entry in sorted(root.iterdir()):
        if entry.is_dir():
            for suffix in (".sqlite", ".db", ".sqlite3"):
                candidate = entry / f"{entry.name}{suffix}"
                if candidate.is_file():
                    found[entry.name] = candidate
                    break
        elif entry.suffix in (".sqlite", ".db", ".sqlite3"):
            found.setdefault(entry.stem, entry)
    return found


def check_disjoint(train: Sequence[SqlTask], test: Sequence[SqlTask], *, where: str = "") -> None:
    """Raise :class:`DatasetError` when a train item (database + question) is also a test item."""
    train_keys = {t.item_key(): i for i, t in enumerate(train)}
    for j, task in enumerate(test):
        i = train_keys.get(task.item_key())
        if i is not None:
            raise DatasetError(
                f"{where}train entry {i} and test entry {j} are the same item "
                f"(database {task.db_id!r}, question {task.question!r:.80}); train and test must not overlap"
            )


def load_spider(train_file: str | Path | None, test_file: str | Path | None, db_dir: str | Path) -> SqlTaskSet:
    """A task set from Spider-format files; a missing split file (``None``) gives an empty split."""
    databases = find_databases(db_dir)
    train = read_spider_file(train_file, databases) if train_file is not None else []
    test = read_spider_file(test_file, databases) if test_file is not None else []
    check_disjoint(train, test, where=f"{train_file} / {test_file}: ")
    used = {t.db_id for t in (*train, *test)}
    return SqlTaskSet(tuple(train), tuple(test), MappingProxyType({k: v for k, v in databases.items() if k in used}))


def shipped_task_set(cache_dir: str | Path | None = None) -> SqlTaskSet:
    """arlkit's own task set; its databases are built into ``cache_dir`` (default
    ``<cache>/sql``, see :func:`arlkit.envs.sql.databases.default_cache_dir`) on first use."""
    root = resources.files("arlkit") / "data" / "sql"
    databases = ensure_databases(cache_dir)
    splits = {}
    for split in ("train", "test"):
        with resources.as_file(root / f"{split}.json") as path:
            splits[split] = read_spider_file(path, DATABASES)
    check_disjoint(splits["train"], splits["test"], where="shipped SQL task set: ")
    return SqlTaskSet(tuple(splits["train"]), tuple(splits["test"]), MappingProxyType(databases))
