"""The core every bridge from a foreign text environment to arlkit's protocol stands on.

A foreign environment here is one with Gymnasium's step signature (``step(action) -> (observation,
reward, terminated, truncated, info)``) reset from a seed: Gymnasium's own (``arlkit.envs.gymnasium``)
and the hubs' (GEM, ...). :class:`SeededBridge` holds what they share; a subclass says how to make
the foreign environment, start it, convert action text and read its step:

- A task is a reset seed: the test split is seeds ``0..``, the train split seeds
  ``1_000_000_000..``, so the splits never share one.
- Success needs ``terminated`` without ``truncated`` and the subclass's :meth:`SeededBridge._solved`
  (by default the environment's ``info["success"]`` or ``info["is_success"]``, else a reward above
  ``success_threshold``). A truncated step (a time limit, a game's own turn limit, even together
  with ``terminated`` and a partial reward) ends the episode without success, keeps its reward, and
  its observation ends with :data:`TRUNCATED_NOTE`.
- ``action_text="action"`` hands the environment the content of the reply's ``<action>`` tag;
  ``"reply"`` the whole reply.
- The announced budget (:meth:`SeededBridge.set_budget`) is kept for the subclass's start.
- ``close()`` closes the foreign environment, once; a bridge dropped without it closes it when
  collected; a reset after ``close()`` makes a fresh one (a given instance is reset as it is).
- Foreign exceptions never leave a rollout: one in ``step`` is an invalid action whose observation
  names it, one in the start makes the first observation ``The environment could not start: ...``.
  Each kind is logged once per process.
- The state is the task and the actions since reset (a seeded environment is deterministic given
  them): :meth:`SeededBridge.state_key` hashes them and :meth:`SeededBridge.restore` replays them.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from arlkit.envs.parsing import parse_tagged_action, valid_utf8
from arlkit.envs.protocol import ParsedAction, StepResult, Task

__all__ = ["ACTION_TEXTS", "TRAIN_SEED_OFFSET", "TRUNCATED_NOTE", "SeededBridge", "close_foreign", "one_line", "parse_reply",
           "replay_key", "reported_success", "warn_once"]

TRAIN_SEED_OFFSET = 1_000_000_000
TRUNCATED_NOTE = "(The environment truncated the episode: no success.)"
"""The line a truncated step's observation ends with."""
ACTION_TEXTS = ("action", "reply")

logger = logging.getLogger(__name__)
_warned: set[tuple[str, ...]] = set()
_warned_lock = threading.Lock()


def warn_once(key: tuple[str, ...], message: str) -> None:
    """Log ``message`` the first time ``key`` comes up in this process (environments are built
    once per trajectory: a warning per trajectory would drown the progress line)."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message)


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, at most ``limit`` characters."""
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_reply(reply: Any, action_text: str, *, allow_empty: bool = False) -> ParsedAction:
    """What of a model reply reaches a foreign environment: the content of its ``<action>`` tag
    (``action_text="action"``) or the whole reply (``"reply"``, valid UTF-8; an empty one is an
    invalid action unless ``allow_empty``), with the reply's strict-format flag either way."""
    if action_text == "action":
        return parse_tagged_action(reply)
    text = valid_utf8(reply)[0] if isinstance(reply, str) else ""
    if not text.strip() and not allow_empty:
        return ParsedAction(None, "the reply is empty" if isinstance(reply, str) else "the reply is not text")
    return ParsedAction(text, None, parse_tagged_action(text).strict_format)


def reported_success(info: Any) -> bool | None:
    """What a foreign environment's step ``info`` (or metadata) says of success: its ``success`` (or
    ``is_success``) entry, ``None`` when it says nothing."""
    flag = info.get("success", info.get("is_success")) if isinstance(info, Mapping) else None
    return None if flag is None else bool(flag)


def replay_key(task: Task | None, actions: Sequence[str]) -> str:
    """The state key of an environment whose state is its task and the actions taken since reset
    (a seeded environment deterministic given them): the task id and a hash of the actions."""
    digest = hashlib.sha256("\0".join(actions).encode("utf-8", "replace")).hexdigest()[:16]
    return f"{task.task_id if task else '-'}@{digest if actions else 'start'}"


def close_foreign(env: Any, env_id: str) -> None:
    """``env.close()`` where it has one; an exception there is a warning (once), never raised."""
    close = getattr(env, "close", None)
    if not callable(close):
        return
    try:
        close()
    except Exception as exc:  # noqa: BLE001 - closing must not sink the rollout
        warn_once(("close", env_id, type(exc).__name__), f"{env_id}: close() raised {one_line(exc)}")


