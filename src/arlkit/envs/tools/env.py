"""BFCL-v3-style multi-turn tool calling (docs/environments_sql_tools.md; RT App. A.1; T_max 24).

Episode semantics:

- The user's requests arrive one at a time; observation 0 is request 1. The instruction lists the
  tools of the entry's API classes with their signatures and documentation.
- An action holds tool calls in Python call syntax with literal arguments (at most
  ``max_calls_per_action``, default 1), parsed by :func:`~arlkit.envs.tools.calls.parse_calls` and
  never evaluated. It may end with ``finish_turn()``, alone or after the calls, which hands the
  request back to the user: the turn is checked (:mod:`~arlkit.envs.tools.checks`), and the next
  request appears, or the episode ends with success after the last one (reward 1) or with failure
  as soon as a request fails its check (reward 0).
- Anything that does not parse, names an unknown function, has arguments of the wrong type or
  number, puts ``finish_turn()`` anywhere but last, or has too many calls is an **invalid** action:
  nothing is executed and the state is unchanged. A call that runs but fails inside the tool
  (a missing file) is valid; its result is the error.
- With one call per action, the ground-truth path of an entry needs ``sum over turns of
  max(1, calls)`` actions (``finish_turn()`` rides on each turn's last call; a turn with no calls
  needs one ``finish_turn()``): at least the number of ground-truth calls, RT App. B.3's bound.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.splits import split_of
from arlkit.envs.tools.api_base import ArgumentError, ToolSpec, public_state
from arlkit.envs.tools.apis import FINISH, instantiate, render_apis, specs_for
from arlkit.envs.tools.calls import CallSyntaxError, parse_calls
from arlkit.envs.tools.checks import BoundCall, bind, check_turn, execute, is_subsequence, state_differences
from arlkit.envs.tools.entries import ToolEntry, load_bfcl, shipped_entries, turn_cost
from arlkit.envs.parsing import parse_tagged_action

__all__ = ["GAMMA", "ToolsConfig", "ToolsEnv"]

GAMMA = 0.95


@dataclass(frozen=True)
class ToolsConfig:
    """Configuration of the multi-turn tool-calling family.

    Attributes:
        questions_file: a BFCL-v3 multi-turn questions file; ``None`` uses arlkit's own entries.
        answers_file: the matching BFCL ``possible_answer`` file (not needed when every entry has a
            ``ground_truth`` field).
        skip_unsupported: skip entries that need classes or features arlkit lacks (else refuse).
        max_calls_per_action: most tool calls in one action (``finish_turn()`` not counted).
        max_action_chars: longest action text accepted.
        result_chars: characters of each call's result shown in an observation.
        t_max: the family's full turn budget T_max (RT uses 24).
    """

    questions_file: str | None = None
    answers_file: str | None = None
    skip_unsupported: bool = True
    max_calls_per_action: int = 1
    max_action_chars: int = 4000
    result_chars: int = 800
    t_max: int = 24

    def __post_init__(self) -> None:
        if not 1 <= self.max_calls_per_action <= 32:
            raise ValueError(f"max_calls_per_action must be in [1, 32], got {self.max_calls_per_action}")
        if self.max_action_chars < 100:
            raise ValueError(f"max_action_chars must be >= 100, got {self.max_action_chars}")
        if self.result_chars < 50:
            raise ValueError(f"result_chars must be >= 50, got {self.result_chars}")
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")
        if self.answers_file is not None and self.questions_file is None:
            raise ValueError("answers_file needs questions_file")


@dataclass
class _Episode:
    """Everything that changes during an episode (snapshots deep-copy it)."""

    turn: int
    model: dict[str, Any]
    truth: dict[str, Any]
    calls: list[str]  # canonical text of the model's executed calls in the current turn
    results: list[Any]  # their results
    done: bool = False
    success: bool = False


class ToolsEnv:
    """Multi-turn tool calling against arlkit's API classes; see the module docstring."""

    name = "tools"

    def __init__(self, config: ToolsConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        self._entries: tuple[ToolEntry, ...] | None = None
        self.skipped: tuple[tuple[str, str], ...] = ()
        self._task: Task | None = None
        self._entry: ToolEntry | None = None
        self._specs: dict[str, ToolSpec] = {}
        self._truth_calls: tuple[tuple[BoundCall, ...], ...] = ()
        self._ep: _Episode | None = None

    # -- tasks ---------------------------------------------------------------------------------
    @property
    def entries(self) -> tuple[ToolEntry, ...]:
        """Every loaded entry, both splits, in file order."""
        if self._entries is None:
            if self.config.questions_file is None:
                self._entries = shipped_entries()
            else:
                answers = Path(self.config.answers_file) if self.config.answers_file else None
                loaded = load_bfcl(
                    Path(self.config.questions_file), answers, skip_unsupported=self.config.skip_unsupported
                )
                self._entries, self.skipped = loaded.entries, loaded.skipped
        return self._entries

    def split_entries(self, split: str) -> list[ToolEntry]:
        """The entries of ``split``, decided by a hash of each entry's content."""
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r}; valid choices: train, test")
        return [e for e in self.entries if split_of(e.content()) == split]

    def tasks(self, split: str, n: int) -> list[Task]:
        if n < 0:
            raise ValueError(f"the number of tasks must be >= 0, got {n}")
        pool = self.split_entries(split)
        if len(pool) < n:
            raise ValueError(f"only {len(pool)} {split} entries exist (asked for {n})")
        return [Task(task_id=e.task_id, payload=e.payload()) for e in pool[:n]]

    # -- episode -------------------------------------------------------------------------------
    @property
    def _state(self) -> _Episode:
        if self._ep is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._ep

    def _load(self, task: Task) -> ToolEntry:
        entry = ToolEntry.from_payload(task.payload)
        self._specs = specs_for(entry.apis)
        truth = []
        for calls in entry.ground_truth:
            truth.append(tuple(bind(c, self._specs) for text in calls for c in parse_calls(text, max_chars=100_000)))
        self._truth_calls = tuple(truth)
        self._task, self._entry = task, entry
        return entry

    def reset(self, task: Task, seed: int) -> str:
        entry = self._load(task)
        model = {api: instantiate(api, entry.initial_config.get(api)) for api in entry.apis}
        truth = {api: instantiate(api, entry.initial_config.get(api)) for api in entry.apis}
        self._ep = _Episode(0, model, truth, [], [])
        return self._request_text()

    def _request_text(self) -> str:
        assert self._entry is not None
        k = self._state.turn
        return f"User request {k + 1} of {len(self._entry.turns)}: {self._entry.turns[k]}"

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_tagged_action(reply)

    def _invalid(self, why: str) -> StepResult:
        return StepResult(f"Invalid action: {why}. Nothing was executed.", 0.0, False, False, False)

    def _bind_all(self, action: str) -> tuple[list[BoundCall], bool] | str:
        """The bound calls of ``action`` and whether it ends the turn, or why it is invalid."""
        try:
            calls = parse_calls(action, max_chars=self.config.max_action_chars)
        except CallSyntaxError as exc:
            return str(exc)
        finish = calls[-1].name == FINISH
        if finish and (calls[-1].args or calls[-1].kwargs):
            return f"{FINISH}() takes no arguments"
        api_calls = calls[:-1] if finish else calls
        if any(c.name == FINISH for c in api_calls):
            return f"{FINISH}() must be the last call of the action"
        if len(api_calls) > self.config.max_calls_per_action:
            limit = self.config.max_calls_per_action
            return f"{len(api_calls)} calls in one action; at most {limit} call{'s' if limit > 1 else ''} per action"
        try:
            return [bind(c, self._specs) for c in api_calls], finish
        except ArgumentError as exc:
            return str(exc)

    def step(self, action: str) -> StepResult:
        ep = self._state
        if ep.done:
            return StepResult("The episode is over.", 0.0, True, False, False)
        bound = self._bind_all(action)
        if isinstance(bound, str):
            return self._invalid(bound)
        calls, finish = bound
        lines = []
        for call in calls:
            result = execute(ep.model, call)
            ep.calls.append(call.canonical)
            ep.results.append(result)
            shown = json.dumps(result, ensure_ascii=False, default=repr)
            if len(shown) > self.config.result_chars:
                shown = shown[: self.config.result_chars] + " ...(cut)"
            lines.append(f"{call.canonical} -> {shown}")
        if not finish:
            return StepResult("\n".join(lines), 0.0, False, False, True)
        return self._finish_turn(lines)

    def _finish_turn(self, lines: list[str]) -> StepResult:
        ep, entry = self._state, self._entry
        assert entry is not None
        truth_results = [execute(ep.truth, c) for c in self._truth_calls[ep.turn]]
        verdict = check_turn(ep.model, ep.truth, ep.results, truth_results, len(truth_results), len(ep.calls))
        n = len(entry.turns)
        if not verdict.passed:
            ep.done = True
            lines.append(f"Request {ep.turn + 1} was not handled correctly: {verdict.reason}. The episode is over.")
            return StepResult("\n".join(lines), 0.0, True, False, True)
        ep.turn += 1
        ep.calls, ep.results = [], []
        if ep.turn == n:
            ep.done = ep.success = True
            lines.append(f"All {n} requests are complete.")
            return StepResult("\n".join(lines), 1.0, True, True, True)
        lines.append(f"Request {ep.turn} is complete.\n{self._request_text()}")
        return StepResult("\n".join(lines), 0.0, False, False, True)

    def render(self) -> str:
        ep = self._state
        if ep.done:
            return "The episode is over."
        return f"{self._request_text()}\n(Calls made for this request so far: {len(ep.calls)}.)"

    def prompt_text(self) -> PromptText:
        """The instruction (rules, legend, goal) and the action format of the prompt."""
        apis = self._entry.apis if self._entry is not None else ()
        limit = self.config.max_calls_per_action
        per_action = "one call per action" if limit == 1 else f"up to {limit} calls per action, one per line"
        instruction = (
            "You are an assistant that serves a user's requests by calling tools. The requests arrive one at a time. "
            f"Each action is a function call in Python syntax with literal arguments ({per_action}), for example "
            "cd(folder='docs'); you then see what it returned. Only the functions listed below exist; arguments must "
            "be literal values (strings, numbers, True/False/None, lists, dicts), never variables or expressions. "
            f"When the current request is fully handled, end it with {FINISH}(): alone, or after your last call in "
            "the same action (last, on its own line or after ';'). The next request then appears. If no function can "
            f"serve a request, reply with {FINISH}() alone and call nothing. After each request the state of every "
            "service must equal what the correct calls produce, and the information the correct calls obtain must be "
            "among your results; a request handled wrongly ends the episode.\n\nAvailable functions:\n"
            + render_apis(list(apis))
        )
        calls = "one function call" if limit == 1 else f"up to {limit} function calls (one per line)"
        action_format = (
            f"The action is {calls}, optionally followed by {FINISH}() to end the current request, or {FINISH}() "
            f"alone; for example <action>ls(a=True)</action>, <action>cat(file_name='notes.txt'); {FINISH}()</action> "
            f"or <action>{FINISH}()</action>."
        )
        return PromptText(instruction, action_format)

    def state_key(self) -> str:
        ep = self._state
        assert self._task is not None
        state = {api: public_state(inst) for api, inst in sorted(ep.model.items())}
        blob = json.dumps([state, ep.calls, ep.results], sort_keys=True, default=repr)
        digest = hashlib.sha256(blob.encode("utf-8", errors="replace")).hexdigest()[:16]
        return f"{self._task.task_id}|turn{ep.turn}|{digest}|{int(ep.done)}{int(ep.success)}"

    def snapshot(self) -> dict[str, Any]:
        return {"task": self._task, "episode": copy.deepcopy(self._state)}

    def restore(self, snapshot: dict[str, Any]) -> None:
        task = snapshot["task"]
        if task is not self._task:
            self._load(task)
        self._ep = copy.deepcopy(snapshot["episode"])

    # -- read-only views -----------------------------------------------------------------------
    @property
    def turn(self) -> int:
        """Index of the current user request (0-based)."""
        return self._state.turn

    @property
    def instances(self) -> dict[str, Any]:
        """The model's API instances (do not mutate)."""
        return self._state.model

    # -- oracle --------------------------------------------------------------------------------
    def _position(self) -> int | None:
        """How many ground-truth calls of the current turn are already done: the model's calls
        are a prefix of them, or else the largest j whose remaining calls ``truth[j:]`` would still
        pass the turn's checks. ``None`` when no suffix of the ground truth can rescue the turn."""
        ep = self._state
        truth = self._truth_calls[ep.turn]
        if ep.calls == [c.canonical for c in truth[: len(ep.calls)]]:
            return len(ep.calls)
        if not truth:
            return None  # calls were made on a request that needed none: cannot be undone
        target = copy.deepcopy(ep.truth)
        truth_results = [execute(target, c) for c in truth]
        for j in range(len(truth), -1, -1):
            trial = copy.deepcopy(ep.model)
            extra = [execute(trial, c) for c in truth[j:]]
            if not state_differences(trial, target) and is_subsequence(truth_results, ep.results + extra):
                return j
        return None

    def shortest_solution_length(self) -> int | None:
        ep = self._state
        if ep.done:
            return 0 if ep.success else None
        j = self._position()
        if j is None:
            return None
        c = self.config.max_calls_per_action
        rest = sum(turn_cost(len(t), c) for t in self._truth_calls[ep.turn + 1 :])
        return turn_cost(len(self._truth_calls[ep.turn]) - j, c) + rest

    def _next_action(self) -> str:
        ep = self._state
        if ep.done:
            return f"{FINISH}()"
        j = self._position()
        if j is None:
            return f"{FINISH}()"
        assert self._entry is not None
        texts = self._entry.ground_truth[ep.turn]
        chunk = list(texts[j : j + self.config.max_calls_per_action])
        if j + len(chunk) >= len(texts):
            chunk.append(f"{FINISH}()")
        return "\n".join(chunk)

    def action_values(self, remaining: int) -> dict[str, float]:
        d = self.shortest_solution_length()
        value = GAMMA ** (d - 1) if d is not None and 1 <= d <= remaining else 0.0
        return {self._next_action(): value}

    def optimal_actions(self, remaining: int) -> list[str]:
        return [self._next_action()]

    def success_probability(self, remaining: int) -> float:
        ep = self._state
        if ep.done:
            return 1.0 if ep.success else 0.0
        d = self.shortest_solution_length()
        return 1.0 if d is not None and d <= remaining else 0.0


@register_env("tools", ToolsConfig)
def _make_tools(config: ToolsConfig) -> ToolsEnv:
    return ToolsEnv(config)
