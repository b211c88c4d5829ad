"""Multi-turn tool-calling entries and the BFCL-v3 multi-turn loader.

BFCL-v3 format: a questions file with one JSON object per line (a JSON list also works), each with
``id``, ``question`` (one list of ``{"role", "content"}`` messages per user turn), ``initial_config``
(class name -> initial state) and ``involved_classes``; and an answers file with ``id`` and
``ground_truth`` (one list of call strings per user turn). A question entry may carry its own
``ground_truth`` instead. Classes are named either as arlkit names them or by a BFCL alias that an
arlkit class implements (``GorillaFileSystem``, ``MathAPI``).

Entries that need a class arlkit does not implement, or a BFCL feature arlkit does not model
(turns that only reveal a missing function), are *unsupported*: skipped and reported, or an error
when ``skip_unsupported`` is false. Malformed entries raise :class:`DatasetError` naming the file,
the entry and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from arlkit.envs.splits import content_id
from arlkit.envs.tools.api_base import ArgumentError, check_arguments
from arlkit.envs.tools.apis import canonical_api_name, instantiate, specs_for
from arlkit.envs.tools.calls import CallSyntaxError, parse_calls

__all__ = ["DatasetError", "LoadedEntries", "ToolEntry", "load_bfcl", "shipped_entries", "turn_cost"]


class DatasetError(ValueError):
    """A malformed entry file; the message names the file, the entry and the field."""


def turn_cost(n_calls: int, max_calls_per_action: int) -> int:
    """Actions one user turn needs: its calls, ``max_calls_per_action`` per action, with
    ``finish_turn()`` riding on the last one; a turn without calls needs one ``finish_turn()``."""
    return max(1, -(-n_calls // max_calls_per_action))


@dataclass(frozen=True)
class ToolEntry:
    """One multi-turn entry.

    Attributes:
        entry_id: the entry's id in its file.
        turns: the user's message of each turn.
        apis: the involved API classes (arlkit names), in the order given.
        initial_config: initial state per API (arlkit names), JSON values.
        ground_truth: per turn, the ground-truth call strings (the minimal path); empty for a turn
            the model must not act on.
    """

    entry_id: str
    turns: tuple[str, ...]
    apis: tuple[str, ...]
    initial_config: Mapping[str, Any] = field(default_factory=dict)
    ground_truth: tuple[tuple[str, ...], ...] = ()

    def payload(self) -> dict[str, Any]:
        """A JSON-serialisable form (the environment task's payload)."""
        return {
            "id": self.entry_id,
            "turns": list(self.turns),
            "apis": list(self.apis),
            "initial_config": json.loads(json.dumps(self.initial_config)),
            "ground_truth": [list(t) for t in self.ground_truth],
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ToolEntry:
        """Inverse of :meth:`payload`."""
        return cls(
            str(payload["id"]),
            tuple(str(t) for t in payload["turns"]),
            tuple(str(a) for a in payload["apis"]),
            dict(payload["initial_config"]),
            tuple(tuple(str(c) for c in t) for t in payload["ground_truth"]),
        )

    def content(self) -> str:
        """Canonical text of everything but the id (splits and duplicate checks use it)."""
        data = self.payload()
        del data["id"]
        return json.dumps(data, sort_keys=True)

    @property
    def task_id(self) -> str:
        return "tools-" + content_id(self.content())

    @property
    def n_calls(self) -> int:
        """Ground-truth calls over all turns (the structural bound of RT App. B.3)."""
        return sum(len(t) for t in self.ground_truth)

    def min_turns(self, max_calls_per_action: int = 1) -> int:
        """Actions the ground-truth path needs, ``finish_turn()`` included."""
        return sum(turn_cost(len(t), max_calls_per_action) for t in self.ground_truth)


@dataclass(frozen=True)
class LoadedEntries:
    """Entries read from files, and the ones skipped as unsupported with the reason."""

    entries: tuple[ToolEntry, ...]
    skipped: tuple[tuple[str, str], ...] = ()


class _Unsupported(Exception):
    pass


def _read_json_records(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text: {exc}") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: not valid JSON: {exc}") from None
        return list(data)
    records = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}: line {lineno}: not valid JSON: {exc}") from None
    return records


def _user_text(turn: Any, where: str) -> str:
    if isinstance(turn, str):
        return turn
    if not isinstance(turn, list):
        raise DatasetError(f"{where}: expected a list of messages, got {type(turn).__name__}")
    parts = []
    for k, message in enumerate(turn):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise DatasetError(f"{where}[{k}]: expected a message object with a string 'content'")
        if message.get("role", "user") == "user":
            parts.append(message["content"])
    if not parts:
        raise _Unsupported("a turn without a user message (BFCL's missing-function turns are not supported)")
    return "\n".join(parts)


def _check_calls(ground_truth: Any, apis: tuple[str, ...], n_turns: int, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(ground_truth, list) or not all(isinstance(t, list) for t in ground_truth):
        raise DatasetError(f"{where}: expected a list (one per turn) of lists of call strings")
    if len(ground_truth) != n_turns:
        raise DatasetError(f"{where}: {len(ground_truth)} turns of ground truth for {n_turns} user turns")
    specs = specs_for(apis)
    out = []
    for t, calls in enumerate(ground_truth):
        for k, text in enumerate(calls):
            at = f"{where}[{t}][{k}]"
            if not isinstance(text, str):
                raise DatasetError(f"{at}: expected a call string, got {type(text).__name__}")
            try:
                parsed = parse_calls(text, max_chars=100_000)
            except CallSyntaxError as exc:
                raise DatasetError(f"{at}: {exc}: {text!r:.80}") from None
            if len(parsed) != 1:
                raise DatasetError(f"{at}: expected exactly one call, got {len(parsed)}")
            call = parsed[0]
            if call.name not in specs:
                raise _Unsupported(f"ground truth calls {call.name!r}, which no involved arlkit class implements")
            try:
                check_arguments(specs[call.name], call.args, dict(call.kwargs))
            except ArgumentError as exc:
                raise DatasetError(f"{at}: {exc}") from None
        out.append(tuple(calls))
    return tuple(out)


def _entry(record: Any, answers: Mapping[str, Any], where: str) -> ToolEntry:
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected an object, got {type(record).__name__}")
    entry_id = record.get("id")
    if not isinstance(entry_id, str) or not entry_id:
        raise DatasetError(f"{where}: field 'id' must be a non-empty string")
    where = f"{where} (id {entry_id!r})"
    if record.get("missed_function"):
        raise _Unsupported("hides functions in some turns (BFCL miss_func), which arlkit does not model")
    question = record.get("question")
    if not isinstance(question, list) or not question:
        raise DatasetError(f"{where}: field 'question' must be a non-empty list of turns")
    turns = tuple(_user_text(turn, f"{where}: field 'question'[{t}]") for t, turn in enumerate(question))
    involved = record.get("involved_classes")
    if not isinstance(involved, list) or not involved or not all(isinstance(c, str) for c in involved):
        raise DatasetError(f"{where}: field 'involved_classes' must be a non-empty list of class names")
    unknown = [c for c in involved if canonical_api_name(c) is None]
    if unknown:
        raise _Unsupported(f"needs {', '.join(unknown)}, which arlkit does not implement")
    apis = tuple(dict.fromkeys(str(canonical_api_name(c)) for c in involved))
    config_in = record.get("initial_config", {})
    if not isinstance(config_in, dict):
        raise DatasetError(f"{where}: field 'initial_config' must be an object")
    config: dict[str, Any] = {}
    for name, state in config_in.items():
        canonical = canonical_api_name(name)
        if canonical is None or canonical not in apis:
            continue  # state for a class the entry does not use
        if not isinstance(state, dict):
            raise DatasetError(f"{where}: field 'initial_config'.{name} must be an object")
        try:
            instantiate(canonical, state)
        except Exception as exc:  # any loader problem is a data problem
            raise DatasetError(f"{where}: field 'initial_config'.{name}: {exc}") from None
        config[canonical] = json.loads(json.dumps(state))
    ground_truth = record.get("ground_truth", answers.get(entry_id))
    if ground_truth is None:
        raise DatasetError(f"{where}: no ground truth (neither a 'ground_truth' field nor an answers entry)")
    gt = _check_calls(ground_truth, apis, len(turns), f"{where}: field 'ground_truth'")
    return ToolEntry(entry_id, turns, apis, config, gt)


def load_bfcl(
    questions: str | Path, answers: str | Path | None = None, *, skip_unsupported: bool = True
) -> LoadedEntries:
    """Entries from BFCL-v3 multi-turn files (see the module docstring)."""
    questions = Path(questions)
    answer_map: dict[str, Any] = {}
    if answers is not None:
        for i, record in enumerate(_read_json_records(Path(answers))):
            if not isinstance(record, dict) or not isinstance(record.get("id"), str) or "ground_truth" not in record:
                raise DatasetError(f"{answers}: entry {i}: expected an object with 'id' and 'ground_truth'")
            answer_map[record["id"]] = record["ground_truth"]
    entries: list[ToolEntry] = []
    skipped: list[tuple[str, str]] = []
    seen_ids: dict[str, int] = {}
    seen_content: dict[str, str] = {}
    for i, record in enumerate(_read_json_records(questions)):
        where = f"{questions}: entry {i}"
        try:
            entry = _entry(record, answer_map, where)
        except _Unsupported as exc:
            entry_id = record.get("id", f"#{i}") if isinstance(record, dict) else f"#{i}"
            if not skip_unsupported:
                raise DatasetError(f"{where} (id {entry_id!r}): unsupported: {exc}") from None
            skipped.append((str(entry_id), str(exc)))
            continue
        if entry.entry_id in seen_ids:
            raise DatasetError(f"{where}: field 'id': {entry.entry_id!r} also used by entry {seen_ids[entry.entry_id]}")
        seen_ids[entry.entry_id] = i
        if entry.content() in seen_content:
            raise DatasetError(f"{where}: same content as entry {seen_content[entry.content()]!r}")
        seen_content[entry.content()] = entry.entry_id
        entries.append(entry)
    return LoadedEntries(tuple(entries), tuple(skipped))


def shipped_entries() -> tuple[ToolEntry, ...]:
    """arlkit's own generated entries (``arlkit/data/tools``)."""
    root = resources.files("arlkit") / "data" / "tools"
    with resources.as_file(root / "questions.jsonl") as q, resources.as_file(root / "answers.jsonl") as a:
        loaded = load_bfcl(q, a, skip_unsupported=False)
    return loaded.entries
