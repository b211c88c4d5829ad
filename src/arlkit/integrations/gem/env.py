"""GEM environments as arlkit environments (``--env gem --env-arg id=game:GuessTheNumber-v0-hard``).

GEM (``gem-llm``, import name ``gem``) registers text environments (games, math, code, QA) under ids
like ``game:Sokoban-v0-easy``; ``gem.make(id, **kwargs)`` builds one, ``reset(seed)`` returns its
instruction and ``info["suffix"]`` (the board and what to do next), ``step(reply)`` parses the whole
reply (a game reads the ``\\boxed{...}`` in it) and returns Gymnasium's five values. The bridge
(:class:`GemEnv`, on :class:`arlkit.envs.bridge.SeededBridge`) puts that under arlkit's protocol:

- The instruction GEM's ``reset`` returns is the prompt's task-specific instruction; the first
  observation is the reset's ``suffix`` (the whole reset text when there is none); every later
  observation is the step's observation followed by its ``suffix`` while the game goes on, as
  GEM's own observation wrapper shows them.
- The whole reply reaches the game by default (``action_text=reply``: GEM's convention);
  ``action_text=action`` hands it the content of the reply's ``<action>`` tag only.
- A GEM game that reaches its own turn limit returns ``terminated`` *and* ``truncated`` with a
  partial reward: that is no success (the reward is kept, the observation ends with
  :data:`~arlkit.envs.bridge.TRUNCATED_NOTE`). A termination without ``truncated`` is a success
  when the environment's ``info["success"]`` says so, else when the episode's return (the sum of
  its rewards) reaches ``success_return``, 1 by default: GEM's ``success_reward``, which a game's
  milestone rewards add up to when it is solved (a mine hit, a 2048 board with no move left or a
  format error ends a game with less).
- T_max is ``t_max`` when given, else the game's ``max_turns``. With ``set_max_turns`` (default)
  the announced budget becomes the game's ``max_turns`` before each reset, so GEM's instruction
  ("within N turns") and the turn at which it ends the game agree with the budget arlkit announces;
  hidden budgets leave the game its own limit. Games that draw their limit at reset (the
  ``-random`` ids) keep theirs, with a warning.
- GEM's games draw from Python's and NumPy's global generators and reseed them at reset. Every call
  into GEM runs with the bridge's own pair of generator states swapped in (under a lock), so
  trajectories neither share draws nor disturb the caller's generators, and a task (a reset seed)
  with the same moves replays the same game: state keys and ``restore`` work.
- An unknown id (with GEM's closest ids), a module that does not import or a constructor that
  raises is one line (``arlkit eval`` exits 2); an exception in ``step`` is an invalid action.
"""

from __future__ import annotations

import difflib
import importlib
import json
import logging
import random
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from arlkit.config import ConfigError
from arlkit.envs.bridge import ACTION_TEXTS, SeededBridge, one_line, reported_success, warn_once
from arlkit.envs.protocol import PromptText
from arlkit.envs.registry import register_env
from arlkit.extras import install_hint

__all__ = ["DEFAULT_ID", "GemConfig", "GemEnv", "from_gem", "load_gem"]

DEFAULT_ID = "game:GuessTheNumber-v0-hard"
DEFAULT_T_MAX = 50
INSTALL_HINT = (f"the gem adapter needs gem-llm: {install_hint('gem', make_target='install-extras')} "
                "(beside the math extra: pip install --no-deps gem-llm==0.1.0 nltk==3.9.1)")


def load_gem() -> Any:
    """``import gem``, with a one-line hint when it is missing. GEM's ``__init__`` calls
    ``logging.basicConfig(level=INFO)``: the handler and level it adds to the root logger are taken
    back, so importing it leaves arlkit's logging as it was."""
    if "gem" in sys.modules:
        return sys.modules["gem"]
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import gem
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)
    return gem


def gem_registry() -> Mapping[str, Any]:
    """GEM's registered ids and their specs."""
    load_gem()
    from gem.envs.registration import ENV_REGISTRY

    return ENV_REGISTRY


