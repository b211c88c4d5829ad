"""A verifiers environment as an arlkit environment (``--env verifiers --env-arg id=...``).

``id`` is a verifiers taskset id (a module exporting its ``Taskset``, and its ``Env`` when it
has its own rollout loop), loaded with verifiers' own ``load_environment``; or
``module:function`` returning a verifiers ``Env`` (or an ``EnvConfig``). ``args`` (a JSON
object) gives the taskset's config fields, or the function's keyword arguments; ``env_args``
the environment config's fields (``{"player": {"max_turns": 8}}``).

The rules (docs: "verifiers, both ways"):

- A task is a task of the taskset, in its load order (verifiers tasksets have no splits: the
  test split is the taskset from its first task, the train split from task ``train_start``).
- Each turn hands the reply to the environment's own code, which answers with its next user
  message (:mod:`arlkit.integrations.verifiers.driver`); the episode ends when the environment's
  ``run()`` returns. The reward is the played seat's trace reward after the task's own scoring
  (``@vf.reward``, judges) and ``Env.finalize``.
- Success: the environment ended the exchange itself (not by ``max_turns``) and the reward is
  at least ``success_threshold`` (default 1.0). An episode ended by ``max_turns`` keeps its
  reward, without success, and its last observation says so.
- The announced budget is the seat's ``max_turns`` for the episode; T_max is the seat's own
  ``max_turns`` (else ``t_max``, else 50).
- ``action_text=reply`` (default, as verifiers hands environments the whole completion) or
  ``action`` (only the content of the reply's ``<action>`` tag).
- ``close()`` cancels an unfinished episode and runs the environment's ``stop()``, once.
"""

from __future__ import annotations

import importlib
import itertools
import json
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from arlkit.config import ConfigError
from arlkit.envs.bridge import TRUNCATED_NOTE, one_line, parse_reply, warn_once
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.extras import install_hint
from arlkit.integrations.verifiers.driver import LOOP_NAME, VfEpisode, shared_loop
from arlkit.integrations.verifiers.tools import ToolBox

__all__ = ["VerifiersConfig", "VerifiersEnv", "from_verifiers"]

ACTION_TEXTS = ("reply", "action")
DEFAULT_T_MAX = 50
OVER = "The episode is over."


def _verifiers() -> Any:
    try:
        import verifiers.v1 as vf
    except ImportError as exc:
        raise ConfigError(f"the verifiers adapter needs verifiers: {install_hint('verifiers', make_target='install-extras')}") from exc
    return vf


def _json_object(text: str, what: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} must be a JSON object ({exc.msg} at character {exc.pos})") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class VerifiersConfig:
    """Configuration of the verifiers adapter.

    Attributes:
        id: a verifiers taskset id (its module is imported by verifiers' loader), or
            ``module:function`` returning a verifiers ``Env`` or ``EnvConfig``.
        args: JSON object: the taskset's config fields (for an id) or the function's kwargs.
        env_args: JSON object: the environment config's fields (for an id), e.g. a seat's
            ``max_turns``.
        role: the seat arlkit's policy plays (default: the environment's only seat).
        action_text: ``reply``: the whole reply reaches the environment; ``action``: only the
            content of its ``<action>`` tag.
        success_threshold: the reward at or above which an episode the environment ended itself
            is a success.
        t_max: T_max when the seat has no ``max_turns`` (0: 50).
        train_start: the taskset position the train split starts at (0: no train split).
        timeout: seconds to wait for the environment's answer to one turn.
    """

    id: str = ""
    args: str = ""
    env_args: str = ""
    role: str = ""
    action_text: str = "reply"
    success_threshold: float = 1.0
    t_max: int = 0
    train_start: int = 0
    timeout: float = 300.0

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("give the verifiers environment: --env-arg id=TASKSET_ID (or module:function)")
        if self.action_text not in ACTION_TEXTS:
            raise ValueError(f"unknown action_text {self.action_text!r}; valid choices: {', '.join(ACTION_TEXTS)}")
        if self.t_max < 0 or self.train_start < 0 or self.timeout <= 0:
            raise ValueError("t_max and train_start must be >= 0 and timeout > 0")
        _json_object(self.args, "args")
        _json_object(self.env_args, "env_args")


