"""Running untrusted SQL on SQLite: read-only, time-limited, row- and byte-capped.

``mode=ro`` alone is not enough (``ATTACH 'new.db'`` still creates a file) and ``PRAGMA
query_only`` can be switched off by the query itself, so the guarantees come from SQLite's own
hooks, installed on every connection this module opens:

- an **allow-list authorizer**: only ``SELECT``, column ``READ``, ``RECURSIVE`` (CTEs) and calls to
  functions on :data:`ALLOWED_FUNCTIONS` are authorised; everything else (DDL, DML, ``ATTACH``,
  ``PRAGMA``, ``VACUUM``, transactions, ``load_extension``) fails at prepare time;
- **limits**: no attached databases, short SQL text, small strings/blobs, shallow expressions;
- a **progress handler** with a monotonic deadline that interrupts runaway queries (a recursive
  CTE that never ends, a huge cross join under ``count(*)``);
- fetching with a **row cap and a byte cap** (``fetchmany`` until ``max_rows + 1`` rows) that
  reports truncation instead of materialising 100k rows;
- **temporary data in memory, with a cap**: ``PRAGMA temp_store = MEMORY`` keeps the sorter, the
  queue of a recursive CTE and ``DISTINCT``/``UNION`` tables off the disk (by default SQLite spills
  them to temp files, ~100 MB in two seconds), and ``PRAGMA hard_heap_limit`` (see
  :data:`HEAP_LIMIT_BYTES`) turns a query that outgrows it into a clear "out of memory" error.

The database file itself is opened with ``mode=ro`` and never written.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ALLOWED_FUNCTIONS",
    "HEAP_LIMIT_BYTES",
    "ColumnInfo",
    "QueryLimits",
    "QueryResult",
    "ReadOnlyDatabase",
    "TableInfo",
    "describe_schema",
    "format_result",
    "leading_keyword",
]

# Scalar, aggregate, window, date and math functions of stock SQLite. Anything else (load_extension,
# fts3_tokenizer, application-defined functions) is refused by the authorizer.
ALLOWED_FUNCTIONS = frozenset(
    """
    abs avg changes char coalesce count cume_dist date datetime dense_rank first_value format glob
    group_concat hex ifnull iif instr julianday lag last_value lead length like likelihood likely
    lower ltrim max min nth_value ntile nullif percent_rank printf quote random rank replace round
    row_number rtrim sign soundex strftime string_agg substr substring sum time total total_changes
    trim typeof unicode unixepoch unlikely upper zeroblob randomblob
    acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10 log2
    mod pi pow power radians sin sinh sqrt tan tanh trunc
    json json_array json_array_length json_extract json_object json_type json_valid json_quote
    json_group_array json_group_object
    """.split()
)

_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})

# Lowered SQLite limits (category -> value). ATTACHED = 0 makes ATTACH impossible even if the
# authorizer were bypassed; the others bound the memory and parse depth a single query can use.
_LIMITS = {
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_LENGTH: 200_000,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 20_000,
    sqlite3.SQLITE_LIMIT_COLUMN: 200,
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 100,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 50,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 32,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 1000,
    sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: 1,
    sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 1,
    sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
}

HEAP_LIMIT_BYTES = 256 * 1024 * 1024
"""Cap on SQLite's heap. SQLite keeps one heap limit for the whole process (``sqlite3_hard_heap_limit64``,
which the pragma can only lower), so it is a module constant, not a per-database setting: every
connection in this process, trusted or not, shares it; the page caches of ordinary use stay far below."""

_FETCH_BATCH = 64
_PROGRESS_EVERY = 1000  # SQLite VM instructions between two deadline checks

_COMMENT = re.compile(r"--[^\n]*|/\*.*?(\*/|$)", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]+")


@dataclass(frozen=True)
class QueryLimits:
    """Resource limits of one query.

    Attributes:
        timeout_s: wall-clock limit (monotonic) of preparing, running and fetching one query.
        max_rows: rows fetched at most; a result with more rows is cut and flagged as truncated.
        max_bytes: approximate size (characters of the values) fetched at most.
        max_sql_chars: longest query text accepted.
    """

    timeout_s: float = 2.0
    max_rows: int = 1000
    max_bytes: int = 2_000_000
    max_sql_chars: int = 10_000

    def __post_init__(self) -> None:
        if not 0.0 < self.timeout_s <= 600.0:
            raise ValueError(f"timeout_s must be in (0, 600], got {self.timeout_s}")
        if self.max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {self.max_rows}")
        if self.max_bytes < 1000:
            raise ValueError(f"max_bytes must be >= 1000, got {self.max_bytes}")
        if not 1 <= self.max_sql_chars <= _LIMITS[sqlite3.SQLITE_LIMIT_SQL_LENGTH]:
            raise ValueError(
                f"max_sql_chars must be in [1, {_LIMITS[sqlite3.SQLITE_LIMIT_SQL_LENGTH]}], got {self.max_sql_chars}"
            )


@dataclass(frozen=True)
class QueryResult:
    """The outcome of one query.

    Attributes:
        columns: result column names (empty on error).
        rows: the fetched rows, at most ``max_rows``.
        truncated: more rows (or more bytes) existed than were fetched.
        error: why the query failed (``None`` on success); the text after "Error executing query: ".
        refused: the query was refused by the read-only policy (a write, ``ATTACH``, ``PRAGMA``, a
            forbidden function); always comes with ``error``.
        timed_out: the query was interrupted at the time limit; always comes with ``error``.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool = False
    error: str | None = None
    refused: bool = False
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """The query ran (its rows may still be truncated)."""
        return self.error is None