class SeededBridge:
    """A seeded foreign environment behind arlkit's protocol (module docstring).

    Subclasses set ``name`` and ``t_max`` and define :meth:`_make` (a fresh foreign environment),
    :meth:`_start` (reset it from a seed; the first observation as text), :meth:`_advance` (one
    foreign step; its observation as text) and ``prompt_text``; they may override :meth:`_convert`
    (action text to the foreign action, or why it is invalid) and :meth:`_solved`.

    Args:
        env_id: how messages name the foreign environment.
        env: the foreign environment.
        owned: made by the bridge (closed on failure, made afresh after ``close()``), not the caller's.
        n_tasks: seeds per split.
        action_text: ``action`` or ``reply`` (module docstring).
        success_threshold: the default :meth:`_solved`'s reward threshold.
    """

    name = "bridge"
    t_max = 0

    def __init__(self, env_id: str, env: Any, *, owned: bool, n_tasks: int, action_text: str = "action",
                 success_threshold: float = 0.0) -> None:
        if action_text not in ACTION_TEXTS:
            raise ValueError(f"unknown action_text {action_text!r}; valid choices: {', '.join(ACTION_TEXTS)}")
        self.env_id, self._env, self._owned = env_id, env, owned
        self._n_tasks, self._action_text, self._success_threshold = n_tasks, action_text, success_threshold
        self._closer = weakref.finalize(self, close_foreign, env, env_id)
        self._observation = ""
        self._done = False
        self._over = "The episode is over."
        self._budget: int | None = None
        self._task: Task | None = None
        self._actions: list[str] = []  # the valid action texts since reset: the state, replayed by restore

    def _abandon(self) -> None:
        """Undo ``__init__`` when the subclass's own checks fail: close the environment the bridge
        made, leave the caller's alone."""
        if self._owned:
            self.close()
        else:
            self._closer.detach()

    # -- the subclass's part ---------------------------------------------------------------------

    def _make(self) -> Any:
        raise NotImplementedError

    def _start(self, seed: int) -> str:
        raise NotImplementedError

    def _advance(self, value: Any) -> tuple[str, float, bool, bool, Any]:
        raise NotImplementedError

    def _convert(self, text: str) -> tuple[Any, str | None]:
        return text, None

    def _solved(self, reward: float, info: Any) -> bool:
        flag = reported_success(info)
        return flag if flag is not None else reward > self._success_threshold

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the foreign environment (once: later calls do nothing)."""
        self._closer()

    @property
    def closed(self) -> bool:
        return not self._closer.alive

    def _reopen(self) -> None:
        if self._owned:
            self._env = self._make()
        self._closer = weakref.finalize(self, close_foreign, self._env, self.env_id)

    # -- the protocol ---------------------------------------------------------------------------

    def tasks(self, split: str, n: int) -> list[Task]:
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r}; valid choices: train, test")
        if n < 0 or n > self._n_tasks:
            raise ValueError(f"only {self._n_tasks} {split} tasks exist (asked for {n})")
        offset = TRAIN_SEED_OFFSET if split == "train" else 0
        return [Task(f"{self.env_id}#seed{offset + i}", {"seed": offset + i}) for i in range(n)]

    def set_budget(self, budget: int | None) -> None:
        """The turn budget the next trajectory's prompts announce (``None``: none announced);
        the next ``reset`` hands it to the foreign environment where the subclass has a way."""
        if budget is not None and budget < 1:
            raise ValueError(f"a budget must be >= 1 turn, got {budget}")
        self._budget = budget

    def reset(self, task: Task, seed: int) -> str:
        self._task, self._done, self._actions, self._over = task, False, [], "The episode is over."
        try:
            if self.closed:
                self._reopen()
            self._observation = self._start(int(task.payload["seed"]))
        except Exception as exc:  # noqa: BLE001 - foreign code: an error observation, never a traceback
            warn_once(("reset", self.env_id, type(exc).__name__),
                      f"{self.env_id}: reset raised {one_line(exc)}; such trajectories fail")
            self._done = True
            self._observation = self._over = f"The environment could not start: {one_line(exc)}"
        return self._observation

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_reply(reply, self._action_text)

    def step(self, action: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("call reset(task, seed) first")
        if self._done:
            return StepResult(self._over, 0.0, True, False, False)
        value, error = self._convert(action if isinstance(action, str) else "")
        if error is not None:
            return StepResult(f"Invalid action: {error}.\n{self._observation}", 0.0, False, False, False)
        try:
            observation, reward, terminated, truncated, info = self._advance(value)
            reward = float(reward)
        except Exception as exc:  # noqa: BLE001 - foreign code: an invalid step, never a traceback
            warn_once(("step", self.env_id, type(exc).__name__), f"{self.env_id}: step raised "
                      f"{one_line(exc)}; the turn counts as an invalid action")
            return StepResult(f"Invalid action: the environment raised {one_line(exc)}.\n{self._observation}",
                              0.0, False, False, False)
        self._actions.append(action)
        self._observation = observation
        terminated, truncated = bool(terminated), bool(truncated)
        self._done = terminated or truncated
        if truncated:
            return StepResult(f"{observation}\n{TRUNCATED_NOTE}", reward, True, False, True)
        success = terminated and self._solved(reward, info)
        return StepResult(observation, reward, self._done, success, True)

    def render(self) -> str:
        return self._observation or "No task: call reset first."

    def state_key(self) -> str:
        return replay_key(self._task, self._actions)

    def snapshot(self) -> dict[str, Any]:
        return {"task": self._task, "actions": list(self._actions)}

    def restore(self, snapshot: dict[str, Any]) -> None:
        task = snapshot["task"]
        if task is None:
            self._task, self._actions, self._observation, self._done = None, [], "", False
            return
        self.reset(task, 0)
        for action in snapshot["actions"]:
            self.step(action)
