"""Any Gymnasium environment as an arlkit environment (``--env gymnasium --env-arg id=...``).

Text environments (``gymnasium.spaces.Text`` observations and actions) work as they are; others
need a ``render`` (observation -> text) and, unless the actions are a ``Discrete`` space (written
as integers), a ``parse`` (action text -> action), both given as ``module:function``. A task is a
reset seed: the test split is seeds ``0..``, the train split seeds ``1_000_000_000..``, so the
splits never share a seed. Success is the wrapped environment's own ``info["success"]`` (or
``info["is_success"]``) when it reports one, else terminating (not truncating) on a reward above
``success_threshold``. There is no oracle unless the environment brings one (docs/integrations.md).
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arlkit.envs.parsing import parse_tagged_action
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env

__all__ = ["DiscreteGymnasiumEnv", "GymnasiumConfig", "GymnasiumEnv", "TRAIN_SEED_OFFSET", "from_gymnasium"]

TRAIN_SEED_OFFSET = 1_000_000_000


@dataclass(frozen=True)
class GymnasiumConfig:
    """Configuration of the Gymnasium adapter.

    Attributes:
        id: a registered Gymnasium id; ``module:Name-v0`` imports ``module`` first (Gymnasium's
            own rule), so a user's environment needs no arlkit code. The default is arlkit's own
            small text game (:mod:`arlkit.envs.gym_text`), an example of the form.
        render: ``module:function`` turning an observation into text (default: ``str`` of text
            observations; required otherwise).
        parse: ``module:function`` turning action text into the environment's action (default:
            the text for ``Text`` action spaces, an integer for ``Discrete`` ones).
        instruction: the task-specific instruction of the prompt (default: a generic one).
        action_format: how to write an action (default: from the action space).
        t_max: the full turn budget (0: the id's ``max_episode_steps``, else 50).
        success_threshold: without an ``info["success"]``, termination with a reward above this is success.
        n_tasks: seeds per split.
    """

    id: str = "arlkit/guess-number-v0"
    render: str = ""
    parse: str = ""
    instruction: str = ""
    action_format: str = ""
    t_max: int = 0
    success_threshold: float = 0.0
    n_tasks: int = 1000

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("give the Gymnasium id: --env-arg id=NAME-v0 (or module:NAME-v0)")
        if self.t_max < 0 or self.n_tasks < 1:
            raise ValueError("t_max must be >= 0 and n_tasks >= 1")


def _load(path: str) -> Callable[[Any], Any]:
    module, sep, name = path.partition(":")
    if not sep:
        raise ValueError(f"expected module:function, got {path!r}")
    return getattr(importlib.import_module(module), name)


class GymnasiumEnv:
    """A Gymnasium environment behind arlkit's protocol."""

    name = "gymnasium"

    def __init__(self, config: GymnasiumConfig, env: Any | None = None) -> None:
        try:
            import gymnasium
            from gymnasium import spaces
        except ImportError as exc:
            raise ImportError("the gymnasium adapter needs Gymnasium: pip install 'arlkit[gym]'") from exc
        from arlkit.envs import gym_text  # noqa: F401 - registers arlkit/guess-number-v0

        self.config = config
        self._env = env if env is not None else gymnasium.make(config.id)
        self._spaces = spaces
        spec = getattr(self._env, "spec", None)
        self.t_max = config.t_max or int(getattr(spec, "max_episode_steps", None) or 50)
        text_obs = isinstance(self._env.observation_space, spaces.Text)
        if not config.render and not text_obs:
            raise ValueError(f"{config.id}: observations are {self._env.observation_space}, not text; give render=module:function")
        self._render_fn = _load(config.render) if config.render else str
        action_space = self._env.action_space
        if not config.parse and not isinstance(action_space, (spaces.Text, spaces.Discrete)):
            raise ValueError(f"{config.id}: actions are {action_space}; give parse=module:function")
        self._parse_fn = _load(config.parse) if config.parse else None
        self._observation = ""
        self._done = False
        self._task: Task | None = None
        self._actions: list[str] = []  # the valid action texts since reset: the state, replayed by restore

    def tasks(self, split: str, n: int) -> list[Task]:
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r}; valid choices: train, test")
        if n < 0 or n > self.config.n_tasks:
            raise ValueError(f"only {self.config.n_tasks} {split} tasks exist (asked for {n})")
        offset = TRAIN_SEED_OFFSET if split == "train" else 0
        return [Task(f"{self.config.id}#seed{offset + i}", {"seed": offset + i}) for i in range(n)]

    def reset(self, task: Task, seed: int) -> str:
        observation, _ = self._env.reset(seed=int(task.payload["seed"]))
        self._task, self._done, self._actions = task, False, []
        self._observation = str(self._render_fn(observation))
        return self._observation

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_tagged_action(reply)

    def _convert(self, text: str) -> tuple[Any, str | None]:
        space = self._env.action_space
        if self._parse_fn is not None:
            try:
                value = self._parse_fn(text)
            except Exception as exc:  # noqa: BLE001 - user code on untrusted text: an invalid action
                return None, f"the action could not be parsed ({type(exc).__name__})"
            return (value, None) if value is not None and space.contains(value) else (None, "not an admissible action")
        if isinstance(space, self._spaces.Discrete):
            stripped = text.strip()
            if stripped.lstrip("-").isdigit() and space.contains(int(stripped)):
                return int(stripped), None
            return None, f"write an integer from {space.start} to {space.start + space.n - 1}"
        return (text, None) if space.contains(text) else (None, "the text is not in the action space")

    def step(self, action: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("call reset(task, seed) first")
        if self._done:
            return StepResult("The episode is over.", 0.0, True, False, False)
        value, error = self._convert(action if isinstance(action, str) else "")
        if error is not None:
            return StepResult(f"Invalid action: {error}.\n{self._observation}", 0.0, False, False, False)
        observation, reward, terminated, truncated, info = self._env.step(value)
        self._actions.append(action)
        self._observation = str(self._render_fn(observation))
        self._done = bool(terminated or truncated)
        flag = info.get("success", info.get("is_success")) if isinstance(info, dict) else None
        success = bool(flag) if flag is not None else bool(terminated and float(reward) > self.config.success_threshold)
        return StepResult(self._observation, float(reward), self._done, success, True)

    def render(self) -> str:
        return self._observation or "No task: call reset first."

    # A Gymnasium environment reset with a seed is deterministic given its actions, so the state is
    # the task and the actions taken: the key hashes them, and restore replays them.
    def state_key(self) -> str:
        digest = hashlib.sha256("\0".join(self._actions).encode("utf-8", "replace")).hexdigest()[:16]
        return f"{self._task.task_id if self._task else '-'}@{digest if self._actions else 'start'}"

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

    def prompt_text(self) -> PromptText:
        space = self._env.action_space
        instruction = self.config.instruction or f"Interact with the Gymnasium environment {self.config.id}."
        if self.config.action_format:
            action_format = self.config.action_format
        elif isinstance(space, self._spaces.Discrete):
            action_format = (f"Write the action as an integer from {space.start} to {space.start + space.n - 1} inside "
                             f"the action tags, for example <action>{space.start}</action>.")
        else:
            action_format = "Write the action as text inside the action tags: <action>your action</action>."
        return PromptText(instruction, action_format)


class DiscreteGymnasiumEnv(GymnasiumEnv):
    """A Gymnasium environment with ``Discrete`` actions written as integers (no ``parse``): its
    actions are a finite set, so the ``random`` policy and action-set features work."""

    def admissible_actions(self) -> list[str]:
        space = self._env.action_space
        return [str(space.start + i) for i in range(space.n)]


def _build(config: GymnasiumConfig, env: Any | None = None) -> GymnasiumEnv:
    built = GymnasiumEnv(config, env)
    if not config.parse and isinstance(built._env.action_space, built._spaces.Discrete):
        return DiscreteGymnasiumEnv(config, built._env)  # the finite action set, on the same Gymnasium env
    return built


def from_gymnasium(id_or_env: str | Any, **config: Any) -> GymnasiumEnv:
    """An arlkit environment for a Gymnasium id or instance (:class:`GymnasiumConfig` options)."""
    if isinstance(id_or_env, str):
        return _build(GymnasiumConfig(id=id_or_env, **config))
    spec = getattr(id_or_env, "spec", None)
    name = getattr(spec, "id", None) or type(id_or_env).__name__
    return _build(GymnasiumConfig(id=name, **config), env=id_or_env)


@register_env("gymnasium", GymnasiumConfig)
def _make_gymnasium(config: GymnasiumConfig) -> GymnasiumEnv:
    return _build(config)