def load_vf_env(config: VerifiersConfig) -> Any:
    """The verifiers ``Env`` ``config`` names; whatever goes wrong is a one-line ``ValueError``."""
    vf = _verifiers()
    args, env_args = _json_object(config.args, "args"), _json_object(config.env_args, "env_args")
    try:
        if ":" in config.id:
            module, _, name = config.id.partition(":")
            made = getattr(importlib.import_module(module), name)(**args)
            if isinstance(made, vf.EnvConfig):
                made = vf.load_environment(vf.resolve_env_config(made))
        else:
            made = vf.load_environment(vf.resolve_env_config({"taskset": {"id": config.id, **args}, **env_args}))
    except Exception as exc:  # noqa: BLE001 - foreign code: one line, never a traceback
        raise ValueError(f"cannot load the verifiers environment {config.id!r}: {one_line(exc)}") from exc
    if not isinstance(made, vf.Env):
        raise ValueError(f"{config.id}: returned {type(made).__name__}, not a verifiers Env or EnvConfig")
    return made


def _seat(vf_env: Any, role: str) -> tuple[str, Any]:
    from verifiers.v1.configs.agent import agent_config_fields

    seats = agent_config_fields(vf_env.config)
    if role:
        if role not in seats:
            raise ValueError(f"unknown role {role!r}; valid choices: {', '.join(seats)}")
        return role, seats[role]
    if len(seats) != 1:
        raise ValueError(f"the verifiers env has seats {', '.join(seats)}: choose the one arlkit plays with "
                         "--env-arg role=NAME")
    return next(iter(seats.items()))


def _stop_quietly(vf_env: Any, started: list[bool], env_id: str) -> None:
    if not started[0]:
        return
    started[0] = False
    try:
        future = shared_loop().submit(vf_env.stop())
        if threading.current_thread().name != LOOP_NAME:  # collected on the loop itself: stop() runs after
            future.result(timeout=60)
    except Exception as exc:  # noqa: BLE001 - closing must not sink the rollout
        warn_once(("stop", env_id, type(exc).__name__), f"{env_id}: stop() raised {one_line(exc)}")


