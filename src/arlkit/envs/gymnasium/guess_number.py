"""A small Gymnasium text game, ``arlkit/guess-number-v0``: the default of ``--env gymnasium`` and
the example of what ``from_gymnasium`` accepts (``docs/integrations.md``).

The environment picks a number from 1 to 100 at reset (from the reset seed); each action is a
guess written as text; the observation says ``higher``, ``lower`` or ``correct``. Reward 1 on the
right guess (terminated); at most 10 guesses (then truncated). Binary search needs 7 at most.
"""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium import spaces

__all__ = ["GuessNumberEnv"]


class GuessNumberEnv(gymnasium.Env):
    """Guess the hidden number from ``higher`` / ``lower`` hints."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, low: int = 1, high: int = 100, render_mode: str | None = None) -> None:
        self.low, self.high = low, high
        self.render_mode = render_mode
        self.observation_space = spaces.Text(max_length=200, charset=_CHARSET)
        self.action_space = spaces.Text(max_length=12, charset="0123456789 -")
        self._target = low
        self._last = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._target = int(self.np_random.integers(self.low, self.high + 1))
        self._last = f"I picked a number from {self.low} to {self.high}. Guess it."
        return self._last, {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        text = action.strip()
        if not text.lstrip("-").isdigit():
            self._last = f"{text[:20]!r} is not a number. Guess a number from {self.low} to {self.high}."
            return self._last, 0.0, False, False, {"success": False}
        guess = int(text)
        if guess == self._target:
            self._last = f"{guess} is correct."
            return self._last, 1.0, True, False, {"success": True}
        self._last = f"{guess} is too {'low' if guess < self._target else 'high'}: guess {'higher' if guess < self._target else 'lower'}."
        return self._last, 0.0, False, False, {"success": False}

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None


_CHARSET = "".join(chr(c) for c in range(32, 127))

gymnasium.register(id="arlkit/guess-number-v0", entry_point=GuessNumberEnv, max_episode_steps=10)
