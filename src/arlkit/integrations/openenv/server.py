"""arlkit environments served as OpenEnv environments.

``python -m arlkit.integrations.openenv.server --env frozenlake --port 8000 [--env-arg k=v]
[--max-sessions N]`` serves any arlkit environment with OpenEnv's own server (``HTTPEnvServer``:
a WebSocket session per client at ``/ws``, plus ``/reset``, ``/step``, ``/schema``, ``/health``),
so OpenEnv's clients (``GenericEnvClient``, ``EnvClient`` subclasses) and runners drive it.
Each session is an :class:`~arlkit.integrations.episode.ArlkitEpisode`:

- ``reset(seed=..., task=..., budget=...)``: ``task`` (an index or task id of the pool) picks the
  task, else ``seed`` draws one; ``budget`` is the announced turn budget (default T_max). The
  observation carries the first observation (``text``) and what a model needs to act
  (``system_prompt``, ``instruction``, ``action_format``, ``budget``, ``task_id``).
- ``step(ArlkitAction(text=...))``: one turn. ``done`` is the environment's own end or the budget
  spent; ``truncated`` says which, ``success`` is arlkit's verdict, ``valid`` whether the action
  was admissible; an environment with a finite action set lists them in ``admissible_actions``.
- ``GET /arlkit``: the environment, T_max, the session limit and the session counts (opened,
  closed, refused, active, peak), which arlkit's OpenEnv client reads for its defaults.

More sessions than ``--max-sessions`` are refused by OpenEnv (``CAPACITY_REACHED``).
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
from typing import Any

import numpy as np

from arlkit.config import ConfigError
from arlkit.envs.capabilities import ActionSpace
from arlkit.integrations.episode import ArlkitEpisode

__all__ = ["SessionCounts", "make_app", "main"]


def _openenv() -> Any:
    try:
        from openenv.core.env_server import http_server, interfaces, types
    except ImportError as exc:
        from arlkit.integrations.openenv.env import INSTALL_HINT

        raise ConfigError(INSTALL_HINT) from exc
    return http_server, interfaces, types


class SessionCounts:
    """Sessions opened, closed and refused so far, and the most open at once as OpenEnv's server
    counts them (thread-safe: OpenEnv opens sessions in worker threads)."""

    def __init__(self) -> None:
        self.opened = self.closed = self.refused = self.peak = 0
        self.active: Any = None  # the server's count of open sessions, this one's included
        self._lock = threading.Lock()

    def open(self) -> None:
        with self._lock:
            self.opened += 1
            self.peak = max(self.peak, self.active() if self.active else self.opened - self.closed)

    def refuse(self) -> None:
        with self._lock:
            self.refused += 1

    def close(self) -> None:
        with self._lock:
            self.closed += 1


@functools.cache
def _types() -> tuple[type, type, type, type]:
    """The pydantic Action and Observation types (one with ``admissible_actions``) and the
    Environment base class, built once OpenEnv is imported."""
    _, interfaces, types = _openenv()
    from pydantic import Field

    class ArlkitAction(types.Action):  # type: ignore[name-defined,misc]
        """One turn: the action text (or, on a server started with ``--parse-replies``, a whole reply)."""

        text: str = Field(..., description="the action text, e.g. 'Up' or a SQL query")

    class ArlkitObservation(types.Observation):  # type: ignore[name-defined,misc]
        """What an arlkit environment shows after reset or a step."""

        text: str = Field(default="", description="the observation")
        task_id: str = ""
        system_prompt: str = Field(default="", description="the budget-aware system prompt arlkit shows a model")
        instruction: str = ""
        action_format: str = ""
        budget: int = 0
        turn: int = 0
        valid: bool = True
        success: bool = False
        truncated: bool = Field(default=False, description="done because the turn budget is spent")

    class ArlkitActionsObservation(ArlkitObservation):
        """An observation of an environment with a finite action set."""

        admissible_actions: list[str] = Field(default_factory=list)

    return ArlkitAction, ArlkitObservation, ArlkitActionsObservation, interfaces.Environment


@functools.cache
def _environment_class() -> type:
    base = _types()[3]

    class ArlkitEnvironment(base):  # type: ignore[misc,valid-type]
        """One OpenEnv session on an arlkit environment (module docstring)."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self, env_name: str, observation_cls: type, counts: SessionCounts, options: dict[str, Any],
                     env_args: dict[str, Any]) -> None:
            super().__init__()
            self.episode = ArlkitEpisode(env_name, **options, **env_args)
            self.default_budget = self.episode.budget
            self.observation_cls, self.counts = observation_cls, counts
            self.episode_id: str | None = None
            counts.open()
            self._closed = False

        def _observation(self, text: str, **fields: Any) -> Any:
            if "admissible_actions" in self.observation_cls.model_fields and isinstance(self.episode.env, ActionSpace):
                fields["admissible_actions"] = [str(a) for a in self.episode.env.admissible_actions()]
            return self.observation_cls(text=text, task_id=self.episode.task_id or "", budget=self.episode.budget,
                                        turn=self.episode.turns, **fields)

        def reset(self, seed: int | None = None, episode_id: str | None = None, task: Any = None,
                  budget: int | None = None, **kwargs: Any) -> Any:
            if budget is not None and int(budget) < 1:
                raise ValueError(f"a budget must be >= 1 turn, got {budget}")
            self.episode.budget = int(budget) if budget is not None else self.default_budget
            self.episode_id = episode_id
            text, info = self.episode.reset(task=task, rng=np.random.default_rng(seed))
            return self._observation(text, system_prompt=info["system_prompt"], instruction=info["instruction"],
                                     action_format=info["action_format"], reward=0.0)

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            text, reward, terminated, truncated, info = self.episode.step(action.text)
            return self._observation(text, reward=reward, done=terminated or truncated, valid=info["valid"],
                                     success=bool(info["success"]) and terminated, truncated=truncated)

        @property
        def state(self) -> Any:
            from openenv.core.env_server.types import State

            return State(episode_id=self.episode_id, step_count=self.episode.turns, task_id=self.episode.task_id)

        def close(self) -> None:
            if not self._closed:
                self._closed = True
                self.episode.close()
                self.counts.close()

    return ArlkitEnvironment


