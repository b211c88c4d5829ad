"""skyrl-gym environments as arlkit environments (``--env skyrl-gym --env-arg data=ROWS --env-arg id=ENV``).

A task is one row of a SkyRL dataset (JSONL, JSON or parquet): ``prompt`` (chat messages),
``env_class``, and whatever else the environment reads (``reward_spec``, ``extra_info``, ...).
``reset`` makes a fresh environment for the row, exactly as SkyRL's generator does:
``skyrl_gym.make(env_class, env_config=..., extras=row minus prompt and env_class)``, then
``init(prompt)``; every step hands it the model's reply.

The rules (docs/integrations.md, "skyrl-gym, both ways"):

- The announced budget is the environment's ``max_turns`` (``extras["max_turns"]`` and the
  attribute): the turns-left reminders it writes agree with arlkit's counters. T_max is ``t_max``,
  else the rows' ``max_turns``, else the environment's own ``max_turns``.
- skyrl-gym's ``done`` does not say why an episode ended, and a skyrl-gym environment ends at its
  ``max_turns`` whatever the last reply says. With ``at_limit=probe`` (default) the last turn runs
  with the environment's limit one turn further, so a ``done`` on it is the environment's own end
  (an answer, a solution); without one the trajectory ends truncated, with that step's reward and
  no success. ``at_limit=truncate`` lets the limit end the episode and counts every ``done`` at
  the limit as truncated (no success), with the environment's final reward.
- Success needs the environment's own end with ``metadata["success"]`` when it reports one, else a
  reward above ``success_threshold``. A truncated step's observation ends with
  :data:`~arlkit.envs.gymnasium.env.TRUNCATED_NOTE`.
- ``action_text=reply`` (default) hands the environment the whole reply (skyrl-gym environments
  parse replies themselves: ``<sql>``, ``<solution>``, ``#### 42``); ``action_text=action`` only
  the content of its ``<action>`` tag.
- ``close()`` closes the environment once; one dropped unclosed closes when collected. An id,
  data file or row that cannot be used is a one-line ``ValueError``; an exception inside the
  environment is an invalid step (``step``) or an error observation (``reset``).
- The state is the task and the replies since reset: state keys hash them, and ``restore`` makes
  the environment again and replays them (exact for environments deterministic given their
  replies, as ``text2sql`` and ``gsm8k_multi_turn`` are).
- Without ``data`` the rows are arlkit's example (:data:`EXAMPLE_DATA`): small ``gsm8k_multi_turn``
  word problems, a test and a train split, which run offline.
"""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import importlib
import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arlkit.config import ConfigError
from arlkit.envs.bridge import (TRUNCATED_NOTE, close_foreign, one_line, parse_reply, replay_key, reported_success,
                                warn_once)
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.extras import install_hint

__all__ = ["AT_LIMIT", "EXAMPLE_DATA", "SkyRLGymConfig", "SkyRLGymEnv", "load_rows", "skyrl_gym_module"]

EXAMPLE_DATA = Path(__file__).resolve().parents[2] / "data" / "skyrl_gym"
"""arlkit's example rows, ``gsm8k_multi_turn_{test,train}.jsonl``: the default ``data``."""

ACTION_TEXTS = ("reply", "action")
AT_LIMIT = ("probe", "truncate")
NO_OBSERVATION = "(The environment returned no observation.)"
_ROW_KEYS = ("prompt", "env_class")  # SkyRL's generator passes every other key of a row as extras


def skyrl_gym_module() -> Any:
    """``skyrl_gym``, or a one-line ``ImportError`` naming the extra."""
    try:
        import skyrl_gym
    except ImportError as exc:
        raise ConfigError(f"the skyrl-gym adapter needs skyrl-gym: {install_hint('skyrl', make_target='install-extras')}") from exc
    return skyrl_gym


