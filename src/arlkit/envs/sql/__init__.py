"""Text-to-SQL over generated SQLite databases: the environment (``env.py``), its questions
(``data.py``), databases (``databases.py``), reward (``reward.py``) and the read-only query guard
(``safe.py``). Importing this package registers the ``sql`` environment."""

from arlkit.envs.sql.env import SqlConfig, SqlEnv

__all__ = ["SqlConfig", "SqlEnv"]
