"""Policies the ``arlkit study`` tests name as ``study_fixtures:NAME`` (``sys.path`` and ``PYTHONPATH`` hold
this folder): a SQL solver and a SQL explorer for an environment without step quality, and scripted judges.

The SQL policies read the task's reference query from the live environment (``Request.env``): they are
fixtures that make a known-better and a known-worse policy, not agents.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from arlkit.policies import Reply, Request


def _reference(request: Request) -> str:
    return str(request.env._task.payload["query"])


@dataclass
class SqlSolver:
    """Submits the reference query at once."""

    name: str = "sql-solver"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        return [Reply(f"<action>submit {_reference(r)}</action>") for r in requests]


@dataclass
class SqlExplorer:
    """Counts rows for two turns, then submits a query that returns nothing useful."""

    name: str = "sql-explorer"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        return [Reply("<action>SELECT count(*) FROM department</action>" if r.turn < 2
                      else "<action>submit SELECT 1</action>") for r in requests]


_ACTION = re.compile(r"ACTION TO JUDGE:\n(.*?)\n\nYour score", re.DOTALL)


@dataclass
class SubmitJudge:
    """Scores an action 10 when it submits, 3 otherwise, and answers in words for ``SELECT 1``."""

    name: str = "submit-judge"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        replies = []
        for r in requests:
            match = _ACTION.search(str(r.messages[-1]["content"]))
            action = match.group(1) if match else ""
            replies.append(Reply("no idea" if action.endswith("SELECT 1") else "10" if action.startswith("submit") else "3"))
        return replies


@dataclass
class FrozenJudge:
    """A FrozenLake judge that prefers moving right or down (towards the usual goal corner)."""

    name: str = "frozen-judge"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        out = []
        for r in requests:
            match = _ACTION.search(str(r.messages[-1]["content"]))
            action = (match.group(1) if match else "").strip().lower()
            out.append(Reply("8" if action in ("right", "down") else "2"))
        return out


def _factory(cls: type) -> Any:
    """A policy factory (``obj(arg, sampling, backend) -> Policy``) of a fixture class that takes no argument."""
    return lambda arg, sampling, backend: cls()


sql_solver = _factory(SqlSolver)
sql_explorer = _factory(SqlExplorer)
submit_judge = _factory(SubmitJudge)
frozen_judge = _factory(FrozenJudge)
