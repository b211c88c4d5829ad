"""The five databases of arlkit's own SQL task set, built from the shipped SQL scripts.

The scripts (``arlkit/data/sql/databases/<db>.sql.gz``, written by
``scripts/data/make_sql_databases.py`` from a fixed seed) are checked against the SHA-256 pinned in
:data:`SCRIPT_SHA256`; the SQLite files are built from them on first use into a cache directory,
under a name that contains the script's hash, and are only ever opened read-only afterwards.

Databases (rows per table, approximately):

- ``university``: department 8, instructor 48, student 600, course 72, enrollment ~3,000
- ``retail``: customer 400, category 10, product 150, orders 1,500, order_item ~3,700
- ``flights``: airport 24, airline 8, flight 900, passenger 700, booking ~3,000
- ``library``: branch 6, author 90, book 400, member 300, loan 2,000
- ``music``: artist 60, album 180, track 1,800, playlist 40, playlist_track ~1,100
"""

from __future__ import annotations

import gzip
import hashlib
import os
import sqlite3
import tempfile
from importlib import resources
from pathlib import Path

__all__ = ["DATABASES", "SCRIPT_SHA256", "build_database", "database_script", "default_cache_dir", "ensure_databases"]

SCRIPT_SHA256: dict[str, str] = {
    "university": "3b9f10f323d98162d3e36a01bd326e3e5d914d82030a2a1706898abc5894550b",
    "retail": "28a54ccdba19a424c844f22c99d2edd6fa448306a197151ebef7bbea3915f599",
    "flights": "f71c18b356883f1313bc2f693153dfa59950d16e0f71985bf6854547ac734d61",
    "library": "19f32fa5effe569d5c46f9a0e1d96f8cdc0adbe3387a2c30ad5b56ac147abc21",
    "music": "0eaa5e6649b91bbf30071d6db7687cd4aeca1049275dd7c0536f6394074f8cce",
}
"""SHA-256 of each database's SQL script; a change to the generator must update these on purpose."""

DATABASES = tuple(SCRIPT_SHA256)


def database_script(db_id: str) -> str:
    """The shipped SQL script (schema and data) of database ``db_id``."""
    if db_id not in SCRIPT_SHA256:
        raise ValueError(f"unknown database {db_id!r}; valid choices: {', '.join(DATABASES)}")
    packed = resources.files("arlkit.data").joinpath("sql", "databases", f"{db_id}.sql.gz").read_bytes()
    return gzip.decompress(packed).decode("utf-8")


def default_cache_dir() -> Path:
    """``$ARLKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/arlkit``, else ``~/.cache/arlkit``."""
    if os.environ.get("ARLKIT_CACHE_DIR"):
        return Path(os.environ["ARLKIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "arlkit"


def build_database(db_id: str, directory: str | Path) -> Path:
    """The SQLite file of ``db_id`` under ``directory``, built from its script unless a file with
    the script's pinned hash in its name is already there. The script is checked against the pinned
    hash before a build. Safe when several processes build at once (each writes a private temporary
    file and renames it into place)."""
    if db_id not in SCRIPT_SHA256:
        raise ValueError(f"unknown database {db_id!r}; valid choices: {', '.join(DATABASES)}")
    directory = Path(directory)
    path = directory / f"{db_id}-{SCRIPT_SHA256[db_id][:16]}.sqlite"
    if path.is_file():
        return path
    script = database_script(db_id)
    digest = hashlib.sha256(script.encode("utf-8")).hexdigest()
    if digest != SCRIPT_SHA256[db_id]:
        raise RuntimeError(
            f"the shipped script of database {db_id!r} has SHA-256 {digest}, not the pinned "
            f"{SCRIPT_SHA256[db_id]}: regenerate it (scripts/data/make_sql_databases.py) or update SCRIPT_SHA256 on purpose"
        )
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{db_id}-", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.executescript(script)
            conn.commit()
        finally:
            conn.close()
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def ensure_databases(directory: str | Path | None = None) -> dict[str, Path]:
    """Build (or find) every shipped database; returns ``db_id -> path``.

    Without ``directory`` the default cache (``default_cache_dir() / "sql"``) is used, or, when it
    cannot be written, ``<tmp>/arlkit-<uid>/sql``.
    """
    if directory is not None:
        return {db_id: build_database(db_id, directory) for db_id in DATABASES}
    try:
        return {db_id: build_database(db_id, default_cache_dir() / "sql") for db_id in DATABASES}
    except OSError:
        fallback = Path(tempfile.gettempdir()) / f"arlkit-{os.getuid()}" / "sql"
        return {db_id: build_database(db_id, fallback) for db_id in DATABASES}
