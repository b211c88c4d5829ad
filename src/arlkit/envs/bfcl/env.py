"""BFCL v3 multi-turn function calling on BFCL's own classes and checker (docs/benchmarks.md; RT App. A.1).

Episode semantics:

- An entry's user turns arrive one at a time; observation 0 is turn 1. The instruction carries
  BFCL's function docs of the involved classes (without hidden functions: ``excluded_function``
  when ``hide_excluded``, and ``missed_function`` until its turn). A turn with no user message
  (BFCL's miss-func categories) shows the newly available functions instead.
- An action holds tool calls in Python call syntax with literal arguments (at most
  ``max_calls_per_action``), parsed with :mod:`ast` and never evaluated, then run on BFCL's class
  instances (:mod:`arlkit.envs.bfcl.backend`). It may end with ``finish_turn()``, alone or after
  the calls: the turn is over, BFCL's checks run on it (:mod:`arlkit.envs.bfcl.checks`), and the
  next turn appears, or the episode ends: success after the last turn (reward 1), failure at the
  first turn BFCL's checker rejects (reward 0).
- Text that does not parse as literal calls, ``finish_turn()`` anywhere but last, or too many calls
  is an **invalid** action: nothing runs (BFCL drops a step it cannot decode). A call that parses
  always runs, as in BFCL: an unknown name, wrong arguments or an exception inside the class give
  BFCL's ``Error during execution: ...`` result. Every public method of the involved classes runs
  when called, offered or not (BFCL's executor maps them all, and one miss-func entry's ground
  truth calls a function two turns before the turn that reveals it). Each call runs in a worker
  process with a deadline (``call_timeout_s``; :mod:`arlkit.envs.bfcl.backend`): a call that runs
  longer is stopped, changes nothing and gets an error result; steps therefore block
  (``blocking_steps``) and run off the rollout engine's event loop.
- The turn budget T counts actions over the whole entry. With one call per action the ground-truth
  path needs ``sum over turns of max(1, calls)`` actions (RT App. B.3's bound).

The oracle replays the ground truth; from a state the model left, it finds the shortest
ground-truth suffix that still passes the turn (or reports none).

Native tool calls (``--tool-calls native``, the :class:`~arlkit.envs.capabilities.FunctionCalling`
capability) run the entry as BFCL runs its function-calling models: the functions offered at the
current turn go to the server as tools (bfcl-eval's own conversion), a reply's tool calls are decoded
into call strings as BFCL decodes them, and a reply that calls nothing ends the current user turn
(BFCL's rule; ``finish_turn()`` in text mode).
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from arlkit.envs.bfcl.backend import build_instances, call_strings, execute, openai_tools, public_methods, public_state
from arlkit.envs.bfcl.calls import Call, CallSyntaxError, format_call, parse_calls
from arlkit.envs.bfcl.checks import check_turn
from arlkit.envs.bfcl.data import BfclEntry, category_files, function_docs, load_entries
from arlkit.envs.parsing import parse_tagged_action
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env

__all__ = ["FINISH", "GAMMA", "BfclConfig", "BfclEnv"]

GAMMA = 0.95
FINISH = "finish_turn"  # the control action that ends the current user turn; never a BFCL function
Category = Literal["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]


@dataclass(frozen=True)
class BfclConfig:
    """Configuration of the BFCL multi-turn environment.

    Attributes:
        category: the BFCL multi-turn category (200 entries each).
        questions_file: a questions file in BFCL's format instead of the category's (with
            ``answers_file`` unless every entry has a ``ground_truth`` field).
        answers_file: the matching ``possible_answer`` file.
        hide_excluded: withhold each entry's ``excluded_function`` from the prompt and calls
            (bfcl-eval 2026.3.23 itself still offers them; docs/benchmarks.md).
        max_calls_per_action: most tool calls in one action (``finish_turn()`` not counted).
        max_action_chars: longest action text accepted.
        result_chars: characters of each call's result shown in an observation; ``None`` (the
            default) shows every result whole, as BFCL does (``multi_turn_long_context`` exists to
            test long results). A cut is named in an evaluation's ``summary.md``.
        t_max: the family's full turn budget T_max (RT uses 24).
        call_timeout_s: deadline of one model call (BFCL's calls take milliseconds; hostile
            arguments can make one run for hours).
    """

    category: Category = "multi_turn_base"
    questions_file: str | None = None
    answers_file: str | None = None
    hide_excluded: bool = True
    max_calls_per_action: int = 1
    max_action_chars: int = 16_000
    result_chars: int | None = None
    t_max: int = 24
    call_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not 1 <= self.max_calls_per_action <= 64:
            raise ValueError(f"max_calls_per_action must be in [1, 64], got {self.max_calls_per_action}")
        if self.max_action_chars < 100:
            raise ValueError(f"max_action_chars must be >= 100, got {self.max_action_chars}")
        if self.result_chars is not None and self.result_chars < 50:
            raise ValueError(f"result_chars must be >= 50, got {self.result_chars}")
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")
        if not self.call_timeout_s > 0:
            raise ValueError(f"call_timeout_s must be > 0, got {self.call_timeout_s}")
        if self.answers_file is not None and self.questions_file is None:
            raise ValueError("answers_file needs questions_file")


@dataclass
class _Episode:
    """Everything that changes during an episode (snapshots deep-copy it)."""

    turn: int
    model: dict[str, Any]
    truth: dict[str, Any]
    calls: list[str] = field(default_factory=list)  # canonical calls of the current turn
    steps: list[list[str]] = field(default_factory=list)  # this turn's actions that made calls
    results: list[str] = field(default_factory=list)  # every model result, all turns
    done: bool = False
    success: bool = False


class BfclEnv:
    """BFCL multi-turn entries on BFCL's classes and checker; see the module docstring."""

    name = "bfcl"
    splits = ("test",)  # a benchmark: every entry is a test entry
    blocking_steps = True  # a model's call runs in a worker process, up to call_timeout_s

    def __init__(self, config: BfclConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        self._entries: tuple[BfclEntry, ...] | None = None
        self._task: Task | None = None
        self._entry: BfclEntry | None = None
        self._truth_calls: tuple[tuple[Call, ...], ...] = ()
        self._ep: _Episode | None = None

    # -- tasks ---------------------------------------------------------------------------------
    @property
    def entries(self) -> tuple[BfclEntry, ...]:
        """Every entry of the category (or of ``questions_file``), in file order."""
        if self._entries is None:
            if self.config.questions_file is None:
                questions, answers = category_files(self.config.category)
            else:
                questions = Path(self.config.questions_file)
                answers = Path(self.config.answers_file) if self.config.answers_file else None
            self._entries = load_entries(questions, answers, hide_excluded=self.config.hide_excluded)
        return self._entries

    def tasks(self, split: str, n: int) -> list[Task]:
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r}; valid choices: train, test")
        if split == "train":
            raise ValueError("BFCL is an evaluation benchmark: every entry is in the test split (use --split test)")
        if n < 0:
            raise ValueError(f"the number of tasks must be >= 0, got {n}")
        if len(self.entries) < n:
            raise ValueError(f"only {len(self.entries)} test entries exist (asked for {n})")
        return [Task(task_id=e.entry_id, payload=e.payload()) for e in self.entries[:n]]

    # -- episode -------------------------------------------------------------------------------
    @property
    def _state(self) -> _Episode:
        if self._ep is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._ep

    def _load(self, task: Task) -> BfclEntry:
        entry = BfclEntry.from_payload(task.payload)
        self._truth_calls = tuple(tuple(c for text in t for c in parse_calls(text, max_chars=100_000)) for t in entry.ground_truth)
        self._task, self._entry = task, entry
        return entry

    def reset(self, task: Task, seed: int) -> str:
        entry = self._load(task)
        model = build_instances(entry.classes, entry.initial_config, entry.long_context)
        truth = build_instances(entry.classes, entry.initial_config, entry.long_context)
        self._ep = _Episode(0, model, truth)
        return self._turn_text()

    def _methods(self) -> dict[str, str]:
        """The callable functions: every public method of the involved instances, offered or not, as in
        BFCL's executor (hidden functions are left out of the prompt only)."""
        return public_methods(self._state.model)

    def _turn_text(self) -> str:
        assert self._entry is not None
        k, n = self._state.turn, len(self._entry.turns)
        text = self._entry.turns[k]
        if text is None:
            new = {name for name in self._entry.revealed.get(k, ())} - set(self._entry.hidden)
            docs = [d for c in self._entry.classes for d in function_docs(c) if d["name"] in new]
            return f"User turn {k + 1} of {n}: more functions are now available; continue with the request.\n" + _render(docs)
        return f"User turn {k + 1} of {n}: {text}"

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_tagged_action(reply)

    def _canonical(self, call: Call, methods: dict[str, str]) -> str:
        """The call with every argument named and defaults filled in (the same text for the same effect)."""
        arguments: dict[str, Any] = {}
        if call.name in methods:
            try:
                bound = inspect.signature(getattr(self._state.model[methods[call.name]], call.name)).bind(
                    *call.args, **dict(call.kwargs)
                )
                bound.apply_defaults()
                arguments = dict(bound.arguments)
            except TypeError:
                pass
        if not arguments:
            return f"{call.name}({', '.join([*map(repr, call.args), *(f'{k}={v!r}' for k, v in call.kwargs)])})"
        return format_call(call.name, arguments)

    def _parse(self, action: str) -> tuple[list[Call], bool] | str:
        """The calls of ``action`` and whether it ends the turn, or why it is invalid."""
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
        return api_calls, finish

    def step(self, action: str) -> StepResult:
        ep = self._state
        if ep.done:
            return StepResult("The episode is over.", 0.0, True, False, False)
        parsed = self._parse(action)
        if isinstance(parsed, str):
            return StepResult(f"Invalid action: {parsed}. Nothing was executed.", 0.0, False, False, False)
        calls, finish = parsed
        methods = self._methods()
        lines, texts = [], []
        for call in calls:
            result = execute(ep.model, methods, call, timeout_s=self.config.call_timeout_s)
            texts.append(self._canonical(call, methods))
            ep.results.append(result)
            cut = self.config.result_chars
            shown = result if cut is None or len(result) <= cut else result[:cut] + " ...(cut)"
            lines.append(f"{texts[-1]} -> {shown}")
        if texts:
            ep.calls.extend(texts)
            ep.steps.append(texts)
        if not finish:
            return StepResult("\n".join(lines), 0.0, False, False, True)
        return self._finish_turn(lines)

    def _truth_results(self, ep: _Episode) -> list[str]:
        """Run the current turn's ground truth on the truth instances and return its results."""
        assert self._entry is not None
        methods = public_methods(ep.truth)
        return [execute(ep.truth, methods, c) for c in self._truth_calls[ep.turn]]

    def _finish_turn(self, lines: list[str]) -> StepResult:
        ep, entry = self._state, self._entry
        assert entry is not None
        truth_results = self._truth_results(ep)
        verdict = check_turn(ep.turn, len(truth_results), ep.steps, ep.model, ep.truth, ep.results, truth_results)
        n = len(entry.turns)
        if not verdict.passed:
            ep.done = True
            lines.append(f"Turn {ep.turn + 1} was not handled correctly: {verdict.reason}. The episode is over.")
            return StepResult("\n".join(lines), 0.0, True, False, True)
        ep.turn += 1
        ep.calls, ep.steps = [], []
        if ep.turn == n:
            ep.done = ep.success = True
            lines.append(f"All {n} turns are complete.")
            return StepResult("\n".join(lines), 1.0, True, True, True)
        lines.append(f"Turn {ep.turn} is complete.\n{self._turn_text()}")
        return StepResult("\n".join(lines), 0.0, False, False, True)

    def summary_notes(self, tasks: Sequence[Task]) -> list[str]:
        """``summary.md`` names a cut of the call results, where BFCL shows them whole."""
        cut = self.config.result_chars
        if cut is None:
            return []
        return [f"- BFCL call results were cut at {cut} characters (`result_chars`); BFCL shows them whole."]

    def render(self) -> str:
        ep = self._state
        if ep.done:
            return "The episode is over."
        return f"{self._turn_text()}\n(Calls made in this turn so far: {len(ep.calls)}.)"

    def _visible_docs(self, turn: int) -> list[dict[str, Any]]:
        """BFCL's docs of the functions the model may call at ``turn`` (docs order)."""
        assert self._entry is not None
        visible = set(self._entry.visible(turn))
        return [d for c in self._entry.classes for d in function_docs(c) if d["name"] in visible]

    def prompt_text(self) -> PromptText:
        """The instruction (rules and the function docs) and the action format of the prompt."""
        docs = self._visible_docs(0) if self._entry is not None else []
        limit = self.config.max_calls_per_action
        per_action = "one call per action" if limit == 1 else f"up to {limit} calls per action, one per line"
        instruction = (
            "You serve a user's requests by calling functions; the requests arrive one at a time. Each action is a "
            f"function call in Python syntax with literal arguments ({per_action}), for example cd(folder='docs'); "
            "you then see what it returned. Arguments must be literal values (strings, numbers, True/False/None, "
            f"lists, dicts), never variables or expressions. When the current request is handled, end it with "
            f"{FINISH}(): alone, or as the last call of an action. If no function can serve a request, or a required "
            f"value is missing, reply with {FINISH}() alone and call nothing.\n\nThe functions, as JSON:\n" + _render(docs)
        )
        calls = "one function call" if limit == 1 else f"up to {limit} function calls (one per line)"
        action_format = (
            f"The action is {calls}, optionally followed by {FINISH}() to end the current request, or {FINISH}() "
            f"alone; for example <action>ls(a=True)</action>, <action>cat(file_name='notes.txt'); {FINISH}()</action> "
            f"or <action>{FINISH}()</action>."
        )
        return PromptText(instruction, action_format)

    # -- native tool calls ------------------------------------------------------------------------
    def function_tools(self) -> list[dict[str, Any]]:
        """The functions the model may call at the current turn, as BFCL's handlers offer them as tools."""
        return openai_tools(self._visible_docs(self._state.turn))

    def function_prompt_text(self) -> PromptText:
        """The instruction and action format when the functions are called natively (no docs: they are the tools)."""
        limit = self.config.max_calls_per_action
        per_reply = "one function per reply" if limit == 1 else f"up to {limit} functions per reply"
        instruction = (
            "You serve a user's requests by calling the functions you are given; the requests arrive one at a time. "
            f"Call {per_reply} and you then see what it returned. When the current request is handled, reply with a "
            "message and call no function: that ends the request. If no function can serve a request, or a required "
            "value is missing, reply without calling a function."
        )
        return PromptText(instruction, f"Call the functions as tools ({per_reply}); a reply that calls no function "
                                       "ends the current request.")

    def function_calls_action(self, calls: Any) -> str:
        """The action of a reply's tool calls: their call strings (BFCL's decoding), or ``finish_turn()`` for none."""
        strings = call_strings(list(calls))
        return "\n".join(strings) if strings else f"{FINISH}()"

    def call_failed(self, valid: bool, observation: str) -> bool:
        """A step failed when it was invalid or a call's result is an error (BFCL's text or an error object)."""
        return not valid or "Error during execution:" in observation or '{"error": ' in observation

    def state_key(self) -> str:
        ep = self._state
        assert self._task is not None
        state = {name: public_state(inst) for name, inst in sorted(ep.model.items())}
        blob = json.dumps(_plain([state, ep.calls, ep.results]), default=repr)
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
        """Index of the current user turn (0-based)."""
        return self._state.turn

    @property
    def instances(self) -> dict[str, Any]:
        """The model's BFCL instances (do not mutate)."""
        return self._state.model

    # -- oracle --------------------------------------------------------------------------------
    def _position(self) -> int | None:
        """How many ground-truth calls of the current turn are done: the model's calls are a prefix
        of them, or else the largest j whose remaining calls ``truth[j:]`` would still pass the
        turn. ``None`` when no suffix of the ground truth rescues the turn."""
        ep = self._state
        truth = self._truth_calls[ep.turn]
        methods = public_methods(ep.model)
        texts = [self._canonical(c, methods) for c in truth]
        if ep.calls == texts[: len(ep.calls)]:
            return len(ep.calls)
        if not truth:  # BFCL does not check this turn, but what the calls changed stays changed
            return 0 if all(public_state(ep.model[c]) == public_state(ep.truth[c]) for c in ep.truth) else None
        target = copy.deepcopy(ep.truth)
        truth_results = [execute(target, public_methods(target), c) for c in truth]
        for j in range(len(truth), -1, -1):
            trial = copy.deepcopy(ep.model)
            extra = [execute(trial, public_methods(trial), c) for c in truth[j:]]
            steps = ep.steps + ([texts[j:]] if j < len(truth) else [])
            if check_turn(ep.turn, len(truth), steps, trial, target, ep.results + extra, truth_results).passed:
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
        cost = lambda n: max(1, -(-n // c))  # noqa: E731
        rest = sum(cost(len(t)) for t in self._truth_calls[ep.turn + 1 :])
        return cost(len(self._truth_calls[ep.turn]) - j) + rest

    def _next_action(self) -> str:
        ep = self._state
        j = None if ep.done else self._position()
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


def _plain(value: Any) -> Any:
    """``value`` with every dict as a list of (key, value) pairs sorted by key text (keys of mixed types)."""
    if isinstance(value, dict):
        return sorted(([repr(k), _plain(v)] for k, v in value.items()), key=lambda kv: kv[0])
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _render(docs: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(d, ensure_ascii=False) for d in docs)


@register_env("bfcl", BfclConfig)
def _make_bfcl(config: BfclConfig) -> BfclEnv:
    return BfclEnv(config)