@dataclass(frozen=True)
class ColumnInfo:
    """One column of a table: name, declared type and, for a foreign key, ``table.column`` it
    references."""

    name: str
    type: str
    references: str | None = None


@dataclass(frozen=True)
class TableInfo:
    """One table of a database: its name, columns and primary-key column names."""

    name: str
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...] = ()


def leading_keyword(sql: str) -> str:
    """The first keyword of ``sql`` in upper case, comments and brackets skipped (``""`` if none)."""
    match = _WORD.search(_COMMENT.sub(" ", sql[:2000]))
    return match.group(0).upper() if match else ""


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class ReadOnlyDatabase:
    """One SQLite file opened read-only behind the authorizer, limits and deadline.

    The schema is read once through a separate trusted connection before the untrusted connection
    is locked down. Not thread-safe: use one instance per thread (each environment has its own).
    """

    def __init__(self, path: str | Path, limits: QueryLimits | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no SQLite database at {self.path}")
        self.limits = limits or QueryLimits()
        stat = self.path.stat()
        self.tables = _read_schema(str(self.path.resolve()), stat.st_mtime_ns, stat.st_size)
        self._deadline = 0.0
        self._denied: list[tuple[int, str | None]] = []
        self._conn = _open_readonly(self.path)
        # Before the authorizer (which refuses every PRAGMA): temp B-trees and sorters in memory.
        self._conn.execute("PRAGMA temp_store = MEMORY")
        self._conn.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT_BYTES}")
        for category, value in _LIMITS.items():
            self._conn.setlimit(category, value)
        self._conn.set_authorizer(self._authorize)
        self._conn.set_progress_handler(self._past_deadline, _PROGRESS_EVERY)

    # -- hooks ---------------------------------------------------------------------------------
    def _authorize(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in ALLOWED_FUNCTIONS:
            return sqlite3.SQLITE_OK
        self._denied.append((action, arg2 if action == sqlite3.SQLITE_FUNCTION else arg1))
        return sqlite3.SQLITE_DENY

    def _past_deadline(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    # -- queries -------------------------------------------------------------------------------
    def execute(self, sql: str) -> QueryResult:
        """Run one statement and fetch its rows within the limits. Never raises on any string."""
        limits = self.limits
        if not isinstance(sql, str):
            return QueryResult((), (), error="the query is not text")
        if len(sql) > limits.max_sql_chars:
            return QueryResult(
                (), (), error=f"the query is {len(sql)} characters long; the limit is {limits.max_sql_chars}"
            )
        self._denied = []
        self._deadline = time.monotonic() + limits.timeout_s
        cursor = None
        try:
            cursor = self._conn.execute(sql)
            columns = tuple(str(d[0]) for d in cursor.description or ())
            rows: list[tuple[Any, ...]] = []
            size, truncated = 0, False
            while True:
                batch = cursor.fetchmany(_FETCH_BATCH)
                if not batch:
                    break
                for row in batch:
                    size += sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in row)
                    if len(rows) >= limits.max_rows or size > limits.max_bytes:
                        truncated = True
                        break
                    rows.append(tuple(row))
                if truncated:
                    break
            return QueryResult(columns, tuple(rows), truncated=truncated)
        except Exception as exc:  # untrusted input: every failure becomes an observation
            return self._failure(sql, exc)
        finally:
            if cursor is not None:
                with contextlib.suppress(Exception):  # closing a failed cursor
                    cursor.close()

    def _failure(self, sql: str, exc: Exception) -> QueryResult:
        message = str(exc) or type(exc).__name__
        if self._denied:
            action, what = self._denied[0]
            if action == sqlite3.SQLITE_FUNCTION:
                reason = f"the function {what}() is not allowed"
            else:
                keyword = leading_keyword(sql) or "this statement"
                reason = f"{keyword} is not allowed"
            return QueryResult(
                (),
                (),
                error=f"not authorized: {reason}; the database is read-only and only SELECT queries run",
                refused=True,
            )
        if isinstance(exc, sqlite3.OperationalError) and "interrupt" in message.lower():
            return QueryResult(
                (),
                (),
                error=f"interrupted: the query exceeded the time limit of {self.limits.timeout_s:g} s",
                timed_out=True,
            )
        if isinstance(exc, MemoryError) or "out of memory" in message.lower():
            return QueryResult(
                (),
                (),
                error=f"out of memory: the query needed more than the memory limit of {HEAP_LIMIT_BYTES >> 20} MiB",
            )
        if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in message:
            message = "only one SQL statement can be run per action"
        elif isinstance(exc, sqlite3.ProgrammingError) and "bindings" in message:
            message = "query parameters (?) are not supported; write the values into the query"
        return QueryResult((), (), error=message)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with contextlib.suppress(Exception):
            self._conn.close()

    def __enter__(self) -> ReadOnlyDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_readonly(path: Path) -> sqlite3.Connection:
    uri = path.resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.text_factory = _decode
    return conn


@functools.lru_cache(maxsize=256)
def _read_schema(path: str, _mtime_ns: int, _size: int) -> tuple[TableInfo, ...]:
    """The schema of a database file (cached per file version)."""
    conn = _open_readonly(Path(path))
    try:
        names = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
            )
        ]
        tables = []
        for name in names:
            quoted = '"' + name.replace('"', '""') + '"'
            refs = {
                str(r[3]): f"{r[2]}.{r[4]}" if r[4] is not None else str(r[2])
                for r in conn.execute(f"PRAGMA foreign_key_list({quoted})")
            }
            info = list(conn.execute(f"PRAGMA table_info({quoted})"))
            columns = tuple(ColumnInfo(str(r[1]), str(r[2] or ""), refs.get(str(r[1]))) for r in info)
            pk = tuple(str(r[1]) for r in sorted((r for r in info if r[5]), key=lambda r: r[5]))
            tables.append(TableInfo(name, columns, pk))
        return tuple(tables)
    finally:
        conn.close()