@dataclass(frozen=True)
class SkyRLGymConfig:
    """Configuration of the skyrl-gym adapter.

    Attributes:
        data: the test split's rows: a SkyRL dataset file (``.jsonl``, ``.json`` or ``.parquet``);
            empty: arlkit's example rows (:data:`EXAMPLE_DATA`, with their train split).
        train_data: the train split's rows (optional; without it only the test split exists).
        id: the skyrl-gym environment id for every row (``text2sql``, ``gsm8k_multi_turn``);
            ``module:ID`` imports ``module`` first, so that it registers ``ID``; empty: each row's
            ``env_class``.
        env_config: a JSON object, the ``env_config`` the environment is made with (SkyRL's
            per-environment config section, e.g. ``{"db_path": "/data/sql"}`` for ``text2sql``).
        t_max: the full turn budget (0: the rows' ``max_turns``, else the environment's own).
        action_text: ``reply``: the whole reply reaches the environment; ``action``: the content
            of its ``<action>`` tag.
        at_limit: how an episode that reaches ``max_turns`` is told apart from one the
            environment ends itself: ``probe`` or ``truncate`` (module docstring).
        success_threshold: without ``metadata["success"]``, an own end with a reward above this
            is success.
        instruction: the task-specific instruction (default: the row's system messages).
        action_format: how to write a reply (default: a line fitting ``action_text``).
    """

    data: str = ""
    train_data: str = ""
    id: str = ""
    env_config: str = ""
    t_max: int = 0
    action_text: str = "reply"
    at_limit: str = "probe"
    success_threshold: float = 0.0
    instruction: str = ""
    action_format: str = ""

    def __post_init__(self) -> None:
        if self.t_max < 0:
            raise ValueError(f"t_max must be >= 0, got {self.t_max}")
        if self.action_text not in ACTION_TEXTS:
            raise ValueError(f"unknown action_text {self.action_text!r}; valid choices: {', '.join(ACTION_TEXTS)}")
        if self.at_limit not in AT_LIMIT:
            raise ValueError(f"unknown at_limit {self.at_limit!r}; valid choices: {', '.join(AT_LIMIT)}")
        self.env_config_dict()  # refuses text that is not a JSON object

    def paths(self) -> tuple[str, str]:
        """The test and train rows' files (train: ``""`` when there is none)."""
        if self.data:
            return self.data, self.train_data
        return (str(EXAMPLE_DATA / "gsm8k_multi_turn_test.jsonl"),
                self.train_data or str(EXAMPLE_DATA / "gsm8k_multi_turn_train.jsonl"))

    def env_config_dict(self) -> dict[str, Any]:
        if not self.env_config:
            return {}
        try:
            value = json.loads(self.env_config)
        except json.JSONDecodeError as exc:
            raise ValueError(f"env_config is not JSON ({exc.msg}); give an object: env_config='{{\"key\": 1}}'") from exc
        if not isinstance(value, dict):
            raise ValueError(f"env_config must be a JSON object, got {type(value).__name__}")
        return value


# -- rows -----------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """JSON-safe Python values (parquet gives numpy arrays and scalars)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return _plain(value.tolist())
    return value


