"""ALFWorld's TextWorld engine, imported only when an ``alfworld`` environment plays a game.

A game runs on TextWorld's ``PddlEnv`` wrapped as ALFWorld's ``AlfredTWEnv.init_env`` wraps it
(``AlfredDemangler`` without shuffling, ``AlfredInfos``; the same ``EnvInfos``: ``won``,
``admissible_commands``, ``extras=["gamefile"]``), without the Gym batch layer (one game per
environment; the rollout engine counts the turns). The planner expert is fast-downward's search from
the current state, the plan ALFWorld's ``AlfredExpert(expert_type="planner")`` reads, run in a child
process bounded in time and memory (:mod:`arlkit.envs.alfworld.planner`).

Three things about that stack shape this module:

- ``import alfworld`` creates ``$ALFWORLD_DATA`` at import time: :func:`modules` sets it first (to a
  temporary folder unless the user set it).
- TextWorld is not thread-safe: fast-downward's translator (run by every ``load`` and ``reset``)
  rewrites ``sys.argv``, sets module-level options and swaps ``sys.stdout``, and the text grammar's
  parser keeps its state in shared objects. Every call into it runs under :data:`_ENGINE_LOCK` (the
  engine's worker threads still keep the event loop free), and ``sys.argv`` is restored after each.
- Each ``PddlEnv`` loads its own copy of fast-downward's shared library (about 7 MB per game in
  memory, never unloaded). The rollout engine builds one environment per trajectory and keeps them
  all until the run ends, so games live in a bounded :class:`BackendPool`; an environment whose
  game was handed to another one gets it back by replaying its actions from the start.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arlkit.config import ConfigError
from arlkit.envs.alfworld import planner
from arlkit.extras import install_hint

__all__ = ["ALFWORLD_PIN", "INSTALL_HINT", "Backend", "BackendPool", "GameView", "POOL", "modules"]

ALFWORLD_PIN = "alfworld==0.4.2"
INSTALL_HINT = f"{install_hint('alfworld', make_target='install-extras')} ({ALFWORLD_PIN} builds fast-downward with cmake and g++)"
_ENGINE_LOCK = threading.Lock()
_MODULES: dict[str, Any] = {}


def modules() -> dict[str, Any]:
    """TextWorld's and ALFWorld's pieces, imported once; a :class:`ConfigError` naming the install
    command when they are missing."""
    if not _MODULES:
        os.environ.setdefault("ALFWORLD_DATA", os.path.join(tempfile.gettempdir(), "arlkit-alfworld-data"))
        try:
            import textworld
            from alfworld import info
            from alfworld.agents.environment import alfred_tw_env
            from textworld.envs import PddlEnv
        except ImportError as exc:
            raise ConfigError(f"the alfworld environment needs ALFWorld ({exc}); {INSTALL_HINT}") from None
        _MODULES.update(textworld=textworld, PddlEnv=PddlEnv, tw_env=alfred_tw_env, info=info)
    return _MODULES


@dataclass(frozen=True)
class GameView:
    """What the agent can see after a reset or a step.

    Attributes:
        feedback: TextWorld's text for the last command (the intro after a reset).
        admissible: the admissible commands, sorted (TextWorld's order), ``help`` included.
        won: the goal holds.
        facts: a digest of every PDDL fact that holds (the full state).
    """

    feedback: str
    admissible: tuple[str, ...]
    won: bool
    facts: str


def _view(state: Mapping[str, Any]) -> GameView:
    facts = sorted(str(f) for f in state["_facts"])
    digest = hashlib.sha256("\n".join(facts).encode("utf-8")).hexdigest()[:16]
    return GameView(str(state["feedback"]), tuple(state["admissible_commands"]), bool(state["won"]), digest)


class Backend:
    """One TextWorld game in memory, at the state reached by ``commands`` from its start."""

    def __init__(self) -> None:
        m = modules()
        infos = m["textworld"].EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        env = self._locked(m["PddlEnv"], infos)
        env = m["tw_env"].AlfredDemangler(env, shuffle=False)
        self.env = m["tw_env"].AlfredInfos(env)
        self.game_key: str | None = None
        self.commands: list[str] = []
        self.view: GameView | None = None
        self.owner: int | None = None  # id() of the environment holding it
        self.busy = False
        self.last_used = 0.0

    @staticmethod
    def _locked(call: Any, *args: Any) -> Any:
        argv = list(sys.argv)
        with _ENGINE_LOCK:
            try:
                return call(*args)
            finally:
                sys.argv[:] = argv

    def start(self, game_key: str, game: Mapping[str, Any]) -> GameView:
        """Load ``game`` (a ``game.tw-pddl`` document) unless it is loaded already, and reset it."""
        if self.game_key != game_key:
            self.game_key = None
            self._locked(self.env.load, dict(game))
            self.game_key = game_key
        self.view = _view(self._locked(self.env.reset))
        self.commands = []
        return self.view

    def step(self, command: str) -> GameView:
        """Execute one admissible command."""
        state, _, _ = self._locked(self.env.step, command)
        self.commands.append(command)
        self.view = _view(state)
        return self.view

    def sync(self, game_key: str, game: Mapping[str, Any], commands: Sequence[str]) -> GameView:
        """Bring the game to the state ``commands`` reach from its start (a replay when needed)."""
        k = len(self.commands)
        if self.game_key == game_key and self.view is not None and list(commands[:k]) == self.commands and k <= len(commands):
            view = self.view
        else:
            view, k = self.start(game_key, game), 0
        for command in commands[k:]:
            view = self.step(command)
        return view

    def plan(self, *, timeout_s: float = planner.DEFAULT_TIMEOUT_S,
             memory_mb: int = planner.DEFAULT_MEMORY_MB) -> list[str] | None:
        """The planner expert's commands from the current state (``None``: no plan exists), searched
        within the limits (:func:`arlkit.envs.alfworld.planner.search`; :class:`PlannerLimit` past them)."""
        pddl = self.env.unwrapped
        state = pddl._pddl_state
        names = planner.search(state.downward_lib, _ENGINE_LOCK, timeout_s=timeout_s, memory_mb=memory_mb)
        if names is None:
            return None
        return [str(c) for c in self._locked(state.plan_to_templated_actions, names, pddl._entity_infos)]


@dataclass
class BackendPool:
    """At most ``capacity`` games in memory, shared by every alfworld environment of the process.

    ``acquire(owner, game_key)`` returns the backend ``owner`` used last when nobody took it since,
    else a free one (one holding ``game_key`` first), a new one while under capacity, or the least
    recently used idle one (its former owner will replay its actions when it needs it again); it waits
    while every backend is busy. ``release``
    ends one use; ``drop(owner)`` frees what ``owner`` held (its environment was collected).
    """

    capacity: int = 256
    _all: list[Backend] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _dropped: deque[int] = field(default_factory=deque)

    def acquire(self, owner: int, game_key: str | None = None) -> Backend:
        with self._cond:
            while True:
                self._forget_dropped()
                mine = [b for b in self._all if b.owner == owner and not b.busy]
                # Among the others, one that holds the same game first: it needs no load.
                free = sorted((b for b in self._all if b.owner is None and not b.busy), key=lambda b: b.game_key != game_key)
                idle = sorted((b for b in self._all if not b.busy), key=lambda b: (b.game_key != game_key, b.last_used))
                if mine or free:
                    backend = (mine or free)[0]
                elif len(self._all) < self.capacity:
                    backend = Backend()
                    self._all.append(backend)
                elif idle:
                    backend = idle[0]
                else:
                    self._cond.wait()
                    continue
                backend.owner, backend.busy = owner, True
                return backend

    def release(self, backend: Backend) -> None:
        with self._cond:
            backend.busy, backend.last_used = False, time.monotonic()
            self._cond.notify_all()

    def drop(self, owner: int) -> None:
        """Called by a finalizer, which may run inside any code (even ``acquire``): no lock here."""
        self._dropped.append(owner)

    def _forget_dropped(self) -> None:
        while self._dropped:
            owner = self._dropped.popleft()
            for backend in self._all:
                if backend.owner == owner and not backend.busy:
                    backend.owner = None

    @property
    def size(self) -> int:
        """Games held in memory now."""
        return len(self._all)


POOL = BackendPool()
"""The process-wide pool (``AlfworldConfig.max_games`` raises its capacity)."""
