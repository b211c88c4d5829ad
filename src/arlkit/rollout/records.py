"""Trajectory records: what the engine produces and what ``trajectories.jsonl`` holds.

Each finished trajectory is one JSON line with at least ``task_id``, ``sample``, ``budget``,
``budget_mode``, ``turns`` (each with ``reply``, ``action``, ``valid``, ``reward``,
``observation`` and ``remaining``, the remaining budget the prompt announced; ``finish_reason``,
``usage`` and ``details`` where the policy reports them), ``success``,
``success_turn`` (1-based or null), ``ended_by`` and ``return``. What the policy was shown in full
(each turn's messages and prompt token ids, :class:`Prompt`) stays in memory: the lines stay small.

Every line is valid UTF-8 whatever the model sent: :class:`JsonlWriter` replaces the code points
UTF-8 cannot encode (lone surrogates, e.g. a server's JSON ``"\ud800"``) with U+FFFD and records how
many in the line's ``replaced_code_points`` (see docs/concepts.md, "Records").
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TextIO

from arlkit.policies.protocol import CONTEXT_LENGTH_EXCEEDED, Message
from arlkit.envs.parsing import valid_utf8
from arlkit.rundir import atomic_path

__all__ = [
    "CONTEXT_LENGTH_EXCEEDED", "ENDINGS", "POLICY_ERROR", "JsonlWriter", "Prompt", "RecordWarning", "Trajectory",
    "TurnRecord", "read_trajectories",
]

POLICY_ERROR = "policy_error"
"""``ended_by`` of a trajectory cut short by a backend failure (``error`` holds the message). Such a
trajectory is not finished: evaluations keep it apart and retry it on resume."""
ENDINGS = ("success", "terminal", "budget", CONTEXT_LENGTH_EXCEEDED, POLICY_ERROR)
"""Values of :attr:`Trajectory.ended_by`: solved, a terminal state without success, the turn budget
spent, the context window full (the next prompt plus ``max_new_tokens`` did not fit: a legitimate
end, a failure unless already solved), a backend failure."""


@dataclass(frozen=True)
class Prompt:
    """What the policy was shown before one turn: kept in memory for the caller (the trainer's rows,
    behaviour cloning, the tiny model's corpus), never written to JSON lines.

    Attributes:
        messages: the exact chat of the request (system prompt first, ending with a user message).
        ids: the prompt's token ids as the backend encoded them (:attr:`Reply.prompt_ids`), or
            ``None`` when it does not report them (scripted policies, servers).
    """

    messages: Sequence[Message]
    ids: tuple[int, ...] | None = None


@dataclass
class TurnRecord:
    """One turn: what the prompt announced, the model's reply and what the environment made of it.

    Attributes:
        reply: the raw reply text.
        action: the parsed action, or ``None`` when the reply had none.
        valid: the action was parsed and admitted by the environment.
        reward: the step reward.
        observation: the observation returned after this action.
        state: the environment's state key *before* the action (anchor / matched states).
        strict_format: the reply matched the strict ``<think>..</think><action>..</action>`` format.
        token_ids: generated token ids, when the policy returns them (not written to JSON lines
            unless asked).
        logprobs: per-token log-probs at sampling time, when the policy returns them.
        remaining: the remaining budget the prompt announced before this turn (this turn included,
            :attr:`Request.remaining`); ``None`` in hidden mode.
        prompt: the messages and prompt token ids the policy was shown, when the rollout kept them
            (``run_rollouts(keep_prompts=True)``); in memory only: never written, not compared.
        finish_reason: why the reply ended, as the backend said (:attr:`Reply.finish_reason`):
            ``"stop"``, or ``"length"`` when the token cap cut it (a cut-off reply, told apart from a
            malformed one); ``None`` when the policy does not say (scripted policies); written only
            when set.
        usage: the reply's token counts as the backend reported them (:attr:`Reply.usage`), or
            ``None``; written only when set.
        details: how a composite policy made the reply (:attr:`Reply.details`), or ``None``;
            written only when set.
    """

    reply: str
    action: str | None
    valid: bool
    reward: float
    observation: str
    state: str = ""
    strict_format: bool = False
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    remaining: int | None = None
    prompt: Prompt | None = field(default=None, repr=False, compare=False)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    details: dict[str, Any] | None = None

    def to_json(self, *, with_tokens: bool = False) -> dict[str, Any]:
        """The JSON form: every field but ``prompt``, and the tokens only ``with_tokens``."""
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "prompt" or (f.name in ("token_ids", "logprobs") and not with_tokens):
                continue
            if f.name in ("finish_reason", "usage", "details") and value is None:
                continue  # records stay as they were for policies that report neither
            data[f.name] = list(value) if isinstance(value, (list, tuple)) else value
        return data


@dataclass
class Trajectory:
    """One multi-turn episode of one task under one budget.

    Attributes:
        env: environment name.
        policy: policy spec string.
        task_id: the task's id.
        sample: index of this trajectory among the samples of its task (0-based).
        budget: the turn budget T it ran under.
        budget_mode: ``announced`` or ``hidden``.
        env_seed: seed of the environment's randomness.
        policy_seed: seed of the policy's sampling.
        initial_observation: the observation before the first action.
        turns: the turns taken.
        success: the task was solved within the budget.
        success_turn: 1-based turn of the first success, or ``None``.
        error: a policy-backend failure that ended the trajectory early, or ``None``.
        group: an optional group label (training: the trajectories of one task in one step).
        ended_by: why it ended, one of :data:`ENDINGS` (``None`` when the record does not say).
        replaced_code_points: code points the writer replaced with U+FFFD to keep the record valid
            UTF-8 (lone surrogates in a reply, action or observation); 0 for clean text.
    """

    env: str
    policy: str
    task_id: str
    sample: int
    budget: int
    budget_mode: str
    env_seed: int
    policy_seed: int
    initial_observation: str
    turns: list[TurnRecord] = field(default_factory=list)
    success: bool = False
    success_turn: int | None = None
    error: str | None = None
    group: str | None = None
    ended_by: str | None = None
    replaced_code_points: int = 0

    @property
    def total_return(self) -> float:
        """Sum of the step rewards."""
        return float(sum(turn.reward for turn in self.turns))

    def key(self) -> tuple[str, int, str, int]:
        """What identifies a trajectory within an evaluation: (policy, budget, task, sample)."""
        return (self.policy, self.budget, self.task_id, self.sample)

    def to_json(self, *, with_tokens: bool = False) -> dict[str, Any]:
        """The JSON-line form (``return`` is the total reward)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["turns"] = [turn.to_json(with_tokens=with_tokens) for turn in self.turns]
        data["return"] = self.total_return
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trajectory:
        """Inverse of :meth:`to_json` (the in-memory :attr:`TurnRecord.prompt` is ``None``)."""
        values = dict(data)
        values.pop("return", None)
        values["turns"] = [TurnRecord(**turn) for turn in values.get("turns", [])]
        return cls(**values)


def _clean(value: Any) -> tuple[Any, int]:
    """``value`` (JSON data) with every string made valid UTF-8, and the number of code points replaced."""
    if isinstance(value, str):
        return valid_utf8(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        total = 0
        for key, item in value.items():
            clean_key, a = _clean(key) if isinstance(key, str) else (key, 0)
            out[clean_key], b = _clean(item)
            total += a + b
        return out, total
    if isinstance(value, (list, tuple)):
        items = [_clean(item) for item in value]
        return [item for item, _ in items], sum(n for _, n in items)
    return value, 0


class RecordWarning(UserWarning):
    """A records file held lines that are left out: a half-written last line, or duplicate records."""


class JsonlWriter:
    """Appends one JSON line per trajectory and flushes it, so a killed run loses at most the
    line being written (which :func:`read_trajectories` then discards).

    Every line is valid UTF-8: code points UTF-8 cannot encode are replaced (see :func:`valid_utf8`),
    counted in the line's ``replaced_code_points`` and in :attr:`replaced` (this writer's total).
    The file is opened on the first write (``lazy``) or at once.
    """

    def __init__(self, path: Path, *, with_tokens: bool = False, lazy: bool = False) -> None:
        self.path = Path(path)
        self.with_tokens = with_tokens
        self.replaced = 0
        self.written = 0
        self._file: TextIO | None = None if lazy else open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, trajectory: Trajectory) -> None:
        """Append ``trajectory`` as one line; the line's ``replaced_code_points`` adds what this write
        replaced (the trajectory object itself is left as it is)."""
        data, replaced = _clean(trajectory.to_json(with_tokens=self.with_tokens))
        data["replaced_code_points"] = trajectory.replaced_code_points + replaced
        self.replaced += replaced
        line = json.dumps(data, ensure_ascii=False)
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._file.write(line + "\n")
        self._file.flush()
        self.written += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trajectories(path: Path, *, repair: bool = False, unique: bool = True) -> list[Trajectory]:
    """Trajectories of a JSON-lines file, each :meth:`Trajectory.key` once (``unique``).

    A last line cut short by a crash is skipped with a warning; with ``repair`` the file is also
    truncated to its last complete line so that appends continue cleanly. A record whose key an
    earlier line holds (a line appended twice, two runs writing one folder) is left out with one
    warning saying how many: a trajectory's seeds depend only on its key, so the first record is
    the one an uninterrupted run writes, and a score counts each trajectory once. With ``repair``
    the file is rewritten without them, so the warning is given once. ``unique=False`` reads every
    record, for logs that hold one per attempt (``errors.jsonl``).
    """
    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes()
    complete_end = raw.rfind(b"\n") + 1
    if complete_end < len(raw):
        warnings.warn(
            f"{path}: discarding a half-written last line ({len(raw) - complete_end} bytes) left by an interrupted run",
            RecordWarning,
            stacklevel=2,
        )
        if repair:
            with open(path, "r+b") as handle:
                handle.truncate(complete_end)
                handle.flush()
                os.fsync(handle.fileno())
    out: dict[Any, tuple[Trajectory, bytes]] = {}
    repeated = 0
    for number, line in enumerate(raw[:complete_end].splitlines(), start=1):
        if not line.strip():
            continue
        try:
            # errors="replace": a file written by another tool may hold invalid bytes
            trajectory = Trajectory.from_json(json.loads(line.decode("utf-8", errors="replace")))
            key = trajectory.key() if unique else number
            repeated += key in out  # TypeError: an unhashable task id
        except (ValueError, TypeError, AttributeError) as exc:  # JSONDecodeError is a ValueError
            raise ValueError(f"{path}:{number}: not a trajectory record ({exc})") from None
        out.setdefault(key, (trajectory, line))
    if repeated:
        warnings.warn(f"{path}: {repeated} duplicate trajectory records (a policy, budget, task and sample given "
                      "before) ignored; each trajectory counts once, as its first record", RecordWarning, stacklevel=2)
        if repair:
            with atomic_path(path, fsync=True) as tmp:
                tmp.write_bytes(b"".join(line + b"\n" for _, line in out.values()))
    return [trajectory for trajectory, _ in out.values()]
