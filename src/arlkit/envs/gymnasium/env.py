"""Any Gymnasium environment as an arlkit environment (``--env gymnasium --env-arg id=...``).

Text environments (``gymnasium.spaces.Text`` observations and actions) work as they are; others
need a ``render`` (observation -> text) and, unless the actions are a ``Discrete`` space (written
as integers), a ``parse`` (action text -> action), both given as ``module:function``. A task is a
reset seed: the test split is seeds ``0..``, the train split seeds ``1_000_000_000..``, so the
splits never share a seed.

The rules (docs/integrations.md, "Gymnasium environments in arlkit"; those that are not about
Gymnasium's spaces live in :class:`arlkit.envs.bridge.SeededBridge`, which the hub bridges share):

- Success needs ``terminated`` without ``truncated``; on such a step the environment's own
  ``info["success"]`` (or ``info["is_success"]``) decides when it reports one, else a reward above
  ``success_threshold``. A truncated step ends the episode without success, and its observation
  says so (the only record :class:`~arlkit.envs.protocol.StepResult` has room for).
- ``Text`` action spaces: by default (``text_check=length``) an action must have the space's
  length; characters outside its charset still reach the environment, with a warning, because
  Gymnasium's default charset (letters and digits) refuses every sentence.
- ``action_text=reply`` hands the environment the whole reply instead of the ``<action>`` content.
- The announced budget (:meth:`GymnasiumEnv.set_budget`) reaches the wrapped environment as
  ``reset(options={"budget", "remaining", "t_max"})``; T_max is ``t_max``, else the spec's
  ``max_episode_steps``, else 50 with a warning.
- ``close()`` closes the wrapped environment, once; a bridge dropped without it closes it when
  collected. An id that cannot be made is a one-line ``ValueError``; an exception inside the
  wrapped environment is an invalid step (``step``) or an error observation (``reset``), never a
  traceback out of the rollout.

There is no oracle unless the environment brings one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arlkit.config import ConfigError
from arlkit.envs.bridge import (ACTION_TEXTS, TRAIN_SEED_OFFSET, TRUNCATED_NOTE, SeededBridge, close_foreign, one_line,
                                warn_once)
from arlkit.envs.protocol import PromptText
from arlkit.envs.registry import register_env
from arlkit.extras import install_hint

__all__ = ["DiscreteGymnasiumEnv", "GymnasiumConfig", "GymnasiumEnv", "TRAIN_SEED_OFFSET", "TRUNCATED_NOTE",
           "from_gymnasium"]

DEFAULT_T_MAX = 50
TEXT_CHECKS = ("length", "full", "none")


@dataclass(frozen=True)
class GymnasiumConfig:
    """Configuration of the Gymnasium adapter.

    Attributes:
        id: a registered Gymnasium id; ``module:Name-v0`` imports ``module`` first (Gymnasium's
            own rule), so a user's environment needs no arlkit code. The default is arlkit's own
            small text game (:mod:`arlkit.envs.gymnasium.guess_number`), an example of the form.
        render: ``module:function`` turning an observation into text (default: ``str`` of text
            observations; required otherwise).
        parse: ``module:function`` turning action text into the environment's action (default:
            the text for ``Text`` action spaces, an integer for ``Discrete`` ones).
        instruction: the task-specific instruction of the prompt (default: a generic one).
        action_format: how to write an action (default: from the action space).
        t_max: the full turn budget (0: the spec's ``max_episode_steps``, else 50); given, it is
            also the ``max_episode_steps`` an id is made with, so Gymnasium's time limit agrees.
        success_threshold: without an ``info["success"]``, termination with a reward above this is success.
        n_tasks: seeds per split.
        action_text: ``action``: the content of the reply's ``<action>`` tag reaches the
            environment; ``reply``: the whole reply does (its ``<think>`` and tags included).
        text_check: how a ``Text`` action space is enforced: ``length`` (its min/max length;
            characters outside its charset pass, with a warning), ``full`` (Gymnasium's
            ``contains``: length and charset) or ``none`` (any text).
    """

    id: str = "arlkit/guess-number-v0"
    render: str = ""
    parse: str = ""
    instruction: str = ""
    action_format: str = ""
    t_max: int = 0
    success_threshold: float = 0.0
    n_tasks: int = 1000
    action_text: str = "action"
    text_check: str = "length"

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("give the Gymnasium id: --env-arg id=NAME-v0 (or module:NAME-v0)")
        if self.t_max < 0 or self.n_tasks < 1:
            raise ValueError("t_max must be >= 0 and n_tasks >= 1")
        if self.action_text not in ACTION_TEXTS:
            raise ValueError(f"unknown action_text {self.action_text!r}; valid choices: {', '.join(ACTION_TEXTS)}")
        if self.text_check not in TEXT_CHECKS:
            raise ValueError(f"unknown text_check {self.text_check!r}; valid choices: {', '.join(TEXT_CHECKS)}")


def _load(path: str, what: str) -> Callable[[Any], Any]:
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"{what}: expected module:function, got {path!r}")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{what}={path}: {one_line(exc)}") from exc
    if not callable(fn):
        raise ValueError(f"{what}={path}: not a function")
    return fn


def _gymnasium() -> Any:
    try:
        import gymnasium
    except ImportError as exc:
        raise ConfigError(f"the gymnasium adapter needs Gymnasium: {install_hint('gym')}") from exc
    from arlkit.envs.gymnasium import guess_number  # noqa: F401 - registers arlkit/guess-number-v0

    return gymnasium


def _make_gym(config: GymnasiumConfig) -> Any:
    """``gymnasium.make(config.id)``; whatever goes wrong (an unknown id, a module that does not
    import, the environment's constructor raising) is a one-line ``ValueError``."""
    gymnasium = _gymnasium()
    kwargs = {"max_episode_steps": config.t_max} if config.t_max else {}
    try:
        return gymnasium.make(config.id, **kwargs)
    except Exception as exc:  # noqa: BLE001 - foreign code: one line, never a traceback
        raise ValueError(f"cannot make the Gymnasium environment {config.id!r}: {one_line(exc)} (give a "
                         "registered id, or module:Name-v0 to import module first)") from exc


class GymnasiumEnv(SeededBridge):
    """A Gymnasium environment behind arlkit's protocol (the shared rules:
    :class:`~arlkit.envs.bridge.SeededBridge`).

    ``env`` is a Gymnasium environment to wrap instead of making ``config.id``; ``close()`` closes
    it as well. Reset after ``close()`` makes a fresh environment from the id (or, for a given
    ``env``, resets the same one), so one bridge may run trajectory after trajectory."""

    name = "gymnasium"

    def __init__(self, config: GymnasiumConfig, env: Any | None = None, *, _owned: bool | None = None) -> None:
        self._spaces = _gymnasium().spaces
        self.config = config
        owned = env is None if _owned is None else _owned
        super().__init__(config.id, _make_gym(config) if env is None else env, owned=owned, n_tasks=config.n_tasks,
                         action_text=config.action_text, success_threshold=config.success_threshold)
        try:
            self._check_spaces()
            self.t_max = self._read_t_max()
            self._render_fn = _load(config.render, "render") if config.render else str
            self._parse_fn = _load(config.parse, "parse") if config.parse else None
        except BaseException:
            self._abandon()
            raise

    def _check_spaces(self) -> None:
        spaces, config = self._spaces, self.config
        observation_space, action_space = self._env.observation_space, self._env.action_space
        if not config.render and not isinstance(observation_space, spaces.Text):
            raise ValueError(f"{config.id}: observations are {observation_space}, not text; give render=module:function")
        if not config.parse and not isinstance(action_space, (spaces.Text, spaces.Discrete)):
            raise ValueError(f"{config.id}: actions are {action_space}; give parse=module:function")
        if config.action_text == "reply" and not config.parse and not isinstance(action_space, spaces.Text):
            raise ValueError(f"{config.id}: action_text=reply needs a Text action space or parse=module:function "
                             f"(actions are {action_space})")

    def _read_t_max(self) -> int:
        spec_steps = getattr(getattr(self._env, "spec", None), "max_episode_steps", None)
        if self.config.t_max:
            if spec_steps and spec_steps < self.config.t_max:
                warn_once(("t_max", self.config.id), f"{self.config.id}: the environment truncates at "
                           f"max_episode_steps={spec_steps}, before t_max={self.config.t_max}")
            return self.config.t_max
        if spec_steps:
            return int(spec_steps)
        warn_once(("t_max", self.config.id), f"{self.config.id}: no t_max given and its spec has no "
                   f"max_episode_steps; T_max is {DEFAULT_T_MAX} (give --env-arg t_max=N)")
        return DEFAULT_T_MAX

    # -- the bridge's hooks ----------------------------------------------------------------------

    def _make(self) -> Any:
        return _make_gym(self.config)

    def reset_options(self) -> dict[str, int] | None:
        """What ``reset`` passes as the wrapped environment's ``options``: the announced budget,
        the turns remaining (all of it, at reset) and T_max; ``None`` without an announced budget."""
        if self._budget is None:
            return None
        return {"budget": self._budget, "remaining": self._budget, "t_max": self.t_max}

    def _start(self, seed: int) -> str:
        options = self.reset_options()
        kwargs: dict[str, Any] = {"seed": seed}
        if options is not None:
            kwargs["options"] = options
        observation, _ = self._env.reset(**kwargs)
        return self._render(observation)

    def _advance(self, value: Any) -> tuple[str, float, bool, bool, Any]:
        observation, reward, terminated, truncated, info = self._env.step(value)
        return self._render(observation), reward, terminated, truncated, info

    def _render(self, observation: Any) -> str:
        try:
            return str(self._render_fn(observation))
        except Exception as exc:  # noqa: BLE001 - user code
            warn_once(("render", self.config.id, type(exc).__name__),
                       f"{self.config.id}: render raised {one_line(exc)}")
            return f"(The observation could not be rendered: {one_line(exc)})"

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
        return self._text_action(space, text)

    def _text_action(self, space: Any, text: str) -> tuple[Any, str | None]:
        """The ``Text`` space rule (``text_check``, see :class:`GymnasiumConfig`)."""
        mode, env_id = self.config.text_check, self.config.id
        if mode == "none" or space.contains(text):
            return text, None
        if not space.min_length <= len(text) <= space.max_length:
            warn_once(("length", env_id), f"{env_id}: the action space {space} refuses an action of {len(text)} "
                       "characters; such actions are invalid (text_check=none passes them)")
            return None, f"write {space.min_length} to {space.max_length} characters"
        outside = sorted({c for c in text if c not in space.character_set})
        shown = " ".join(repr(c) for c in outside[:12]) + (" ..." if len(outside) > 12 else "")
        if mode == "full":
            warn_once(("charset", env_id), f"{env_id}: the action space {space} rejects the characters {shown} in "
                       "the model's actions; such actions are invalid (text_check=length passes them)")
            return None, f"these characters are not allowed: {shown}"
        warn_once(("charset", env_id), f"{env_id}: the action space {space} rejects the characters {shown} in "
                   "the model's actions; they reach the environment anyway (text_check=full refuses them)")
        return text, None

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
    spaces = _gymnasium().spaces
    owned = env is None
    wrapped = _make_gym(config) if owned else env
    try:
        discrete = not config.parse and isinstance(wrapped.action_space, spaces.Discrete)
    except Exception as exc:  # noqa: BLE001 - foreign code
        if owned:
            close_foreign(wrapped, config.id)
        raise ValueError(f"{config.id}: the action space cannot be read: {one_line(exc)}") from exc
    return (DiscreteGymnasiumEnv if discrete else GymnasiumEnv)(config, wrapped, _owned=owned)


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