@functools.lru_cache(maxsize=8)
def _read_rows(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The rows of ``path`` as JSON texts (cached per file version: arlkit builds one environment
    per trajectory)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        try:
            import pandas
        except ImportError as exc:
            raise ValueError(f"{path}: reading parquet needs pandas and pyarrow (or give a .jsonl file)") from exc
        try:
            rows = pandas.read_parquet(path).to_dict(orient="records")
        except Exception as exc:  # noqa: BLE001 - a foreign reader: one line
            raise ValueError(f"{path}: cannot read parquet: {one_line(exc)}") from exc
    elif suffix in (".jsonl", ".json"):
        text = Path(path).read_text(encoding="utf-8")
        try:
            if suffix == ".json":
                rows = json.loads(text)
                if not isinstance(rows, list):
                    raise ValueError("a .json file must hold a list of rows")
            else:
                rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except (json.JSONDecodeError, ValueError) as exc:
            raise ValueError(f"{path}: not SkyRL dataset rows: {one_line(exc)}") from exc
    else:
        raise ValueError(f"{path}: unknown file type {suffix or '(none)'!r}; valid choices: .jsonl, .json, .parquet")
    return tuple(json.dumps(_plain(row), sort_keys=True) for row in rows)


def load_rows(path: str) -> list[dict[str, Any]]:
    """The dataset rows of ``path`` (one-line ``ValueError`` when it cannot be read)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"data file not found: {path}")
    stat = file.stat()
    return [json.loads(text) for text in _read_rows(str(file.resolve()), stat.st_mtime_ns, stat.st_size)]


def _check_row(row: Any, index: int, env_id: str, path: str) -> str:
    """The row's environment id (``env_id`` when given); one-line ``ValueError`` for a bad row."""
    where = f"{path}, row {index}"
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a row must be an object with prompt and env_class, got {type(row).__name__}")
    prompt = row.get("prompt")
    if not isinstance(prompt, list) or not all(isinstance(m, dict) and "content" in m for m in prompt):
        raise ValueError(f"{where}: prompt must be a list of chat messages ({{'role': ..., 'content': ...}})")
    name = env_id or row.get("env_class")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: no env_class; give it in every row or --env-arg id=ENV")
    return name


# -- making environments --------------------------------------------------------------------------


def _resolve_id(env_id: str) -> str:
    """The registered id of ``env_id`` (``module:ID`` imports ``module`` first); a one-line
    ``ValueError`` naming close ids when it is not registered."""
    skyrl_gym = skyrl_gym_module()
    module, sep, name = env_id.partition(":")
    if sep:
        if not module or not name:
            raise ValueError(f"id {env_id!r}: expected ID or module:ID")
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - foreign code: one line
            raise ValueError(f"id {env_id!r}: cannot import {module}: {one_line(exc)}") from exc
    else:
        name = env_id
    if name not in skyrl_gym.registry:
        known = sorted(skyrl_gym.registry)
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown skyrl-gym environment {name!r}.{hint} Valid choices: {', '.join(known)}")
    return name


def _env_config_object(values: dict[str, Any]) -> Any:
    """``values`` with attribute access, as SkyRL hands environments their config section."""
    try:
        from omegaconf import DictConfig
    except ImportError:  # skyrl-gym's own environments import omegaconf; others may read a namespace
        from types import SimpleNamespace

        return SimpleNamespace(**values)
    return DictConfig(values)


def _extras(row: Mapping[str, Any], max_turns: int | None) -> dict[str, Any]:
    extras = {k: copy.deepcopy(v) for k, v in row.items() if k not in _ROW_KEYS}
    if max_turns is not None:
        extras["max_turns"] = max_turns
    return extras


def _make(name: str, config: SkyRLGymConfig, row: Mapping[str, Any], max_turns: int | None) -> Any:
    skyrl_gym = skyrl_gym_module()
    env = skyrl_gym.make(name, env_config=_env_config_object(config.env_config_dict()), extras=_extras(row, max_turns))
    if max_turns is not None and isinstance(getattr(env, "max_turns", None), int):
        env.max_turns = max_turns  # an environment that does not read extras["max_turns"]
    return env


def _row_limit(row: Mapping[str, Any]) -> int | None:
    for holder in (row, row.get("extra_info") if isinstance(row.get("extra_info"), Mapping) else {}):
        value = holder.get("max_turns")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


@functools.lru_cache(maxsize=32)
def _family(config: SkyRLGymConfig) -> tuple[tuple[str, ...], int]:
    """The ids the rows use and T_max, checked once per config (arlkit builds one environment per
    trajectory): every id is made once, from its first row, and closed at once."""
    ids: list[str] = []
    limits: list[int] = []  # the rows' own max_turns
    own: list[int] = []  # the environments' default max_turns
    for path in config.paths():
        if not path:
            continue
        rows = load_rows(path)
        if not rows:
            raise ValueError(f"{path}: no rows")
        firsts: dict[str, dict[str, Any]] = {}
        for i, row in enumerate(rows):
            name = _check_row(row, i, config.id, path)
            firsts.setdefault(name, row)
            limit = _row_limit(row)
            if limit:
                limits.append(limit)
        for name, row in firsts.items():
            registered = _resolve_id(name)
            ids.append(registered)
            try:  # one environment per id, made and closed at once: the id works with these rows
                env = _make(registered, config, row, None)
            except Exception as exc:  # noqa: BLE001 - foreign code: one line
                raise ValueError(f"cannot make the skyrl-gym environment {registered!r} from {path}: "
                                 f"{one_line(exc)}") from exc
            try:
                limit = getattr(env, "max_turns", None)
                own.append(limit if isinstance(limit, int) and limit > 0 else 1)
            finally:
                close_foreign(env, registered)
    return tuple(ids), config.t_max or max(limits or own)


# -- the environment ------------------------------------------------------------------------------


class SkyRLGymEnv:
    """skyrl-gym rows behind arlkit's protocol (module docstring)."""

    name = "skyrl-gym"
    blocking_steps = True  # skyrl-gym environments run SQL, code or HTTP calls in their steps

    def __init__(self, config: SkyRLGymConfig) -> None:
        skyrl_gym_module()
        self.config = config
        self.t_max = _family(config)[1]
        self._paths = dict(zip(("test", "train"), config.paths()))
        self.splits = ("train", "test") if self._paths["train"] else ("test",)
        self._env: Any = None
        self._closer: weakref.finalize | None = None
        self._budget: int | None = None
        self._task: Task | None = None
        self._instruction = ""
        self._observation = ""
        self._done = False
        self._over = "The episode is over."
        self._actions: list[str] = []  # the replies the environment took since reset: the state

    # -- tasks and budget -------------------------------------------------------------------------

    def tasks(self, split: str, n: int) -> list[Task]:
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; valid choices: {', '.join(self.splits)}"
                             + ("" if self._paths["train"] else " (give --env-arg train_data=PATH for train)"))
        path = self._paths[split]
        rows = load_rows(path)
        if n < 0 or n > len(rows):
            raise ValueError(f"only {len(rows)} {split} tasks exist in {path} (asked for {n})")
        tasks = []
        for i, row in enumerate(rows[:n]):
            name = _check_row(row, i, self.config.id, path)
            digest = hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()[:12]
            tasks.append(Task(f"{name.rpartition(':')[2]}-{split}{i}-{digest}", {"row": row, "index": i}))
        return tasks

    def set_budget(self, budget: int | None) -> None:
        """The turn budget the next trajectory announces; the next ``reset`` makes the environment
        with it as ``max_turns`` (``None``: ``t_max`` when given, else the environment's own)."""
        if budget is not None and budget < 1:
            raise ValueError(f"a budget must be >= 1 turn, got {budget}")
        self._budget = budget

    # -- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the current environment (once: later calls do nothing)."""
        if self._closer is not None:
            self._closer()

    @property
    def closed(self) -> bool:
        return self._closer is None or not self._closer.alive

    # -- the protocol -----------------------------------------------------------------------------

    def reset(self, task: Task, seed: int) -> str:
        self.close()
        self._task, self._done, self._over, self._env, self._actions = task, False, "The episode is over.", None, []
        row = task.payload["row"]
        name = (self.config.id or row.get("env_class", "")).rpartition(":")[2]
        self._instruction = self.config.instruction or f"Solve the task of the skyrl-gym environment {name}."
        try:
            self._env = _make(name, self.config, row, self._budget or self.config.t_max or None)
            self._closer = weakref.finalize(self, close_foreign, self._env, name)
            prompt, _ = self._env.init(copy.deepcopy(row["prompt"]))
        except Exception as exc:  # noqa: BLE001 - foreign code: an error observation, never a traceback
            warn_once(("skyrl-reset", name, type(exc).__name__),
                       f"{name}: the environment could not start: {one_line(exc)}; such trajectories fail")
            self._done = True
            self._observation = self._over = f"The environment could not start: {one_line(exc)}"
            return self._observation
        system = [str(m.get("content") or "") for m in prompt if isinstance(m, Mapping) and m.get("role") == "system"]
        if system and not self.config.instruction:
            self._instruction = "\n\n".join(system)
        shown = [str(m.get("content") or "") for m in prompt if isinstance(m, Mapping) and m.get("role") != "system"]
        self._observation = "\n\n".join(s for s in shown if s) or NO_OBSERVATION
        return self._observation

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_reply(reply, self.config.action_text, allow_empty=True)  # empty replies reach it too

    def step(self, action: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("call reset(task, seed) first")
        if self._done or self._env is None:
            return StepResult(self._over, 0.0, True, False, False)
        env, name = self._env, self._env_name()
        limit = getattr(env, "max_turns", None)
        turns = getattr(env, "turns", None)
        last = isinstance(limit, int) and isinstance(turns, int) and turns + 1 >= limit
        probe = last and self.config.at_limit == "probe"
        try:
            if probe:
                env.max_turns = limit + 1  # so a done on this turn is the environment's own end
            try:
                out = env.step(action if isinstance(action, str) else "")
            finally:
                if probe:
                    env.max_turns = limit
            reward, done = float(out["reward"]), bool(out["done"])
            metadata = out.get("metadata") or {}
            observation = self._observation_text(out.get("observations"), done, reward)
        except Exception as exc:  # noqa: BLE001 - foreign code: an invalid step, never a traceback
            warn_once(("skyrl-step", name, type(exc).__name__),
                       f"{name}: step raised {one_line(exc)}; the turn counts as an invalid action")
            return StepResult(f"Invalid action: the environment raised {one_line(exc)}.\n{self._observation}",
                              0.0, False, False, False)
        self._observation = observation
        self._actions.append(action)
        if last and (probe and not done or not probe and done):
            self._done = True
            return StepResult(f"{observation}\n{TRUNCATED_NOTE}", reward, True, False, True)
        self._done = done
        return StepResult(observation, reward, done, done and self._solved(reward, metadata), True)

    def _env_name(self) -> str:
        spec = getattr(self._env, "spec", None)
        return str(getattr(spec, "id", None) or type(self._env).__name__)

    def _observation_text(self, messages: Any, done: bool, reward: float) -> str:
        if isinstance(messages, str):
            parts = [messages]
        else:
            parts = [str(m.get("content") or "") for m in messages or [] if isinstance(m, Mapping)]
        text = "\n".join(p for p in parts if p)
        if text:
            return text
        return f"The environment ended the episode (reward {reward:g})." if done else NO_OBSERVATION

    def _solved(self, reward: float, metadata: Any) -> bool:
        flag = reported_success(metadata)
        return flag if flag is not None else reward > self.config.success_threshold

    def render(self) -> str:
        return self._observation or "No task: call reset first."

    # The environment is made fresh from the row at reset, so the state is the task and the replies
    # it took: the key hashes them, and restore makes the environment again and replays them.
    def state_key(self) -> str:
        return replay_key(self._task, self._actions)

    def snapshot(self) -> dict[str, Any]:
        return {"task": self._task, "actions": list(self._actions)}

    def restore(self, snapshot: dict[str, Any]) -> None:
        if snapshot["task"] is None:
            self.close()
            self._task, self._env, self._actions, self._observation, self._done = None, None, [], "", False
            return
        self.reset(snapshot["task"], 0)
        for action in snapshot["actions"]:
            self.step(action)

    def prompt_text(self) -> PromptText:
        if self.config.action_format:
            action_format = self.config.action_format
        elif self.config.action_text == "reply":
            action_format = ("Write the reply in the form the instruction asks for, inside <action>...</action>. "
                             "The environment reads the whole reply, <think> included.")
        else:
            action_format = ("Write the action the instruction asks for inside <action>...</action>; only its "
                             "content reaches the environment.")
        return PromptText(self._instruction or "Solve the task.", action_format)


@register_env("skyrl-gym", SkyRLGymConfig)
def _make_skyrl_gym(config: SkyRLGymConfig) -> SkyRLGymEnv:
    return SkyRLGymEnv(config)
