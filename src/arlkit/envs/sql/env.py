"""InterCode-SQL on SQLite (docs/environments_sql.md; RT App. A.1; T_max 10).

Episode semantics:

- Observation 0 is the question and the database schema (tables, columns, keys).
- Each action is one SQL statement, run read-only through :class:`~arlkit.envs.sql.safe.ReadOnlyDatabase`
  (time limit, row cap); the observation is the result rows (cut for display) or
  ``Error executing query: <msg>``. A query that fails (syntax error, unknown column, time limit)
  is a valid action whose result is that error. A statement the read-only policy refuses
  (``DROP``, ``INSERT``, ``ATTACH``, ``PRAGMA``, a forbidden function), or one longer than
  ``max_sql_chars``, is an **invalid** action: the observation says why and the state is unchanged.
- ``submit`` ends the episode and scores the result of the last query; ``submit <SQL>`` runs one
  more query and submits its result in the same turn. So one turn always suffices (the structural
  bound of docs/metrics.md#expected-optimum, is 100% for every T >= 1) and the oracle's single action is
  ``submit <gold query>``. The step that submits carries the reward
  (:func:`~arlkit.envs.sql.reward.sql_reward`: multiset IoU times Kendall tau when the gold query
  sorts its result); success means reward 1. An episode that runs out of budget without a
  submission scores 0 (docs/algorithms.md#rewards), as does submitting an error or nothing.
- Scoring uses the rows actually fetched: a result cut at ``max_rows`` is scored on its first
  ``max_rows`` rows (every shipped gold result is smaller).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.sql.data import HARDNESS, SqlTask, SqlTaskSet, load_spider, shipped_task_set
from arlkit.envs.sql.reward import has_top_level_order_by, sql_reward
from arlkit.envs.sql.safe import QueryLimits, QueryResult, ReadOnlyDatabase, describe_schema, format_result
from arlkit.envs.parsing import parse_tagged_action

__all__ = ["SqlConfig", "SqlEnv"]

_SUBMIT = re.compile(r"submit\b", re.IGNORECASE)
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n?(.*?)\n?```$", re.DOTALL)
_MAX_OPEN_DATABASES = 32


@dataclass(frozen=True)
class _Gold:
    result: QueryResult
    ordered: bool


@dataclass(frozen=True)
class SqlConfig:
    """Configuration of the InterCode-SQL family.

    Attributes:
        data_dir: root folder of a Spider-format dataset on disk; ``None`` uses arlkit's own task
            set (5 generated databases, 200 questions).
        train_file: the training split's JSON file, relative to ``data_dir`` (or absolute); ignored
            without ``data_dir``. An empty string means no training split.
        test_file: the test split's JSON file, relative to ``data_dir`` (or absolute); ignored
            without ``data_dir``. An empty string means no test split.
        db_dir: the folder of SQLite files, relative to ``data_dir`` (or absolute).
        hardness: keep only tasks of these hardness levels; empty keeps all.
        cache_dir: where the shipped databases are built on first use; ``None`` means
            ``$ARLKIT_CACHE_DIR/sql`` or ``~/.cache/arlkit/sql``.
        timeout_s: wall-clock limit of one query.
        max_rows: rows kept from one result (for display and scoring); more are cut off.
        display_rows: rows shown in an observation.
        display_chars: characters of result text shown in an observation.
        max_sql_chars: longest accepted statement.
        t_max: the family's full turn budget T_max (RT uses 10).
    """

    data_dir: str | None = None
    train_file: str = "train_spider.json"
    test_file: str = "dev.json"
    db_dir: str = "database"
    hardness: tuple[str, ...] = ()
    cache_dir: str | None = None
    timeout_s: float = 2.0
    max_rows: int = 1000
    display_rows: int = 20
    display_chars: int = 2000
    max_sql_chars: int = 10_000
    t_max: int = 10

    def __post_init__(self) -> None:
        bad = [h for h in self.hardness if h not in HARDNESS]
        if bad:
            raise ValueError(f"hardness must be among {', '.join(HARDNESS)}, got {bad[0]!r}")
        QueryLimits(self.timeout_s, self.max_rows, max_sql_chars=self.max_sql_chars)  # validates
        if self.display_rows < 1:
            raise ValueError(f"display_rows must be >= 1, got {self.display_rows}")
        if self.display_chars < 100:
            raise ValueError(f"display_chars must be >= 100, got {self.display_chars}")
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")


# Task sets and gold results are shared by every environment of a process: the rollout engine builds
# one environment per trajectory, so construction and reset must not reload files or rerun gold
# queries. Both are keyed by everything they depend on (file modification times included).
_TASK_SETS: dict[tuple[object, ...], SqlTaskSet] = {}
_GOLDS: dict[tuple[object, ...], _Gold] = {}
_MAX_GOLDS = 50_000


def _mtime(path: Path | None) -> int:
    try:
        return path.stat().st_mtime_ns if path is not None else -1
    except OSError:
        return -1


def _load_task_set(config: SqlConfig) -> SqlTaskSet:
    if config.data_dir is None:
        key: tuple[object, ...] = ("shipped", config.cache_dir)
        if key not in _TASK_SETS:
            _TASK_SETS[key] = shipped_task_set(config.cache_dir)
        return _TASK_SETS[key]
    root = Path(config.data_dir)

    def resolve(name: str) -> Path | None:  # an absolute name survives the join
        return root / name if name else None

    train, test = resolve(config.train_file), resolve(config.test_file)
    key = (str(train), str(test), str(root / config.db_dir), _mtime(train), _mtime(test))
    if key not in _TASK_SETS:
        _TASK_SETS[key] = load_spider(train, test, root / config.db_dir)
    return _TASK_SETS[key]


def _strip_fence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


class SqlEnv:
    """Interactive SQL over SQLite with InterCode's reward; see the module docstring."""

    name = "sql"

    def __init__(self, config: SqlConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        self.limits = QueryLimits(config.timeout_s, config.max_rows, max_sql_chars=config.max_sql_chars)
        self._taskset: SqlTaskSet | None = None
        self._databases: dict[str, ReadOnlyDatabase] = {}
        self._task: Task | None = None
        self._sql_task: SqlTask | None = None
        self._last: QueryResult | None = None
        self._history: tuple[str, ...] = ()
        self._done = False
        self._score: float | None = None

    # -- tasks ---------------------------------------------------------------------------------
    @property
    def task_set(self) -> SqlTaskSet:
        """The loaded task set (loaded, and for the shipped set built, on first use)."""
        if self._taskset is None:
            self._taskset = _load_task_set(self.config)
        return self._taskset

    def tasks(self, split: str, n: int) -> list[Task]:
        if n < 0:
            raise ValueError(f"the number of tasks must be >= 0, got {n}")
        pool = [t for t in self.task_set.split(split) if not self.config.hardness or t.hardness in self.config.hardness]
        if len(pool) < n:
            raise ValueError(f"only {len(pool)} {split} tasks exist (asked for {n})")
        return [self.task_from(t) for t in pool[:n]]

    @staticmethod
    def task_from(sql_task: SqlTask) -> Task:
        """The protocol task of one SQL question."""
        payload = {"db_id": sql_task.db_id, "question": sql_task.question, "query": sql_task.query}
        if sql_task.hardness is not None:
            payload["hardness"] = sql_task.hardness
        return Task(task_id=sql_task.task_id, payload=payload)

    # -- databases -----------------------------------------------------------------------------
    def _database(self, db_id: str) -> ReadOnlyDatabase:
        db = self._databases.get(db_id)
        if db is None:
            path = self.task_set.databases.get(db_id)
            if path is None:
                raise ValueError(f"no database {db_id!r} in this task set")
            if len(self._databases) >= _MAX_OPEN_DATABASES:
                oldest = next(iter(self._databases))
                self._databases.pop(oldest).close()
            db = self._databases[db_id] = ReadOnlyDatabase(path, self.limits)
        return db

    def _gold(self, task: Task, sql_task: SqlTask) -> _Gold:
        db = self._database(sql_task.db_id)
        key = (str(db.path), _mtime(db.path), sql_task.query, self.config.max_rows, self.config.timeout_s)
        gold = _GOLDS.get(key)
        if gold is None:
            result = db.execute(sql_task.query)
            if not result.ok or result.truncated:
                problem = result.error if not result.ok else f"returns more than {self.config.max_rows} rows"
                raise ValueError(f"task {task.task_id}: the gold query cannot be scored: {problem}")
            if len(_GOLDS) >= _MAX_GOLDS:
                _GOLDS.clear()
            gold = _GOLDS[key] = _Gold(result, has_top_level_order_by(sql_task.query))
        return gold

    def close(self) -> None:
        """Close every open database connection."""
        for db in self._databases.values():
            db.close()
        self._databases.clear()

    # -- episode -------------------------------------------------------------------------------
    @property
    def _current(self) -> tuple[Task, SqlTask]:
        if self._task is None or self._sql_task is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._task, self._sql_task

    def reset(self, task: Task, seed: int) -> str:
        payload = task.payload
        sql_task = SqlTask(
            str(payload["db_id"]), str(payload["question"]), str(payload["query"]), payload.get("hardness")
        )
        self._database(sql_task.db_id)
        self._gold(task, sql_task)
        self._task, self._sql_task = task, sql_task
        self._last, self._history, self._done, self._score = None, (), False, None
        db = self._databases[sql_task.db_id]
        return (
            f"Question: {sql_task.question}\n"
            f"Database {sql_task.db_id!r} (SQLite) has these tables:\n{describe_schema(db.tables)}"
        )

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_tagged_action(reply)

    def step(self, action: str) -> StepResult:
        task, sql_task = self._current
        if self._done:
            return StepResult("The episode is over.", 0.0, True, False, False)
        text = _strip_fence(action.strip()) if isinstance(action, str) else ""
        if not text:
            return StepResult("Invalid action: write one SQL statement or submit.", 0.0, False, False, False)
        submit = bool(_SUBMIT.match(text))
        query = _strip_fence(text[len("submit") :].strip()) if submit else text
        if submit and not query.strip(" ;.\n\t"):
            query = ""  # a bare submit (trailing punctuation ignored)
        shown = ""
        if len(query) > self.config.max_sql_chars:
            limit = self.config.max_sql_chars
            note = f"Error executing query: the query is {len(query)} characters long; the limit is {limit}"
            return StepResult(note + "\nNothing was run; the state is unchanged.", 0.0, False, False, False)
        if query:
            result = self._database(sql_task.db_id).execute(query)
            if result.refused:
                note = format_result(result) + "\nNothing was run; the state is unchanged."
                return StepResult(note, 0.0, False, False, False)
            self._last = result
            self._history = (*self._history, query)
            shown = self._show(result)
        if not submit:
            return StepResult(shown, 0.0, False, False, True)
        score = self._score_last(task, sql_task)
        self._done, self._score = True, score
        head = f"{shown}\n" if shown else ""
        what = "the result of your last query" if self._last is not None else "no result (no query was run)"
        return StepResult(f"{head}You submitted {what}. Score: {score:.2f}.", score, True, score >= 1.0, True)

    def _score_last(self, task: Task, sql_task: SqlTask) -> float:
        if self._last is None or not self._last.ok:
            return 0.0
        gold = self._gold(task, sql_task)
        return sql_reward(self._last.rows, gold.result.rows, ordered=gold.ordered)

    def _show(self, result: QueryResult) -> str:
        return format_result(result, max_rows=self.config.display_rows, max_chars=self.config.display_chars)

    def render(self) -> str:
        _, sql_task = self._current
        last = "No query has been run yet." if self._last is None else f"Last result:\n{self._show(self._last)}"
        return f"Question: {sql_task.question}\n{last}"

    def prompt_text(self) -> PromptText:
        """The instruction (rules, legend, goal) and the action format of the prompt."""
        instruction = (
            "Answer a question about a SQLite database by writing SQL. Each action is one SQL statement; it runs "
            "read-only (SELECT and WITH queries; statements that would change the database or its settings are "
            f"refused) with a time limit of {self.config.timeout_s:g} s, and you see its result rows (long results "
            f"are shortened for display; at most {self.config.max_rows} rows are kept) or the error message. "
            "When the result of a query is your final answer, submit it: `submit` submits the result of your last "
            "query, and `submit <SQL>` runs one last query and submits its result in the same turn. The submitted "
            "rows are compared with the rows of the correct answer: the score is their overlap (intersection over "
            "union, counting repeated rows), scaled by how well the row order agrees when the question asks for an "
            "order; 1 is a perfect answer. Column names do not matter, but the columns, their order and the values "
            "do. An episode that ends without a submission scores 0."
        )
        action_format = (
            "The action is one SQL statement, `submit`, or `submit` followed by one SQL statement, for example "
            "<action>SELECT count(*) FROM student</action> or <action>submit SELECT name FROM department</action>."
        )
        return PromptText(instruction, action_format)

    def state_key(self) -> str:
        task, _ = self._current
        last = self._last
        outcome = "-" if last is None else repr((last.columns, last.rows, last.truncated, last.error))
        digest = hashlib.sha256(outcome.encode("utf-8", errors="replace")).hexdigest()[:16]
        return f"{task.task_id}|{digest}|{int(self._done)}"

    def snapshot(self) -> dict[str, Any]:
        return {
            "task": self._task,
            "last": self._last,
            "history": self._history,
            "done": self._done,
            "score": self._score,
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        task: Task = snapshot["task"]
        payload = task.payload
        self._sql_task = SqlTask(
            str(payload["db_id"]), str(payload["question"]), str(payload["query"]), payload.get("hardness")
        )
        self._task = task
        self._database(self._sql_task.db_id)
        self._last = snapshot["last"]
        self._history = tuple(snapshot["history"])
        self._done = bool(snapshot["done"])
        self._score = snapshot["score"]

    # -- read-only views -----------------------------------------------------------------------
    @property
    def history(self) -> tuple[str, ...]:
        """The queries run so far in this episode (refused ones excluded)."""
        return self._history

    @property
    def last_result(self) -> QueryResult | None:
        """The result of the last query run, or ``None``."""
        return self._last

    # -- oracle --------------------------------------------------------------------------------
    def _gold_action(self) -> str:
        _, sql_task = self._current
        return f"submit {sql_task.query}"

    def _last_is_perfect(self) -> bool:
        task, sql_task = self._current
        return self._last is not None and self._score_last(task, sql_task) >= 1.0

    def action_values(self, remaining: int) -> dict[str, float]:
        """The known optimal actions with value 1 (success on this turn) when a turn is left."""
        value = 1.0 if remaining >= 1 and not self._done else 0.0
        values = {self._gold_action(): value}
        if not self._done and self._last_is_perfect():
            values["submit"] = value
        return values

    def optimal_actions(self, remaining: int) -> list[str]:
        return [self._gold_action()]

    def shortest_solution_length(self) -> int | None:
        if self._done:
            return 0 if (self._score or 0.0) >= 1.0 else None
        return 1

    def success_probability(self, remaining: int) -> float:
        if self._done:
            return 1.0 if (self._score or 0.0) >= 1.0 else 0.0
        return 1.0 if remaining >= 1 else 0.0


@register_env("sql", SqlConfig)
def _make_sql(config: SqlConfig) -> SqlEnv:
    return SqlEnv(config)