@dataclass(frozen=True)
class GemConfig:
    """Configuration of the GEM adapter.

    Attributes:
        id: a GEM id (``game:GuessTheNumber-v0-hard``, ``game:Sokoban-v0-easy``, ...).
        kwargs: GEM constructor options as a JSON object (``{"max_number": 100}``).
        module: a module to import first, for ids it registers itself (``my_pkg.gem_envs``).
        t_max: the full turn budget (0: the game's ``max_turns``, else 50).
        set_max_turns: the announced budget becomes the game's ``max_turns`` (module docstring).
        success_return: without ``info["success"]``, a termination is a success when the episode's
            return reaches this.
        action_text: ``reply``: the whole reply reaches the game (GEM's convention); ``action``:
            the content of its ``<action>`` tag.
        instruction: the prompt's instruction (default: the one GEM's reset returns).
        action_format: how to write an action (default: a line about GEM's ``\\boxed{...}``).
        n_tasks: seeds per split.
    """

    id: str = DEFAULT_ID
    kwargs: str = ""
    module: str = ""
    t_max: int = 0
    set_max_turns: bool = True
    success_return: float = 1.0
    action_text: str = "reply"
    instruction: str = ""
    action_format: str = ""
    n_tasks: int = 1000

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError(f"give the GEM id: --env-arg id=NAME (for example {DEFAULT_ID})")
        if self.t_max < 0 or self.n_tasks < 1:
            raise ValueError("t_max must be >= 0 and n_tasks >= 1")
        if self.action_text not in ACTION_TEXTS:
            raise ValueError(f"unknown action_text {self.action_text!r}; valid choices: {', '.join(ACTION_TEXTS)}")
        self.options()

    def options(self) -> dict[str, Any]:
        """``kwargs`` as a dict (a one-line ``ValueError`` when it is not a JSON object)."""
        if not self.kwargs:
            return {}
        try:
            value = json.loads(self.kwargs)
        except ValueError as exc:
            raise ValueError(f"kwargs must be a JSON object such as '{{\"max_turns\": 10}}': {one_line(exc)}") from None
        if not isinstance(value, dict):
            raise ValueError(f"kwargs must be a JSON object such as '{{\"max_turns\": 10}}', got {self.kwargs!r}")
        return value


_rng_lock = threading.RLock()


class _GlobalRng:
    """One bridge's states of Python's and NumPy's global generators (module docstring)."""

    def __init__(self) -> None:
        self.state: tuple[Any, Any] | None = None

    @contextmanager
    def scope(self) -> Iterator[None]:
        with _rng_lock:
            outer = random.getstate(), np.random.get_state()
            if self.state is not None:
                random.setstate(self.state[0])
                np.random.set_state(self.state[1])
            try:
                yield
            finally:
                self.state = random.getstate(), np.random.get_state()
                random.setstate(outer[0])
                np.random.set_state(outer[1])


