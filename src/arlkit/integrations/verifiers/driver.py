"""One verifiers episode, turned inside out so that arlkit's engine drives it turn by turn.

A verifiers (v1) environment runs its own rollout loop: ``Env.run(task, agents)`` opens an
exchange with ``agents.<seat>.interaction(task)`` and calls ``await interaction.turn(message)``
for every model turn, its per-turn response being whatever the code does between two ``turn``
calls (step a game, check an answer). :class:`VfEpisode` runs that coroutine on a background
event loop and hands it seats whose ``turn`` does not call a model: it passes the message out
(arlkit's observation) and waits for the reply arlkit's policy wrote. The exchange keeps a real
verifiers ``Trace`` (messages, rewards, stop condition), so the environment's own code, the
task's ``@vf.reward``/``@vf.metric`` scoring (``Task.score``) and ``Env.finalize`` run unchanged.

The seat's ``max_turns`` is the announced budget when there is one: the turn after the last
allowed reply comes back ``terminated`` (verifiers' own rule), the trace's stop condition is
``max_turns`` and the episode counts as truncated.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

from arlkit.integrations.verifiers.tools import ToolBox
from arlkit.policies.loop_thread import LoopThread

__all__ = ["LOOP_NAME", "VfEpisode", "shared_loop"]

LOOP_NAME = "arlkit-verifiers"

_loop: LoopThread | None = None
_loop_lock = threading.Lock()


def shared_loop() -> LoopThread:
    """The event loop every verifiers episode of this process runs on (a daemon thread)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = LoopThread(LOOP_NAME)
        return _loop


def _text(message: Any) -> str:
    """The text of a user turn: a string, or messages (typed or wire dicts)."""
    from verifiers.v1.types import content_text

    if message is None:
        return ""
    if isinstance(message, str):
        return message
    parts = []
    for item in message:
        content = item.get("content") if isinstance(item, dict) else getattr(item, "content", None)
        parts.append(content if isinstance(content, str) else content_text(content))
    return "\n\n".join(p for p in parts if p)


class _Exchange:
    """``agents.<seat>.interaction(task)``: an exchange whose model is arlkit's policy."""

    def __init__(self, episode: VfEpisode, seat: str, spec: Any, task: Any) -> None:
        import verifiers.v1 as vf
        from verifiers.v1.session import hook_boundary
        from verifiers.v1.trace import AgentInfo, TraceTask

        self._vf, self._episode, self._task = vf, episode, task
        self.trace = vf.Trace(task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                              agent=AgentInfo(config=spec, name=seat))
        self._started = self._over = self._closed = False
        self._ended: str | None = None  # why the run ended inside a segment (its next turn is terminated)
        self._tools = ToolBox.for_task(episode.vf_env, task)
        self._stops = [fn for fn in task.hooks("stop") if hook_boundary(fn, allow_trace=True) is vf.Trace]
        if task.data.system_prompt:
            self._add(vf.SystemMessage(content=task.data.system_prompt))
        prompt = task.data.prompt
        if isinstance(prompt, str):
            self._add(vf.UserMessage(content=prompt))
        elif prompt is not None:
            for message in prompt:
                self._add(message if not isinstance(message, dict) else vf.UserMessage(**message))

    def _add(self, message: Any, sampled: bool = False) -> None:
        from verifiers.v1.graph import MessageNode

        parent = len(self.trace.nodes) - 1 if self.trace.nodes else None
        self.trace.nodes.append(MessageNode(parent=parent, message=message, sampled=sampled))

    async def turn(self, message: Any = None) -> Any:
        vf = self._vf
        from verifiers.v1.agent import Segment

        if self._closed:
            raise RuntimeError("this interaction is closed")
        if self._over:
            raise RuntimeError("the exchange is over (the run ended); read interaction.trace")
        prompted = not self._started and self._task.data.prompt is not None
        if message is None and not prompted:
            raise ValueError("nothing to run a turn on: this exchange takes its next user message")
        if message is not None and prompted:
            raise ValueError("the task's prompt opens this exchange: take its first reply with a bare turn()")
        self._started = True
        if message is None:
            observation = self._task.data.prompt_text
        else:
            observation = _text(message)
            if isinstance(message, str):
                self._add(vf.UserMessage(content=message))
            else:
                for item in message:
                    self._add(vf.UserMessage(**item) if isinstance(item, dict) else item)
        if self._ended is None and self._episode.replies >= self._episode.max_turns:
            self._end("max_turns")
        if self._ended is None and (stopped := await self._stopped()):
            self._end(stopped)
        if self._ended is not None:
            self._over = True
            return Segment(messages=[], terminated=True)
        return Segment(messages=await self._segment(observation))

    async def _stopped(self) -> str | None:
        """The name of the first task ``@vf.stop`` (on the trace) that fires, checked before
        each model call as verifiers checks them; such a stop is the task's own end."""
        from verifiers.v1.errors import TaskError
        from verifiers.v1.session import call_hook

        for stop in self._stops:
            fired = await call_hook(stop, {self._vf.Trace: self.trace})
            if not isinstance(fired, bool):
                raise TaskError(f"@stop must return bool, got {type(fired).__name__}")
            if fired:
                return stop.__name__
        return None

    def _end(self, condition: str) -> None:
        """The run ends: ``max_turns`` (a truncation) or a ``@vf.stop`` (the task's own end)."""
        self._ended = condition
        self.trace.stop(condition)
        self._episode.truncated = condition == "max_turns"

    async def _segment(self, observation: str) -> list[Any]:
        """Model calls until a reply without tool calls (verifiers' segment): every call is one
        arlkit turn; tool results are the next turn's observation."""
        vf = self._vf
        messages: list[Any] = []
        while True:
            reply = await self._episode.ask(observation)
            calls = self._tools.calls(reply) if self._tools else []
            tool_calls = [vf.ToolCall(id=i, name=name, arguments=raw) for i, name, raw in calls] or None
            answer = vf.AssistantMessage(content=reply, tool_calls=tool_calls)
            self._add(answer, sampled=True)
            messages.append(answer)
            if not calls:
                return messages
            results = []
            for call_id, name, raw in calls:
                text = await self._tools.call(name, raw, self.trace.state)
                result = vf.ToolMessage(tool_call_id=call_id, content=text, name=name)
                self._add(result)
                messages.append(result)
                results.append(f"Tool result ({name}): {text}")
            observation = "\n".join(results)
            if self._episode.replies >= self._episode.max_turns:
                self._end("max_turns")  # the run ends at the limit, with the tool results unanswered
                return messages
            if stopped := await self._stopped():
                self._end(stopped)
                return messages

    async def close(self) -> Any:
        """End the exchange and score it with the task's own rewards and metrics (idempotent)."""
        if self._closed:
            return self.trace
        self._closed = True
        self._episode.exchange_open = False
        if self.trace.stop_condition is None:
            self.trace.stop("user_closed")
        try:
            await self._tools.close()
            await self._task.score(self.trace)
            self.trace.ok = True
        except Exception as exc:
            self.trace.record_error(exc)
            raise
        finally:
            self.trace.is_completed = True
            self._episode.traces.append(self.trace)
        return self.trace

    async def __aenter__(self) -> _Exchange:
        await self._tools.open(self._task)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            await self.close()
        else:
            self._closed = True
            self._episode.exchange_open = False
            await self._tools.close()


