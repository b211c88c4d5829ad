"""Probe families for ``scripts/probe_hardening.py``: each module here exports ``FAMILIES``, a dict of
family name to a function that yields :class:`Family` results."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Family:
    """The result of one probe family."""

    name: str
    tried: int = 0
    contained: int = 0
    escapes: list[str] = field(default_factory=list)

    def check(self, case: str, ok: bool, detail: str = "") -> None:
        self.tried += 1
        if ok:
            self.contained += 1
        else:
            self.escapes.append(f"{case}: {detail}"[:400])
