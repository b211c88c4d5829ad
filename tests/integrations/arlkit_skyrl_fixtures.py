"""Fixtures of tests/integrations/test_skyrl_gym.py, importable by name (the test puts this folder on
``sys.path`` and ``PYTHONPATH``): scripted policies for skyrl-gym's ``text2sql`` and
``gsm8k_multi_turn``, and small skyrl-gym environments registered on import (``counting-gsm8k``
logs every make and close; ``raising`` raises where it is told to)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
from skyrl_gym.envs.gsm8k.multi_turn_env import GSM8kMultiTurnEnv

from arlkit.policies.protocol import Reply, Request

SQL_SYSTEM = ("Answer the question with one SQL query over the database. Think in <think>..</think>; run a query "
              "with <sql>..</sql> to look at the data; give the final query as <solution>..</solution>.")
QUESTIONS = [  # (question, gold query, a wrong query)
    ("How many users are there?", "SELECT count(*) FROM users", "SELECT count(*) FROM orders"),
    ("List the names of users older than 30.", "SELECT name FROM users WHERE age > 30",
     "SELECT name FROM users WHERE age < 30"),
    ("What is the total amount of all orders?", "SELECT sum(amount) FROM orders", "SELECT max(amount) FROM orders"),
]


def make_sql_db(root: Path) -> Path:
    """``root/spider/database/shop/shop.sqlite``, the layout ``text2sql`` reads for ``data: spider``; ``root``."""
    folder = root / "spider" / "database" / "shop"
    folder.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(folder / "shop.sqlite") as db:
        db.executescript("""
            CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, age INTEGER);
            CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, amount REAL);
            INSERT INTO users VALUES (1, 'ada', 36), (2, 'bob', 25), (3, 'cy', 41);
            INSERT INTO orders VALUES (1, 1, 9.5), (2, 1, 20.0), (3, 3, 4.25);
        """)
    return root


def sql_rows() -> list[dict[str, Any]]:
    """SkyRL ``text2sql`` dataset rows for :data:`QUESTIONS`."""
    return [{"prompt": [{"role": "system", "content": SQL_SYSTEM}, {"role": "user", "content": question}],
             "env_class": "text2sql", "db_id": "shop", "data": "spider",
             "reward_spec": {"method": "rule", "ground_truth": gold}, "extra_info": {"index": i}}
            for i, (question, gold, _) in enumerate(QUESTIONS)]


def gsm8k_rows(n: int = 2) -> list[dict[str, Any]]:
    return [{"prompt": [{"role": "user", "content": f"What is 40 + {i + 2}?"}], "env_class": "gsm8k_multi_turn",
             "reward_spec": {"method": "rule", "ground_truth": str(42 + i)}, "extra_info": {"index": i}}
            for i in range(n)]


def _question(request: Request) -> int:
    first = next(m["content"] for m in request.messages if m["role"] == "user")
    return next(i for i, (q, _, _) in enumerate(QUESTIONS) if q in first)


class SQLPolicy:
    """Explores 0-3 turns with ``<sql>`` queries, then gives a solution, right with probability 0.6;
    all drawn from the trajectory's seed. Replies carry ``<think>``, which text2sql's reward needs."""

    name = "scripted-sql"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        replies = []
        for request in requests:
            rng = np.random.default_rng(request.seed & 0xFFFFFFFF)
            explore, right = int(rng.integers(4)), bool(rng.random() < 0.6)
            _, gold, wrong = QUESTIONS[_question(request)]
            if request.turn < explore:
                text = "<think>look at the users</think><action><sql>SELECT * FROM users</sql></action>"
            else:
                text = f"<think>answer</think><action><solution>{gold if right else wrong}</solution></action>"
            replies.append(Reply(text))
        return replies


class GSM8kPolicy:
    """Writes a wrong answer (``#### 0``) every turn; with ``last-right``, the right one on the last
    announced turn of odd seeds."""

    def __init__(self, mode: str | None) -> None:
        self.name, self.mode = f"gsm8k-{mode or 'wrong'}", mode

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        replies = []
        for request in requests:
            first = next(m["content"] for m in request.messages if m["role"] == "user")
            right = str(40 + int(first.split("+ ")[1].rstrip("?")))
            last = request.remaining == 1 and self.mode == "last-right" and request.seed % 2 == 1
            replies.append(Reply(f"<think>sum</think><action>#### {right if last else 0}</action>"))
        return replies


def sql_policy(arg: str | None, sampling: Any, backend: Any) -> SQLPolicy:
    return SQLPolicy()


def gsm8k_policy(arg: str | None, sampling: Any, backend: Any) -> GSM8kPolicy:
    return GSM8kPolicy(arg)


class CountingGSM8k(GSM8kMultiTurnEnv):
    """``gsm8k_multi_turn`` that appends ``made`` and ``closed`` lines to ``env_config.log``."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__(env_config, extras or {})
        self.log = str(env_config["log"])
        self._write("made")

    def _write(self, what: str) -> None:
        with open(self.log, "a", encoding="utf-8") as f:
            f.write(f"{what} {os.getpid()} {id(self)}\n")

    def close(self) -> None:
        self._write("closed")


class Raising(BaseTextEnv):
    """Raises in ``init`` when the row says ``fail: init``, in ``step`` on a reply holding ``boom``."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.fail = (extras or {}).get("fail")
        self.max_turns = 3

    def init(self, prompt: Any) -> Any:
        if self.fail == "init":
            raise RuntimeError("no sandbox\nfor this task")
        return prompt, {}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        if "boom" in action:
            raise KeyError("boom")
        return BaseTextEnvStepOutput(observations=[{"role": "user", "content": "ok"}], reward=0.0,
                                     done=self.turns >= self.max_turns, metadata={})


for _id, _cls in (("counting-gsm8k", CountingGSM8k), ("raising", Raising)):
    if _id not in skyrl_gym.registry:
        skyrl_gym.register(id=_id, entry_point=_cls)