class _Seat:
    """``agents.<seat>``: ``interaction(task)`` and ``run(task)`` (one turn) with arlkit's policy."""

    def __init__(self, episode: VfEpisode, name: str, spec: Any) -> None:
        self._episode, self._name, self._spec = episode, name, spec
        self.trainable = True

    def interaction(self, task: Any, **_: Any) -> _Exchange:
        if self._episode.exchange_open:
            raise RuntimeError(f"seat {self._name!r}: arlkit plays one exchange at a time")
        self._episode.exchange_open = True
        return _Exchange(self._episode, self._name, self._spec, task)

    async def run(self, task: Any, **_: Any) -> Any:
        async with self.interaction(task) as exchange:
            if task.data.prompt is not None:
                await exchange.turn()
        return exchange.trace


class _OtherSeat:
    """A seat arlkit does not play: using it is a one-line error."""

    def __init__(self, name: str, played: str) -> None:
        self._message = (f"the verifiers env needs a model for its seat {name!r} too; arlkit's policy plays only "
                         f"{played!r} (choose with --env-arg role=NAME)")
        self.trainable = False

    def interaction(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError(self._message)

    async def run(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError(self._message)


class VfEpisode:
    """``vf_env.setup`` + ``vf_env.run`` + ``vf_env.finalize`` on one task, driven from a
    synchronous caller: :meth:`start` and :meth:`send` return the next event, ``("obs", text)``
    (the environment waits for a reply), ``("end", None)`` or ``("error", exception)``."""

    def __init__(self, vf_env: Any, task: Any, seat: str, max_turns: int) -> None:
        import verifiers.v1 as vf
        from verifiers.v1.episode import EnvInfo
        from verifiers.v1.trace import TraceTask

        self.vf_env, self.task, self.seat, self.max_turns = vf_env, task, seat, max_turns
        self.replies = 0
        self.truncated = False
        self.exchange_open = False
        self.traces: list[Any] = []
        self.record = vf.Episode(env=EnvInfo(id=vf_env.config.env_id),
                                 task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash))
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._replies: asyncio.Queue[str] | None = None
        self._future: Any = None
        self._loop = shared_loop()

    # -- the coroutine side ------------------------------------------------------------------

    async def ask(self, observation: str) -> str:
        assert self._replies is not None
        self._events.put(("obs", observation))
        reply = await self._replies.get()
        self.replies += 1
        return reply

    async def _main(self) -> None:
        import verifiers.v1 as vf

        self._replies = asyncio.Queue()

        def make(name: str, spec: Any) -> Any:
            return _Seat(self, name, spec) if name == self.seat else _OtherSeat(name, self.seat)

        agents = vf.Agents(self.vf_env.config, make)
        try:
            await self.vf_env.setup(agents)
            await self.vf_env.run(self.task, agents)
            if not self.traces:
                raise ValueError(f"{type(self.vf_env).__name__}.run() ran no agent")
            self.record.traces.extend(self.traces)
            await self.vf_env.finalize(self.task, self.record)
        except Exception as exc:  # noqa: BLE001 - foreign code: reported as an event, never raised here
            self._events.put(("error", exc))
            return
        self._events.put(("end", None))

    # -- the caller side ----------------------------------------------------------------------

    def _wait(self, timeout: float) -> tuple[str, Any]:
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return "error", TimeoutError(f"the environment did not answer within {timeout:g} s")

    def start(self, timeout: float) -> tuple[str, Any]:
        self._future = self._loop.submit(self._main())
        return self._wait(timeout)

    def send(self, reply: str, timeout: float) -> tuple[str, Any]:
        replies = self._replies
        assert replies is not None
        self._loop.submit(replies.put(reply))
        return self._wait(timeout)

    def reward(self) -> float:
        """The episode's reward: the summed weighted rewards of the played seat's traces."""
        return float(sum(trace.reward for trace in self.traces))

    def ok(self) -> bool:
        return bool(self.traces) and all(trace.ok for trace in self.traces)

    def cancel(self) -> None:
        """Stop the coroutine if it still runs (the trajectory ended first)."""
        if self._future is not None and not self._future.done():
            self._future.cancel()