def _cell(value: Any, width: int) -> str:
    text = "NULL" if value is None else value.hex() if isinstance(value, bytes) else str(value)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= width else text[: width - 3] + "..."


def format_result(result: QueryResult, *, max_rows: int = 20, max_chars: int = 2000, cell_width: int = 60) -> str:
    """The observation text of ``result``: an error line, or a header and up to ``max_rows`` rows
    (``|``-separated), then a line with the row count, cut to ``max_chars`` characters."""
    if result.error is not None:
        return f"Error executing query: {result.error}"
    if not result.columns:
        return "The query returned no result set."
    lines = [" | ".join(_cell(c, cell_width) for c in result.columns)]
    lines += [" | ".join(_cell(v, cell_width) for v in row) for row in result.rows[:max_rows]]
    n = len(result.rows)
    if result.truncated:
        footer = f"({n} rows fetched; the result was cut off at the row/size limit, more rows exist)"
    elif n > max_rows:
        footer = f"({n} rows; showing the first {max_rows})"
    else:
        footer = f"({n} row{'s' if n != 1 else ''})"
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[:max_chars] + "\n... (display cut)"
    return f"{text}\n{footer}"


def describe_schema(tables: Sequence[TableInfo]) -> str:
    """One line per table: ``name(col TYPE, col -> other.col, ...)``."""
    out = []
    for table in tables:
        cols = []
        for col in table.columns:
            text = f"{col.name} {col.type}".strip()
            if col.name in table.primary_key:
                text += " PK"
            if col.references:
                text += f" -> {col.references}"
            cols.append(text)
        out.append(f"{table.name}({', '.join(cols)})")
    return "\n".join(out)