def _make_gem(config: GemConfig, rng: _GlobalRng) -> Any:
    """``gem.make(config.id, **kwargs)``; whatever goes wrong is a one-line ``ValueError``."""
    gem = load_gem()
    if config.module:
        try:
            importlib.import_module(config.module)
        except Exception as exc:  # noqa: BLE001 - user code: one line
            raise ValueError(f"module={config.module}: {one_line(exc)}") from None
    registry = gem_registry()
    if config.id not in registry:
        close = difflib.get_close_matches(config.id, list(registry), n=4, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else f"for example {DEFAULT_ID}"
        raise ValueError(f"unknown GEM id {config.id!r}; {hint} ({len(registry)} ids are registered: "
                         "python -c 'import gem; gem.print_envs()' lists them)")
    try:
        with rng.scope():
            return gem.make(config.id, **config.options())
    except Exception as exc:  # noqa: BLE001 - foreign code: one line, never a traceback
        raise ValueError(f"cannot make the GEM environment {config.id!r}: {one_line(exc)}") from None


class GemEnv(SeededBridge):
    """A GEM environment behind arlkit's protocol (module docstring). ``env`` is a GEM environment
    to wrap instead of making ``config.id`` (the caller's: reset as it is, never made afresh)."""

    name = "gem"

    def __init__(self, config: GemConfig, env: Any | None = None) -> None:
        self.config = config
        self._rng = _GlobalRng()
        super().__init__(config.id, _make_gem(config, self._rng) if env is None else env, owned=env is None,
                         n_tasks=config.n_tasks, action_text=config.action_text)
        try:
            self._native_turns = self._game_turns()
            self.t_max = self._read_t_max()
        except BaseException:
            self._abandon()
            raise
        self._instruction = ""
        self._return = 0.0

    def _game_turns(self) -> int | None:
        turns = getattr(self._env, "max_turns", None)
        return turns if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0 else None

    def _read_t_max(self) -> int:
        if self.config.t_max:
            return self.config.t_max
        spec = gem_registry().get(self.config.id)
        declared = self.config.options().get("max_turns", getattr(spec, "kwargs", {}).get("max_turns"))
        if isinstance(declared, int) and declared > 0:
            return declared
        if self._native_turns is not None:  # drawn at reset: the one the first test task (seed 0) draws
            with self._rng.scope():
                self._env.reset(seed=0)
            self._native_turns = self._game_turns() or self._native_turns
            warn_once(("t_max", self.config.id), f"{self.config.id} draws its turn limit per game; T_max is "
                      f"{self._native_turns}, the first test task's (give --env-arg t_max=N)")
            return self._native_turns
        warn_once(("t_max", self.config.id), f"{self.config.id} has no max_turns; T_max is {DEFAULT_T_MAX} "
                  "(give --env-arg t_max=N)")
        return DEFAULT_T_MAX

    # -- the bridge's hooks ----------------------------------------------------------------------

    def _make(self) -> Any:
        self._rng = _GlobalRng()
        return _make_gem(self.config, self._rng)

    def _start(self, seed: int) -> str:
        env, budget = self._env, self._budget
        limit = self._native_turns if budget is None else budget
        if self.config.set_max_turns and limit is not None and self._game_turns() is not None:
            env.max_turns = limit
        with self._rng.scope():
            observation, info = env.reset(seed=seed)
        self._return = 0.0
        if self.config.set_max_turns and budget is not None and self._game_turns() not in (None, budget):
            warn_once(("budget", self.config.id), f"{self.config.id} draws its own turn limit at reset: the game "
                      f"ends at its max_turns ({self._game_turns()}), not at the announced budget")
        self._instruction = str(observation)
        suffix = info.get("suffix") if isinstance(info, Mapping) else None
        return str(suffix) if suffix else self._instruction

    def _advance(self, value: Any) -> tuple[str, float, bool, bool, Any]:
        with self._rng.scope():
            observation, reward, terminated, truncated, info = self._env.step(value)
        self._return += float(reward)
        text = str(observation)
        suffix = info.get("suffix") if isinstance(info, Mapping) else None
        if suffix and not (terminated or truncated):
            text = f"{text}\n{suffix}"
        return text, reward, terminated, truncated, info

    def _solved(self, reward: float, info: Any) -> bool:
        flag = reported_success(info)
        return flag if flag is not None else self._return >= self.config.success_return - 1e-9

    @property
    def episode_return(self) -> float:
        """The sum of the rewards GEM gave since reset."""
        return self._return

    def prompt_text(self) -> PromptText:
        instruction = self.config.instruction or self._instruction or f"Play the GEM environment {self.config.id}."
        if self.config.action_format:
            action_format = self.config.action_format
        elif self.config.action_text == "reply":
            action_format = ("The game reads your whole reply, as GEM does: write your move the way the instruction "
                             "says (GEM's games take the last \\boxed{...}), for example <action>\\boxed{...}</action>.")
        else:
            action_format = ("Write your move the way the instruction says (GEM's games take \\boxed{...}) inside "
                             "the action tags, for example <action>\\boxed{...}</action>; only the tag's content "
                             "reaches the game.")
        return PromptText(instruction, action_format)


def from_gem(id_or_env: str | Any = DEFAULT_ID, **config: Any) -> GemEnv:
    """An arlkit environment for a GEM id or instance (:class:`GemConfig` options)."""
    if isinstance(id_or_env, str):
        return GemEnv(GemConfig(id=id_or_env, **config))
    name = getattr(id_or_env, "env_id", None) or type(id_or_env).__name__
    return GemEnv(GemConfig(id=str(name), **config), env=id_or_env)


@register_env("gem", GemConfig)
def _make_gem_env(config: GemConfig) -> GemEnv:
    return GemEnv(config)
