"""A multi-turn verifiers (v1) environment for the tests: guess a number with higher/lower hints.

A taskset id of its own (``vf_guess``, importable with this folder on ``sys.path``): the taskset
and the ``Env`` whose ``run()`` is the game loop. The task's ``@vf.reward`` is 1 for a found
number, else a partial reward for the closest guess (``0.5 * closeness``). ``VF_GUESS_LOG`` names
a file that gets one line per ``start()``/``stop()``, to count them.
"""

from __future__ import annotations

import os
import re

import verifiers.v1 as vf

__all__ = ["GuessEnv", "GuessTaskset"]

SYSTEM = "Guess the secret integer. After each guess you hear 'higher' or 'lower'. Reply with the number."


def _log(event: str) -> None:
    path = os.environ.get("VF_GUESS_LOG")
    if path:
        with open(path, "a") as f:
            f.write(event + "\n")


class GuessConfig(vf.TasksetConfig):
    n: int = 8
    high: int = 16
    fail_on: int = -1
    """A guess that makes the game raise (to test foreign exceptions)."""


class GuessData(vf.TaskData):
    secret: int
    high: int
    fail_on: int = -1


class GuessTask(vf.Task[GuessData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def found(self, trace) -> float:
        if trace.info.get("won"):
            return 1.0
        best = trace.info.get("best")
        return 0.0 if best is None else 0.5 * (1 - abs(best - self.data.secret) / self.data.high)


class GuessTaskset(vf.Taskset[GuessTask, GuessConfig]):
    def load(self):
        for i in range(self.config.n):
            secret = (7 * i + 3) % self.config.high + 1
            yield GuessTask(GuessData(name=f"guess{i}", prompt=f"The number is between 1 and {self.config.high}.",
                                      system_prompt=SYSTEM, secret=secret, high=self.config.high,
                                      fail_on=self.config.fail_on), self.config.task)


class GuessEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(max_turns=6)


class GuessEnv(vf.Env[GuessEnvConfig]):
    async def start(self) -> None:
        _log("start")

    async def stop(self) -> None:
        _log("stop")

    async def run(self, task, agents):
        data = task.data
        async with agents.player.interaction(task) as game:
            segment = await game.turn()
            while not segment.terminated:
                numbers = re.findall(r"-?\d+", segment.last_reply.split("<action>")[-1])
                if not numbers:
                    segment = await game.turn("Reply with a number.")
                    continue
                guess = int(numbers[0])
                if guess == data.fail_on:
                    raise RuntimeError(f"the game cannot take {guess}")
                best = game.trace.info.get("best")
                if best is None or abs(guess - data.secret) < abs(best - data.secret):
                    game.trace.info["best"] = guess
                if guess == data.secret:
                    game.trace.info["won"] = True
                    break
                segment = await game.turn("higher" if guess < data.secret else "lower")


class Bisect:
    """A scripted arlkit policy for the game: binary search on the hints (``--policy vf_guess:bisect``);
    ``--policy vf_guess:bisect:1`` always guesses 1 (a game that ends at the turn limit)."""

    context_length = None

    def __init__(self, fixed: str | None) -> None:
        self.fixed = fixed
        self.name = f"bisect{fixed or ''}"

    def _guess(self, messages) -> int:
        lo, hi, last = 1, 16, None
        for message in messages:
            role, content = message["role"], message["content"]
            if role == "assistant":
                found = re.findall(r"<action>(-?\d+)</action>", content)
                last = int(found[-1]) if found else last
            elif role == "user" and last is not None:
                if content.startswith("higher"):
                    lo = last + 1
                elif content.startswith("lower"):
                    hi = last - 1
        return (lo + hi) // 2

    def generate(self, requests):
        from arlkit.policies.protocol import Reply

        return [Reply(f"<think>bisect</think><action>{self.fixed or self._guess(r.messages)}</action>")
                for r in requests]


def bisect(arg, sampling, backend):
    return Bisect(arg)
