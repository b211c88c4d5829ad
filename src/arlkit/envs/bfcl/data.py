"""BFCL's multi-turn entries, read from the data ``bfcl-eval`` ships (or from files in its format).

A category's questions are ``bfcl_eval/data/BFCL_v4_multi_turn_<category>.json`` (one JSON object
per line: ``id``, ``question`` — one list of messages per user turn —, ``initial_config``,
``involved_classes``, and optionally ``excluded_function`` and ``missed_function``), its answers
``possible_answer/BFCL_v4_multi_turn_<category>.json`` (``id``, ``ground_truth``: one list of call
strings per turn) and the function docs ``multi_turn_func_doc/<class file>.json``. The ids are
``multi_turn_*``: BFCL v3's multi-turn set, unchanged in v4.

What the model is offered follows BFCL's ``populate_test_cases_with_predefined_functions``: every
doc of the involved classes, minus each ``missed_function`` (turn -> names), which is revealed at
that turn — a turn with no user message. arlkit also withholds ``excluded_function``, which the
entries declare but bfcl-eval 2026.3.23 still offers (``hide_excluded``; docs/benchmarks.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from arlkit.envs.bfcl.backend import MULTI_TURN_CLASSES, bfcl_module, is_long_context
from arlkit.envs.bfcl.calls import CallSyntaxError, parse_calls

__all__ = ["CATEGORIES", "BfclEntry", "DatasetError", "category_files", "function_docs", "load_entries"]

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")


class DatasetError(ValueError):
    """A malformed entry file; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class BfclEntry:
    """One multi-turn entry.

    Attributes:
        entry_id: BFCL's id (``multi_turn_base_0``); also the task id.
        turns: the user's message of each turn; ``None`` for a turn that only reveals functions.
        classes: the involved classes, in the entry's order.
        initial_config: the state of each class (as BFCL's file gives it).
        ground_truth: the ground-truth call strings of each turn.
        hidden: functions never offered (``excluded_function``, when hidden).
        revealed: turn index -> functions first offered at that turn (``missed_function``).
    """

    entry_id: str
    turns: tuple[str | None, ...]
    classes: tuple[str, ...]
    initial_config: Mapping[str, Any] = field(default_factory=dict)
    ground_truth: tuple[tuple[str, ...], ...] = ()
    hidden: tuple[str, ...] = ()
    revealed: Mapping[int, tuple[str, ...]] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """A JSON-serialisable form (the task's payload)."""
        return {
            "id": self.entry_id,
            "turns": list(self.turns),
            "classes": list(self.classes),
            "initial_config": json.loads(json.dumps(self.initial_config)),
            "ground_truth": [list(t) for t in self.ground_truth],
            "hidden": list(self.hidden),
            "revealed": {str(k): list(v) for k, v in sorted(self.revealed.items())},
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> BfclEntry:
        """Inverse of :meth:`payload`."""
        return cls(
            str(payload["id"]),
            tuple(None if t is None else str(t) for t in payload["turns"]),
            tuple(str(c) for c in payload["classes"]),
            dict(payload["initial_config"]),
            tuple(tuple(str(c) for c in t) for t in payload["ground_truth"]),
            tuple(str(n) for n in payload.get("hidden", ())),
            {int(k): tuple(str(n) for n in v) for k, v in payload.get("revealed", {}).items()},
        )

    @property
    def long_context(self) -> bool:
        return is_long_context(self.entry_id)

    def offered_at(self, turn: int) -> tuple[str, ...]:
        """Names of the functions offered from turn ``turn`` on (docs order)."""
        later = {n for k, names in self.revealed.items() if k > turn for n in names}
        return tuple(d["name"] for c in self.classes for d in function_docs(c) if d["name"] not in later)

    def visible(self, turn: int) -> tuple[str, ...]:
        """The functions the model may call at ``turn``: offered and not hidden."""
        hidden = set(self.hidden)
        return tuple(n for n in self.offered_at(turn) if n not in hidden)

    def min_actions(self, max_calls_per_action: int = 1) -> int:
        """Actions the ground-truth path needs, ``finish_turn()`` riding on each turn's last call."""
        return sum(max(1, -(-len(t) // max_calls_per_action)) for t in self.ground_truth)


def _data_root() -> Any:
    bfcl_module("constants.executable_backend_config")  # a clear error when bfcl-eval is absent
    return resources.files("bfcl_eval") / "data"


def category_files(category: str) -> tuple[Path, Path]:
    """The questions and answers files bfcl-eval ships for ``category``."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; valid choices: {', '.join(CATEGORIES)}")
    root = _data_root()
    name = f"BFCL_v4_{category}.json"
    return Path(str(root / name)), Path(str(root / "possible_answer" / name))


@lru_cache(maxsize=None)
def function_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """BFCL's function docs of ``class_name`` (JSON schema objects), in file order."""
    if class_name not in MULTI_TURN_CLASSES:
        raise ValueError(f"unknown BFCL class {class_name!r}; valid choices: {', '.join(MULTI_TURN_CLASSES)}")
    files = bfcl_module("constants.executable_backend_config").MULTI_TURN_FUNC_DOC_FILE_MAPPING
    path = _data_root() / "multi_turn_func_doc" / files[class_name]
    return tuple(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def _records(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text: {exc}") from None
    if text.lstrip().startswith("["):
        try:
            return list(json.loads(text))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: not valid JSON: {exc}") from None
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}: line {lineno}: not valid JSON: {exc}") from None
    return out


def _turn_text(turn: Any, where: str) -> str | None:
    if not isinstance(turn, list):
        raise DatasetError(f"{where}: expected a list of messages, got {type(turn).__name__}")
    parts = []
    for k, message in enumerate(turn):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise DatasetError(f"{where}[{k}]: expected a message object with a string 'content'")
        parts.append(message["content"])
    return "\n".join(parts) if parts else None


def _ground_truth(value: Any, n_turns: int, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, list) or not all(isinstance(t, list) for t in value):
        raise DatasetError(f"{where}: expected a list (one per turn) of lists of call strings")
    if len(value) != n_turns:
        raise DatasetError(f"{where}: {len(value)} turns of ground truth for {n_turns} turns")
    for t, calls in enumerate(value):
        for k, text in enumerate(calls):
            try:
                if not isinstance(text, str) or len(parse_calls(text, max_chars=100_000)) != 1:
                    raise CallSyntaxError("expected exactly one call")
            except CallSyntaxError as exc:
                raise DatasetError(f"{where}[{t}][{k}]: {exc}: {text!r:.80}") from None
    return tuple(tuple(calls) for calls in value)


def _entry(record: Any, answers: Mapping[str, Any], where: str, hide_excluded: bool) -> BfclEntry:
    if not isinstance(record, dict) or not isinstance(record.get("id"), str) or not record["id"]:
        raise DatasetError(f"{where}: expected an object with a non-empty string 'id'")
    entry_id = record["id"]
    where = f"{where} (id {entry_id!r})"
    question = record.get("question")
    if not isinstance(question, list) or not question:
        raise DatasetError(f"{where}: field 'question' must be a non-empty list of turns")
    turns = tuple(_turn_text(turn, f"{where}: field 'question'[{t}]") for t, turn in enumerate(question))
    classes = record.get("involved_classes")
    if not isinstance(classes, list) or not classes or any(c not in MULTI_TURN_CLASSES for c in classes):
        raise DatasetError(
            f"{where}: field 'involved_classes' must list BFCL multi-turn classes ({', '.join(MULTI_TURN_CLASSES)})"
        )
    config = record.get("initial_config", {})
    if not isinstance(config, dict):
        raise DatasetError(f"{where}: field 'initial_config' must be an object")
    names = {d["name"] for c in classes for d in function_docs(c)}
    missed = record.get("missed_function", {}) or {}
    revealed: dict[int, tuple[str, ...]] = {}
    for key, funcs in missed.items():
        turn = int(key)
        if not 0 <= turn < len(turns) or turns[turn] is not None or any(f not in names for f in funcs):
            raise DatasetError(f"{where}: field 'missed_function'[{key!r}] must name known functions at an empty turn")
        revealed[turn] = tuple(funcs)
    if any(t is None for k, t in enumerate(turns) if k not in revealed):
        raise DatasetError(f"{where}: a turn without a user message reveals no function")
    excluded = record.get("excluded_function", []) or []
    hidden = tuple(str(f) for f in excluded) if hide_excluded else ()
    truth = record.get("ground_truth", answers.get(entry_id))
    if truth is None:
        raise DatasetError(f"{where}: no ground truth (neither a 'ground_truth' field nor an answers entry)")
    return BfclEntry(
        entry_id, turns, tuple(classes), config, _ground_truth(truth, len(turns), f"{where}: ground truth"), hidden,
        revealed,
    )


def load_entries(questions: str | Path, answers: str | Path | None = None, *, hide_excluded: bool = True) -> tuple[BfclEntry, ...]:
    """Every entry of a BFCL multi-turn questions file (with its answers file), in file order."""
    questions = Path(questions)
    answer_map: dict[str, Any] = {}
    if answers is not None:
        for i, record in enumerate(_records(Path(answers))):
            if not isinstance(record, dict) or not isinstance(record.get("id"), str) or "ground_truth" not in record:
                raise DatasetError(f"{answers}: entry {i}: expected an object with 'id' and 'ground_truth'")
            answer_map[record["id"]] = record["ground_truth"]
    entries: list[BfclEntry] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(_records(questions)):
        entry = _entry(record, answer_map, f"{questions}: entry {i}", hide_excluded)
        if entry.entry_id in seen:
            raise DatasetError(f"{questions}: entry {i}: id {entry.entry_id!r} also used by entry {seen[entry.entry_id]}")
        seen[entry.entry_id] = i
        entries.append(entry)
    return tuple(entries)
