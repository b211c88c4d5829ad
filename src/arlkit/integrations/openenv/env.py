"""OpenEnv servers as arlkit environments (``--env openenv --env-arg url=http://HOST:PORT``).

Each environment instance holds one session of the server (OpenEnv's WebSocket client,
``GenericEnvClient``): opened at the first ``reset``, closed by ``close()``, which the rollout
engine calls when each trajectory ends. The rules (docs/integrations.md, "OpenEnv, both ways"):

- A task is a reset seed (test seeds ``0..``, train seeds ``1_000_000_000..``, as the Gymnasium
  bridge). The announced budget reaches the server as ``reset(seed=..., budget=T, remaining=T,
  t_max=T_max)``; OpenEnv passes an environment only the keywords its ``reset`` accepts.
- The action text fills one field of the server's action schema (``action_field``; default: the
  schema's only field, or its only required string field); integer and number fields are parsed.
- The observation shown is one field of the observation (``observation_field``; default: its
  only text field), else its fields as JSON. A list field ``admissible_actions`` (or the one named
  by ``actions_field``) makes the actions a finite set (the ``random`` policy works).
- Success needs ``done`` without ``truncated`` (a boolean field of the observation: OpenEnv's wire
  format drops ``metadata``); then a ``success``/``is_success`` field decides where the server
  sends one, else a reward above ``success_threshold``. A truncated step ends the trajectory
  without success and keeps its reward.
- T_max and the session limit come from the options, else from the server where it reports them
  (arlkit's own server answers ``GET /arlkit``), else T_max is 50 and the session limit 1 (OpenEnv's
  own default), each with a warning. ``max_sessions`` caps the trajectories the engine keeps
  alive. A refused session is tried again for up to ``session_wait_s`` (a server frees a session a
  moment after its client has hung up, so the next trajectory may knock early); refused to the
  end, the trajectory fails with one line, never a traceback.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arlkit.config import ConfigError
from arlkit.envs.bridge import TRAIN_SEED_OFFSET, TRUNCATED_NOTE, one_line, parse_reply, warn_once
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.extras import install_hint

__all__ = ["NAME", "OpenEnvActionsEnv", "OpenEnvConfig", "OpenEnvEnv", "server_facts"]

NAME = "openenv"
INSTALL_HINT = f"the openenv adapter needs openenv-core: {install_hint('openenv', make_target='install-extras')}"
DEFAULT_T_MAX = 50
ACTION_TEXTS = ("action", "reply")
SCHEMES = ("http://", "https://", "ws://", "wss://")
# Observation fields that describe the episode rather than show it (arlkit's server sends them).
_EPISODE_FIELDS = {"done", "reward", "metadata", "instruction", "action_format", "system_prompt", "task_id",
                   "turn", "budget", "valid", "success", "truncated", "admissible_actions"}
_facts: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
_facts_lock = threading.Lock()


@dataclass(frozen=True)
class OpenEnvConfig:
    """Configuration of the OpenEnv client environment.

    Attributes:
        url: the server, ``http://HOST:PORT`` (or ``ws://``); required.
        action_field: the field of the server's action that gets the action text (default: the
            schema's only field, or its only required text field).
        observation_field: the field of the observation shown to the model (default: its only
            text field; without one, the observation's fields as JSON).
        actions_field: a list field of the observation holding the admissible actions (default:
            ``admissible_actions`` where the observation schema has it).
        instruction: the task-specific instruction of the prompt (default: the server's
            ``instruction`` field at reset, else a generic one).
        action_format: how to write an action (default: the server's ``action_format`` field).
        t_max: the full turn budget (0: the server's own where it reports one, else 50).
        max_sessions: the most sessions open at once (0: the server's limit where it reports one,
            else 1, the default limit of OpenEnv's server).
        success_threshold: without a ``success`` flag, ending with a reward above this is success.
        n_tasks: seeds per split.
        action_text: ``action``: the content of the reply's ``<action>`` tag; ``reply``: the whole reply.
        timeout_s: how long to wait for the server's answer to one message.
        session_wait_s: how long a refused session is tried again before the trajectory fails.
    """

    url: str = ""
    action_field: str = ""
    observation_field: str = ""
    actions_field: str = ""
    instruction: str = ""
    action_format: str = ""
    t_max: int = 0
    max_sessions: int = 0
    success_threshold: float = 0.0
    n_tasks: int = 1000
    action_text: str = "action"
    timeout_s: float = 60.0
    session_wait_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.url:
            raise ValueError("give the OpenEnv server: --env-arg url=http://HOST:PORT")
        if not self.url.startswith(SCHEMES):
            raise ValueError(f"url {self.url!r} must start with one of: {', '.join(SCHEMES)}")
        if self.t_max < 0 or self.max_sessions < 0 or self.n_tasks < 1 or not self.timeout_s > 0 \
                or not self.session_wait_s >= 0:
            raise ValueError("t_max, max_sessions and session_wait_s must be >= 0, n_tasks >= 1 and timeout_s > 0")
        if self.action_text not in ACTION_TEXTS:
            raise ValueError(f"unknown action_text {self.action_text!r}; valid choices: {', '.join(ACTION_TEXTS)}")


def _http_url(url: str) -> str:
    url = url.rstrip("/")
    return "http" + url[2:] if url.startswith("ws") else url


def _get_json(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - a URL the user gave
        return json.loads(response.read().decode("utf-8"))


def server_facts(url: str, timeout: float = 10.0) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The server's ``/schema`` (action and observation JSON schemas) and, where it answers
    ``GET /arlkit`` (arlkit's server), what it reports (T_max, session limit, session counts);
    read once per URL and process. An unreachable server is a one-line ``ValueError``."""
    base = _http_url(url)
    with _facts_lock:
        if base in _facts:
            return _facts[base]
    try:
        schema = _get_json(f"{base}/schema", timeout)
        if not isinstance(schema, dict) or not isinstance(schema.get("action"), dict):
            raise ValueError("its /schema has no action schema")
    except Exception as exc:  # noqa: BLE001 - foreign server: one line
        raise ValueError(f"cannot read the OpenEnv server at {url}: {one_line(exc)} (start one, e.g. python -m "
                         "arlkit.integrations.openenv.server --env frozenlake --port 8000)") from exc
    try:
        info = _get_json(f"{base}/arlkit", timeout)
    except (urllib.error.URLError, OSError, ValueError):
        info = None  # not arlkit's server: no T_max or session limit reported
    facts = (schema, info if isinstance(info, dict) else None)
    with _facts_lock:
        _facts[base] = facts
    return facts


def _client_class() -> Any:
    try:
        from openenv.core.generic_client import GenericEnvClient
    except ImportError:  # a ConfigError: the CLI says it in one line, exit code 2
        raise ConfigError(INSTALL_HINT) from None
    return GenericEnvClient


def _close_quietly(client: Any, url: str) -> None:
    try:
        client.close()
    except Exception as exc:  # noqa: BLE001 - closing must not sink the rollout
        warn_once(("openenv-close", url, type(exc).__name__), f"{url}: closing the session raised {one_line(exc)}")


def _pick(fields: Mapping[str, Any], given: str, what: str) -> str:
    if given not in fields:
        raise ValueError(f"{what} has no field {given!r}; valid choices: {', '.join(fields) or '(none)'}")
    return given


def _action_field(schema: Mapping[str, Any], given: str) -> tuple[str, str]:
    """The action field that gets the text and its JSON type."""
    fields = {k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"}
    required = [k for k in schema.get("required") or [] if k in fields]
    if given:
        field = _pick(fields, given, "the server's action")
    elif len(fields) == 1:
        field = next(iter(fields))
    else:
        texts = [k for k in required if (fields[k] or {}).get("type") == "string"]
        if len(texts) != 1:
            raise ValueError(f"the server's action has fields {', '.join(fields) or '(none)'}: give "
                             "--env-arg action_field=NAME")
        field = texts[0]
    others = [k for k in required if k != field]
    if others:
        raise ValueError(f"the server's action also requires {', '.join(others)}; the adapter fills one field "
                         f"({field})")
    return field, str((fields[field] or {}).get("type", "string"))


def _observed(schema: Mapping[str, Any]) -> dict[str, Any]:
    return dict((schema.get("observation") or {}).get("properties") or {})


def _actions_field(schema: Mapping[str, Any], given: str) -> str | None:
    """The observation's list of admissible actions, where it has one."""
    observed = _observed(schema)
    if given:
        return _pick(observed, given, "the server's observation")
    return "admissible_actions" if "admissible_actions" in observed else None


class OpenEnvEnv:
    """An OpenEnv server's environment behind arlkit's protocol (module docstring)."""

    name = NAME
    blocking_steps = True  # every reset and step is a round trip to the server

    def __init__(self, config: OpenEnvConfig) -> None:
        self.config = config
        self._client_cls = _client_class()
        schema, info = server_facts(config.url)
        self.server_info = info
        self._action_field, self._action_type = _action_field(schema["action"], config.action_field)
        observed = _observed(schema)
        if config.observation_field:
            self._observation_field: str | None = _pick(observed, config.observation_field, "the server's observation")
        else:
            texts = [k for k, v in observed.items() if k not in _EPISODE_FIELDS and (v or {}).get("type") == "string"]
            self._observation_field = texts[0] if len(texts) == 1 else None
        self._actions_field = _actions_field(schema, config.actions_field)
        self.t_max = config.t_max or int((info or {}).get("t_max") or 0)
        if not self.t_max:
            warn_once(("openenv-t_max", config.url), f"{config.url}: no t_max given and the server reports none; "
                       f"T_max is {DEFAULT_T_MAX} (give --env-arg t_max=N)")
            self.t_max = DEFAULT_T_MAX
        cap = config.max_sessions or int((info or {}).get("max_sessions") or 0)
        if not cap:
            warn_once(("openenv-sessions", config.url), f"{config.url}: the server reports no session limit; one "
                       "trajectory runs at a time (OpenEnv's default limit): give --env-arg max_sessions=N (its limit)")
            cap = 1
        self.max_sessions = cap
        self._client: Any = None
        self._closer: Any = None
        self._budget: int | None = None
        self._task: Task | None = None
        self._turns = 0
        self._last: dict[str, Any] = {}
        self._first: dict[str, Any] = {}
        self._observation = ""
        self._done = False
        self._over = "The episode is over."

    # -- the session ----------------------------------------------------------------------------

    def _open(self) -> Any:
        client = self._client_cls(base_url=self.config.url, message_timeout_s=self.config.timeout_s).sync()
        self._client = client
        self._closer = weakref.finalize(self, _close_quietly, client, self.config.url)
        return client

    def close(self) -> None:
        """End the server session (once; a later ``reset`` opens a new one)."""
        if self._closer is not None:
            self._closer()
        self._client, self._closer = None, None

    @property
    def closed(self) -> bool:
        return self._client is None

    def set_budget(self, budget: int | None) -> None:
        """The turn budget the next trajectory's prompts announce (``None``: none announced);
        the next ``reset`` sends it to the server."""
        if budget is not None and budget < 1:
            raise ValueError(f"a budget must be >= 1 turn, got {budget}")
        self._budget = budget

    # -- the protocol ---------------------------------------------------------------------------

    def tasks(self, split: str, n: int) -> list[Task]:
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r}; valid choices: train, test")
        if n < 0 or n > self.config.n_tasks:
            raise ValueError(f"only {self.config.n_tasks} {split} tasks exist (asked for {n})")
        offset = TRAIN_SEED_OFFSET if split == "train" else 0
        return [Task(f"{NAME}#seed{offset + i}", {"seed": offset + i}) for i in range(n)]

    def reset(self, task: Task, seed: int) -> str:
        self._task, self._done, self._over, self._last, self._turns = task, False, "The episode is over.", {}, 0
        kwargs: dict[str, Any] = {"seed": int(task.payload["seed"])}
        if self._budget is not None:
            kwargs.update(budget=self._budget, remaining=self._budget, t_max=self.t_max)
        deadline, delay = time.monotonic() + self.config.session_wait_s, 0.02
        while True:
            try:
                result = (self._client or self._open()).reset(**kwargs)
                break
            except Exception as exc:  # noqa: BLE001 - foreign server: an error observation, never a traceback
                self.close()  # a refused or broken session is of no further use
                refused = "CAPACITY_REACHED" in str(exc) or type(exc).__name__.startswith("ConnectionClosed")
                if not refused or time.monotonic() + delay > deadline:
                    return self._could_not_start(exc, refused)
                time.sleep(delay)  # the server frees a session a moment after its client hung up
                delay = min(2 * delay, 0.5)
        self._first = self._last = self._fields(result.observation)
        self._observation = self._render(self._last)
        return self._observation

    def _could_not_start(self, exc: Exception, refused: bool) -> str:
        reason = one_line(exc)
        if refused:
            limit = re.search(r"\d+/(\d+) sessions", reason)
            cap = limit.group(1) if limit else (self.server_info or {}).get("max_sessions", "N")
            reason = (f"the server refused a session ({reason}); give --env-arg max_sessions={cap} (its session "
                      "limit) so that the engine keeps no more trajectories alive")
        warn_once(("openenv-reset", self.config.url, type(exc).__name__),
                   f"{self.config.url}: reset failed: {reason}; such trajectories fail")
        self._done = True
        self._observation = self._over = f"The environment could not start: {reason}"
        return self._observation

    @staticmethod
    def _fields(observation: Any) -> dict[str, Any]:
        return dict(observation) if isinstance(observation, Mapping) else {"observation": observation}

    @staticmethod
    def _flag(fields: Mapping[str, Any], *names: str) -> bool | None:
        """The first of ``names`` that is a boolean field of the observation."""
        return next((fields[name] for name in names if isinstance(fields.get(name), bool)), None)

    def _render(self, fields: Mapping[str, Any]) -> str:
        if self._observation_field is not None:
            return str(fields.get(self._observation_field, ""))
        shown = {k: v for k, v in fields.items() if k not in _EPISODE_FIELDS}
        return json.dumps(shown, ensure_ascii=False, sort_keys=True, default=str) if shown else "(no observation)"

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_reply(reply, self.config.action_text)

    def _value(self, text: str) -> Any:
        if self._action_type == "integer":
            return int(text.strip())
        if self._action_type == "number":
            return float(text.strip())
        return text

    def step(self, action: str) -> StepResult:
        if self._done or self._client is None:
            return StepResult(self._over if self._done else "No task: call reset first.", 0.0, True, False, False)
        try:
            value = self._value(action)
        except ValueError:
            return StepResult(f"Invalid action: expected a {self._action_type}.\n{self._observation}",
                              0.0, False, False, False)
        try:
            result = self._client.step({self._action_field: value})
        except RuntimeError as exc:  # the server answered with an error: the session goes on
            warn_once(("openenv-step", self.config.url), f"{self.config.url}: a step failed: {one_line(exc)}")
            return StepResult(f"Invalid action: the environment raised {one_line(exc)}\n{self._observation}",
                              0.0, False, False, False)
        except Exception as exc:  # noqa: BLE001 - the connection is gone: the trajectory ends, no success
            self.close()
            self._done = True
            self._observation = self._over = f"The environment's session ended: {one_line(exc)}"
            return StepResult(self._observation, 0.0, True, False, False)
        self._turns += 1
        fields = self._fields(result.observation)
        reward = float(result.reward or 0.0)
        truncated = bool(self._flag(fields, "truncated"))
        valid = self._flag(fields, "valid") is not False
        self._done = bool(result.done) or truncated
        solved = self._done and not truncated and self._solved(reward, fields)
        # A server that truncates at the announced budget it was sent ends the turn the engine's own
        # budget ends: the engine records that end (ended_by: budget).
        at_budget = truncated and self._budget is not None and self._turns >= self._budget
        if valid:
            self._last = fields
        self._observation = self._render(fields)
        if truncated:
            self._observation = f"{self._observation}\n{TRUNCATED_NOTE}"
        if self._done:
            self._over = f"The episode is over.\n{self._observation}"
        return StepResult(self._observation, reward, self._done and not at_budget, solved, valid)

    def _solved(self, reward: float, fields: Mapping[str, Any]) -> bool:
        flag = self._flag(fields, "success", "is_success")
        return flag if flag is not None else reward > self.config.success_threshold

    def render(self) -> str:
        return self._observation or "No task: call reset first."

    def prompt_text(self) -> PromptText:
        def served(key: str) -> str:
            value = self._first.get(key)
            return value if isinstance(value, str) else ""

        instruction = (self.config.instruction or served("instruction")
                       or f"Interact with the OpenEnv environment at {self.config.url}.")
        action_format = self.config.action_format or served("action_format")
        if not action_format:
            kind = {"integer": "an integer", "number": "a number"}.get(self._action_type, "text")
            action_format = f"Write the action as {kind} inside the action tags: <action>your action</action>."
        return PromptText(instruction, action_format)


class OpenEnvActionsEnv(OpenEnvEnv):
    """An OpenEnv environment whose observations list the admissible actions: a finite action
    set, so the ``random`` policy and action-set features work."""

    def admissible_actions(self) -> list[str]:
        """The last observation's list; ``["none"]`` when it lists none (a session that could not
        start: any action ends the trajectory)."""
        actions = self._last.get(self._actions_field or "", [])
        return [str(a) for a in actions] if isinstance(actions, list) and actions else ["none"]


@register_env(NAME, OpenEnvConfig)
def make_openenv(config: OpenEnvConfig) -> OpenEnvEnv:
    """:class:`OpenEnvActionsEnv` where the server's observations list the admissible actions."""
    _client_class()
    schema, _ = server_facts(config.url)
    finite = _actions_field(schema, config.actions_field) is not None
    return (OpenEnvActionsEnv if finite else OpenEnvEnv)(config)