class VerifiersEnv:
    """A verifiers environment behind arlkit's protocol (module docstring)."""

    name = "verifiers"
    blocking_steps = True  # a turn waits on the environment's coroutine: the engine's worker pool runs it

    def __init__(self, config: VerifiersConfig, vf_env: Any | None = None) -> None:
        self.config = config
        self.vf_env = load_vf_env(config) if vf_env is None else vf_env
        self.seat, spec = _seat(self.vf_env, config.role)
        self.t_max = int(spec.max_turns or config.t_max or DEFAULT_T_MAX)
        if not spec.max_turns and not config.t_max:
            warn_once(("t_max", config.id), f"{config.id}: the seat {self.seat!r} has no max_turns and no t_max is "
                       f"given; T_max is {DEFAULT_T_MAX} (give --env-arg t_max=N)")
        self._started = [False]
        self._closer = weakref.finalize(self, _stop_quietly, self.vf_env, self._started, config.id)
        self._budget: int | None = None
        self._cache: dict[int, Any] = {}
        self._episode: VfEpisode | None = None
        self._task: Task | None = None
        self._vf_task: Any = None
        self._observation = ""
        self._done = False
        self._over = OVER

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Cancel an unfinished episode and run the environment's ``stop()`` (once)."""
        if self._episode is not None:
            self._episode.cancel()
            self._episode = None
        self._closer()

    @property
    def closed(self) -> bool:
        return not self._closer.alive

    def _start_env(self) -> None:
        if self.closed:
            self._closer = weakref.finalize(self, _stop_quietly, self.vf_env, self._started, self.config.id)
        if not self._started[0]:
            shared_loop().submit(self.vf_env.start()).result(timeout=self.config.timeout)
            self._started[0] = True

    # -- tasks --------------------------------------------------------------------------------

    def _iter_tasks(self, start: int) -> Any:
        return itertools.islice(iter(self.vf_env.taskset), start, None)

    def tasks(self, split: str, n: int) -> list[Task]:
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r}; valid choices: train, test")
        if split == "train" and not self.config.train_start:
            raise ValueError("verifiers tasksets have no train split: give --env-arg train_start=N (the tasks from "
                             "position N are the train split)")
        start = self.config.train_start if split == "train" else 0
        end = self.config.train_start if split == "test" and self.config.train_start else None
        found = []
        try:
            for position, vf_task in enumerate(self._iter_tasks(start), start):
                if len(found) == n or (end is not None and position >= end):
                    break
                self._cache[position] = vf_task
                label = vf_task.data.id or vf_task.data.name or f"task{position}"
                found.append(Task(f"{label}#{vf_task.key[:12]}", {"position": position, "key": vf_task.key}))
        except Exception as exc:  # noqa: BLE001 - foreign code
            raise ValueError(f"{self.config.id}: the taskset could not be loaded: {one_line(exc)}") from exc
        if len(found) < n:
            raise ValueError(f"only {len(found)} {split} tasks exist in {self.config.id} (asked for {n})")
        return found

    def _lookup(self, task: Task) -> Any:
        position = int(task.payload["position"])
        vf_task = self._cache.get(position)
        if vf_task is None:
            vf_task = next(self._iter_tasks(position), None)
            if vf_task is None:
                raise ValueError(f"{self.config.id}: no task at position {position}")
            self._cache[position] = vf_task
        if vf_task.key != task.payload.get("key", vf_task.key):
            raise ValueError(f"{self.config.id}: the task at position {position} changed (its key differs)")
        return vf_task

    # -- the protocol ---------------------------------------------------------------------------

    def set_budget(self, budget: int | None) -> None:
        """The announced budget: the seat's ``max_turns`` for the next episode (``None``: T_max)."""
        if budget is not None and budget < 1:
            raise ValueError(f"a budget must be >= 1 turn, got {budget}")
        self._budget = budget

    def reset(self, task: Task, seed: int) -> str:
        if self._episode is not None:
            self._episode.cancel()
        self._task, self._done, self._over = task, False, OVER
        try:
            self._start_env()
            self._vf_task = self._lookup(task)
            self._episode = VfEpisode(self.vf_env, self._vf_task, self.seat, self._budget or self.t_max)
            kind, value = self._episode.start(self.config.timeout)
        except Exception as exc:  # noqa: BLE001 - foreign code: an error observation, never a traceback
            kind, value = "error", exc
        if kind == "obs":
            self._observation = value
        else:
            self._done = True
            if kind == "error":
                warn_once(("reset", self.config.id, type(value).__name__),
                           f"{self.config.id}: the episode could not start: {one_line(value)}; such trajectories fail")
                self._observation = self._over = f"The environment could not start: {one_line(value)}"
            else:
                self._observation = self._over = "The environment ended the episode before the first turn."
        return self._observation

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_reply(reply, self.config.action_text)

    def step(self, action: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("call reset(task, seed) first")
        if self._done or self._episode is None:
            return StepResult(self._over, 0.0, True, False, False)
        episode = self._episode
        kind, value = episode.send(action if isinstance(action, str) else "", self.config.timeout)
        if kind == "obs":
            self._observation = value
            return StepResult(value, 0.0, False, False, True)
        self._done = True
        if kind == "error":
            episode.cancel()
            warn_once(("step", self.config.id, type(value).__name__),
                       f"{self.config.id}: the environment raised {one_line(value)}; the episode ends without success")
            self._observation = self._over = f"Invalid action: the environment raised {one_line(value)}."
            return StepResult(self._observation, 0.0, True, False, False)
        reward = episode.reward()
        if episode.truncated:
            self._observation = f"The episode reached its turn limit (reward {reward:g}).\n{TRUNCATED_NOTE}"
            return StepResult(self._observation, reward, True, False, True)
        success = episode.ok() and reward >= self.config.success_threshold
        self._observation = f"The environment ended the episode (reward {reward:g})."
        return StepResult(self._observation, reward, True, success, True)

    def render(self) -> str:
        return self._observation or "No task: call reset first."

    def prompt_text(self) -> PromptText:
        data = self._vf_task.data if self._vf_task is not None else None
        instruction = (data.system_prompt if data is not None else None) or \
            f"Solve the task of the verifiers environment {self.config.id}."
        if self.config.action_text == "action":
            action_format = "Write your answer or move inside the action tags: <action>...</action>; only its " \
                            "content reaches the environment."
        else:
            action_format = "Your whole reply reaches the environment, which reads your answer or move from it; " \
                            "put it inside the action tags: <action>...</action>."
        if self._vf_task is not None:
            try:
                tools = ToolBox.for_task(self.vf_env, self._vf_task)
            except Exception as exc:  # noqa: BLE001 - foreign code: the prompt goes without the tool list
                warn_once(("tools", self.config.id),
                           f"{self.config.id}: its toolsets cannot be listed: {one_line(exc)}")
            else:
                if tools:
                    action_format = f"{action_format}\n{tools.describe()}"
        return PromptText(instruction, action_format)


def from_verifiers(id_or_env: str | Any, **config: Any) -> VerifiersEnv:
    """An arlkit environment for a verifiers taskset id, ``module:function`` or ``Env`` instance."""
    if isinstance(id_or_env, str):
        return VerifiersEnv(VerifiersConfig(id=id_or_env, **config))
    return VerifiersEnv(VerifiersConfig(id=getattr(id_or_env.config, "env_id", "") or type(id_or_env).__name__,
                                        **config), vf_env=id_or_env)


@register_env("verifiers", VerifiersConfig)
def _make_verifiers(config: VerifiersConfig) -> VerifiersEnv:
    return VerifiersEnv(config)