@functools.cache
def _counting_server() -> type:
    """OpenEnv's server, counting the sessions it refuses at its limit."""
    http_server, _, _ = _openenv()
    from openenv.core.env_server.exceptions import SessionCapacityError

    class CountingServer(http_server.HTTPEnvServer):  # type: ignore[misc,name-defined]
        counts: SessionCounts

        async def _create_session(self) -> Any:
            try:
                return await super()._create_session()
            except SessionCapacityError:
                self.counts.refuse()
                raise

    return CountingServer


class _QuietDisconnects:
    """ASGI middleware: a WebSocket client that leaves while OpenEnv's server closes its session
    (``GenericEnvClient.close`` sends ``close`` and hangs up) is a normal end, not an error to log
    with a traceback."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            hung_up = type(exc).__name__ in ("WebSocketDisconnect", "ClientDisconnected")
            if scope.get("type") != "websocket" or not hung_up:
                raise


def make_app(env_name: str = "frozenlake", *, max_sessions: int = 64, split: str = "test",
             n_tasks: int | None = None, parse_replies: bool = False, counters: bool = False,
             **env_args: Any) -> Any:
    """A FastAPI app serving ``env_name`` through OpenEnv's server, at most ``max_sessions``
    sessions at once; ``app.state.session_counts`` holds the :class:`SessionCounts`. A bad
    environment name or option is a one-line ``ValueError`` here, before any session."""
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
    options = {"split": split, "n_tasks": n_tasks, "parse_replies": parse_replies, "counters": counters}
    probe = ArlkitEpisode(env_name, **options, **env_args)  # checks the name and options once, up front
    http_server, _, _ = _openenv()
    from fastapi import FastAPI

    action_cls, observation_cls, actions_observation_cls, _ = _types()
    finite = isinstance(probe.env, ActionSpace)
    t_max, name = probe.env.t_max, probe.env.name
    probe.close()
    counts = SessionCounts()
    chosen = actions_observation_cls if finite else observation_cls
    factory = functools.partial(_environment_class(), env_name, chosen, counts, options, env_args)
    server = _counting_server()(factory, action_cls, chosen, max_concurrent_envs=max_sessions)
    server.counts, counts.active = counts, lambda: server.active_sessions
    app = FastAPI(title=f"arlkit {name} (OpenEnv)")
    server.register_routes(app)
    app.add_middleware(_QuietDisconnects)

    @app.get("/arlkit")
    def arlkit_info() -> dict[str, Any]:
        """What arlkit's OpenEnv client reads: T_max, the session limit and the session counts."""
        return {"env": name, "t_max": t_max, "max_sessions": max_sessions, "finite_actions": finite,
                "active_sessions": server.active_sessions, "sessions_opened": counts.opened,
                "sessions_closed": counts.closed, "sessions_refused": counts.refused, "peak_sessions": counts.peak}

    app.state.session_counts = counts
    return app


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m arlkit.integrations.openenv.server",
                                     description="Serve an arlkit environment as an OpenEnv environment.")
    parser.add_argument("--env", default="frozenlake", help="the arlkit environment (default frozenlake)")
    parser.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="environment option (repeatable)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--fd", type=int, default=None,
                        help="serve on this inherited listening socket instead of --host/--port (socket activation)")
    parser.add_argument("--max-sessions", type=int, default=64, help="sessions open at once (default 64)")
    parser.add_argument("--split", choices=("train", "test"), default="test", help="task split (default test)")
    parser.add_argument("--n-tasks", type=int, default=None, help="tasks of the split to draw from (default up to 100)")
    parser.add_argument("--parse-replies", action="store_true", help="actions are whole model replies")
    parser.add_argument("--counters", action="store_true", help="observations end with the turn counter")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the server until interrupted; a bad option is one line on stderr and exit code 2."""
    args = _parser().parse_args(argv)
    from arlkit.config import parse_key_values

    try:
        env_args = parse_key_values(args.env_arg, option="--env-arg")
        app = make_app(args.env, max_sessions=args.max_sessions, split=args.split, n_tasks=args.n_tasks,
                       parse_replies=args.parse_replies, counters=args.counters, **env_args)
    except Exception as exc:  # noqa: BLE001 - a bad name or option: one line, never a traceback
        print(f"error: {' '.join(str(exc).split()) or type(exc).__name__}", file=sys.stderr)
        return 2
    import uvicorn

    where: dict[str, Any] = {"fd": args.fd} if args.fd is not None else {"host": args.host, "port": args.port}
    uvicorn.run(app, log_level="warning", **where)
    return 0


if __name__ == "__main__":
    sys.exit(main())
