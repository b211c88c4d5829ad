"""Fixtures of tests/integrations/test_gem.py, importable by the ``arlkit eval`` it runs in a subprocess
(``PYTHONPATH`` holds this folder): scripted policies for GEM's GuessTheNumber, and small GEM
environments registered with GEM's own ``register`` that count what the bridge does to them."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import gem
import numpy as np
from gem.envs.registration import ENV_REGISTRY

from arlkit.policies.protocol import Reply, Request

COUNTS: Counter[str] = Counter()
LOG_ENV = "ARLKIT_TEST_GEM_LOG"  # a file each environment's construction and close() are appended to

_RANGE = re.compile(r"between (\d+) and (\d+)")
_HINT = re.compile(r"you guessed (\d+), and the target number is (higher|lower)")


class Bisect:
    """Searches GuessTheNumber's range from the hints it reads in the chat (never the answer): each
    guess is drawn from the middle ``spread`` of the numbers still possible, with the trajectory's
    policy seed, so samples of one task differ; ``spread=0`` is bisection (a coin between two middle numbers)."""

    context_length = None

    def __init__(self, spread: float = 0.5) -> None:
        self.spread = spread
        self.name = f"bisect-{spread:g}"

    def guess(self, request: Request) -> int:
        system = next((m["content"] for m in request.messages if m["role"] == "system"), "")
        found = _RANGE.search(system)
        low, high = (int(found.group(1)), int(found.group(2))) if found else (1, 100)
        for message in request.messages:
            if message["role"] == "user":
                for number, way in _HINT.findall(message["content"] or ""):
                    if way == "higher":
                        low = max(low, int(number) + 1)
                    else:
                        high = min(high, int(number) - 1)
        margin = int((high - low) * (1 - self.spread) / 2)
        rng = np.random.default_rng([request.seed & 0xFFFFFFFF, request.turn])
        return int(rng.integers(low + margin, max(low + margin, high - margin) + 1))

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        return [Reply(f"<think>narrowing the range</think><action>\\boxed{{{self.guess(r)}}}</action>")
                for r in requests]


def bisect(arg: str | None, sampling: Any, backend: Any) -> Bisect:
    return Bisect(float(arg) if arg else 0.5)


class Stubborn:
    """Guesses the same number every turn."""

    name = "stubborn"
    context_length = None

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        return [Reply("<action>\\boxed{1}</action>") for _ in requests]


def stubborn(arg: str | None, sampling: Any, backend: Any) -> Stubborn:
    return Stubborn()


def _log(event: str) -> None:
    COUNTS[event] += 1
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{event}\n")


class Milestones(gem.Env):
    """``\\boxed{go}`` earns 0.5, and the second one ends the game (return 1: solved);
    ``\\boxed{stop}`` ends it with 0.25 more; ``\\boxed{boom}`` raises; anything else earns
    nothing. Its own turn limit ends it GEM's way: terminated and truncated, reward 0.25."""

    def __init__(self, max_turns: int = 3) -> None:
        super().__init__()
        _log("made")
        self.max_turns = max_turns
        self.turns = self.goes = 0
        self.seeds: list[int | None] = []
        self.limits: list[int] = []

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.turns = self.goes = 0
        self.seeds.append(seed)
        self.limits.append(self.max_turns)
        return f"Say go twice within {self.max_turns} turns.", {"suffix": "Your move."}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if "\\boxed{boom}" in action:
            raise RuntimeError("the game\nbroke")
        self.turns += 1
        info = {"suffix": f"Moves so far: {self.turns}."}
        if "\\boxed{go}" in action:
            self.goes += 1
            if self.goes == 2:
                return "Solved.", 0.5, True, False, info
            reward = 0.5
        elif "\\boxed{stop}" in action:
            return "Stopped.", 0.25, True, False, info
        else:
            reward = 0.0
        if self.turns >= self.max_turns:
            return "You have reached the maximum number of turns.", 0.25, True, True, info
        return f"Turn {self.turns}.", reward, False, False, info

    def close(self) -> None:
        _log("closed")


class Broken(gem.Env):
    """A constructor that fails the way a GEM game without its word list does (several lines)."""

    def __init__(self, **_: Any) -> None:
        raise LookupError("\n*****\n  Resource words not found.\n  Please use the NLTK Downloader\n*****")

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        raise AssertionError("never built")

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        raise AssertionError("never built")


for _id, _cls in (("arlkit-test:Milestones-v0", Milestones), ("arlkit-test:Broken-v0", Broken)):
    if _id not in ENV_REGISTRY:
        gem.register(_id, _cls, max_turns=3) if _cls is Milestones else gem.register(_id, _cls)
