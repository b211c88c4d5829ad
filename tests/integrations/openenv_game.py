"""A small OpenEnv game written with OpenEnv's own server API (no arlkit code), and scripted
policies for it, for tests/integrations/test_openenv.py.

The game: collect two coins within the game's own limit of three turns. ``take`` collects one,
``wait`` does nothing. Two coins end the game solved (reward 1); the third turn without them ends
it truncated (the observation's ``truncated`` field: OpenEnv sends no ``metadata``) with the
partial reward of the coins taken (0.5 for one). ``reset``
takes the announced budget and shows it. ``python openenv_game.py PORT`` serves it (at most 4
sessions); ``GET /counts`` reports the sessions opened and closed.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

LIMIT = 3
COUNTS = {"opened": 0, "closed": 0}
_lock = threading.Lock()


class CoinAction(Action):
    move: str


class CoinObservation(Observation):
    board: str = ""
    truncated: bool = False
    admissible_actions: list[str] = ["take", "wait"]


class CoinGame(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.coins = self.turns = 0
        with _lock:
            COUNTS["opened"] += 1

    def reset(self, seed: int | None = None, episode_id: str | None = None, budget: int | None = None,
              **kwargs: Any) -> CoinObservation:
        self.coins = self.turns = 0
        return CoinObservation(board=f"coins 0/2, turn 0/{LIMIT}, announced budget {budget}")

    def step(self, action: CoinAction, timeout_s: float | None = None, **kwargs: Any) -> CoinObservation:
        if action.move not in ("take", "wait"):
            raise ValueError(f"unknown move {action.move!r}")
        self.turns += 1
        self.coins += action.move == "take"
        solved, out_of_turns = self.coins >= 2, self.turns >= LIMIT
        done = solved or out_of_turns
        return CoinObservation(board=f"coins {self.coins}/2, turn {self.turns}/{LIMIT}", done=done,
                               reward=self.coins / 2 if done else 0.0, truncated=out_of_turns and not solved)

    @property
    def state(self) -> State:
        return State(step_count=self.turns)

    def close(self) -> None:
        with _lock:
            COUNTS["closed"] += 1


class Scripted:
    """``greedy`` always takes (solves at turn 2); ``once`` takes at the first turn, then waits
    (the game truncates it at turn 3 with a reward of 0.5)."""

    context_length = None

    def __init__(self, kind: str) -> None:
        self.kind = self.name = kind

    def generate(self, requests: Any) -> list[Any]:
        from arlkit.policies.protocol import Reply

        moves = []
        for request in requests:
            move = "take" if self.kind == "greedy" or request.turn == 0 else "wait"
            moves.append(Reply(f"<think>{self.kind}</think><action>{move}</action>"))
        return moves


def scripted(arg: str | None, sampling: Any = None, backend: Any = None) -> Scripted:
    return Scripted(arg or "greedy")


def main(fd: int) -> None:
    """Serve on the listening socket ``fd`` the test bound and passed down (it accepts from the start)."""
    import uvicorn

    app = create_fastapi_app(CoinGame, CoinAction, CoinObservation, max_concurrent_envs=4)
    app.get("/counts")(lambda: dict(COUNTS))
    uvicorn.run(app, fd=fd, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]))
