"""Code problems: the shipped task set and loaders for DeepCoder, TACO/APPS and LiveCodeBench files.

arlkit's own format (``src/arlkit/data/code/problems.json``)::

    {"format": "arlkit-code-v1", "problems": [
      {"id": "sum-two", "title": "...", "difficulty": "easy", "statement": "...",
       "starter_code": "", "reference": "<python program>",
       "public_tests": [{"kind": "stdio", "input": "1 2\\n", "output": "3\\n"}, ...],
       "hidden_tests": [{"kind": "call", "fn_name": "f", "args": [1, 2], "expected": 3}, ...]}]}

Other formats (detected per entry when ``fmt="auto"``), one JSON list, a JSONL file, or a folder of
such files:

- DeepCoder (``problem`` + ``tests``): ``tests`` is a list of ``{"input", "output", "testtype":
  "stdin"|"functional", "metadata": {"func_name"}}`` (its LiveCodeBench part), a list of
  ``{"input", "output", "fn_name"?}`` (PrimeIntellect) or ``{"inputs", "outputs", "fn_name"?}``
  (TACO), possibly as a JSON string;
- TACO / APPS (``question`` + ``input_output`` + ``solutions``);
- LiveCodeBench (``question_content`` + ``public_test_cases`` + ``private_test_cases``; the private
  cases may be base64/zlib/pickle-encoded: only plain strings, lists and dicts are unpickled).

Functional tests: arguments are given one JSON value per line (LiveCodeBench) or as a list (TACO).
Files without a public/hidden distinction show their first ``n_public`` tests as public; every
test is hidden (success = all pass). The split of a problem is ``split`` when the entry has one,
else a hash of its statement; a problem whose statement appears in both splits is refused.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from arlkit.envs.splits import SPLITS, content_id, split_of

__all__ = [
    "DATA_DIR",
    "DatasetError",
    "CodeProblem",
    "CodeTest",
    "load_problems",
    "problems_by_split",
    "shipped_problems",
    "task_id_of",
]

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "code"
SHIPPED_FILE = DATA_DIR / "problems.json"
DatasetFormat = Literal["auto", "arlkit", "deepcoder", "taco", "livecodebench"]
DIFFICULTIES = ("easy", "medium", "hard")


class DatasetError(ValueError):
    """A dataset file is malformed; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class CodeTest:
    """One unit test.

    Attributes:
        kind: ``stdio`` (feed ``input`` on stdin, compare stdout with ``output``), ``call``
            (call ``fn_name(*args)``, compare the return value with ``expected``) or ``check``
            (HumanEval: ``input`` is a test function ``check(candidate)``, run with the program's
            ``fn_name`` as the candidate; it passes when it returns without an error).
        input: stdin text (``stdio``); the test function's source (``check``).
        output: expected stdout (``stdio``).
        fn_name: function (or ``Solution`` method) to call (``call``, ``check``).
        args: positional arguments, JSON values (``call``).
        expected: expected return value, a JSON value (``call``).
        setup: code run before the test function, in its namespace (``check``: HumanEval's prompt,
            whose helper functions some checks call).
    """

    kind: Literal["stdio", "call", "check"]
    input: str = ""
    output: str = ""
    fn_name: str = ""
    args: tuple[Any, ...] = ()
    expected: Any = None
    setup: str = ""

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "stdio":
            return {"kind": "stdio", "input": self.input, "output": self.output}
        if self.kind == "check":
            return {"kind": "check", "fn_name": self.fn_name, "source": self.input, "setup": self.setup}
        return {"kind": "call", "fn_name": self.fn_name, "args": list(self.args), "expected": self.expected}


@dataclass(frozen=True)
class CodeProblem:
    """A programming problem with its tests.

    Attributes:
        problem_id: identifier, unique within its dataset.
        title: short name.
        difficulty: ``easy``, ``medium``, ``hard`` (or the dataset's own label).
        statement: the problem text shown to the agent.
        public_tests: tests whose failures are shown as feedback.
        hidden_tests: tests that decide success (all must pass) and the pass rate.
        reference: a correct program, when known (the oracle's action).
        starter_code: code the program must start from (signature of a function), may be empty.
        split: ``train`` or ``test``.
        source: where the problem came from (``arlkit`` or a file path).
    """

    problem_id: str
    title: str
    difficulty: str
    statement: str
    public_tests: tuple[CodeTest, ...]
    hidden_tests: tuple[CodeTest, ...]
    reference: str | None = None
    starter_code: str = ""
    split: str = "train"
    source: str = "arlkit"

    @property
    def content_key(self) -> str:
        """The statement with whitespace collapsed and case folded (identity for splits)."""
        return " ".join(self.statement.split()).casefold()

    def to_payload(self) -> dict[str, Any]:
        """A JSON-serialisable dict from which :meth:`from_payload` rebuilds the problem."""
        return {
            "id": self.problem_id,
            "title": self.title,
            "difficulty": self.difficulty,
            "statement": self.statement,
            "starter_code": self.starter_code,
            "reference": self.reference,
            "public_tests": [t.to_dict() for t in self.public_tests],
            "hidden_tests": [t.to_dict() for t in self.hidden_tests],
            "split": self.split,
            "source": self.source,
        }

    @staticmethod
    def from_payload(payload: Mapping[str, Any], where: str = "payload") -> CodeProblem:
        return _parse_arlkit_entry(payload, where, 0, split=payload.get("split"))


# -- validation helpers -----------------------------------------------------------------------
class _Where:
    """Names the file, the entry and the field of a problem in error messages."""

    def __init__(self, path: str, index: int, entry: Mapping[str, Any] | Any) -> None:
        self.path, self.index = path, index
        ident = entry.get("id") or entry.get("problem_id") or entry.get("task_id") if isinstance(entry, Mapping) else None
        self.ident = f" (id {ident!r})" if ident else ""

    def error(self, fld: str, problem: str) -> DatasetError:
        return DatasetError(f"{self.path}: entry {self.index}{self.ident}: field {fld!r}: {problem}")


def _need_str(entry: Mapping[str, Any], key: str, where: _Where, *, allow_empty: bool = False) -> str:
    if key not in entry:
        raise where.error(key, "missing")
    value = entry[key]
    if not isinstance(value, str):
        raise where.error(key, f"expected a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise where.error(key, "is empty")
    return value


def _parse_test(raw: Any, where: _Where, fld: str) -> CodeTest:
    if not isinstance(raw, Mapping):
        raise where.error(fld, f"expected an object, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind == "stdio":
        for key in ("input", "output"):
            if not isinstance(raw.get(key), str):
                raise where.error(f"{fld}.{key}", "expected a string")
        return CodeTest("stdio", input=raw["input"], output=raw["output"])
    if kind == "call":
        if not isinstance(raw.get("fn_name"), str) or not raw["fn_name"].isidentifier():
            raise where.error(f"{fld}.fn_name", "expected a Python identifier")
        if not isinstance(raw.get("args"), list):
            raise where.error(f"{fld}.args", "expected a list of arguments")
        if "expected" not in raw:
            raise where.error(f"{fld}.expected", "missing")
        return CodeTest("call", fn_name=raw["fn_name"], args=tuple(raw["args"]), expected=raw["expected"])
    if kind == "check":
        if not isinstance(raw.get("fn_name"), str) or not raw["fn_name"].isidentifier():
            raise where.error(f"{fld}.fn_name", "expected a Python identifier")
        for key in ("source", "setup"):
            if not isinstance(raw.get(key, ""), str):
                raise where.error(f"{fld}.{key}", "expected a string")
        if "def check(" not in raw.get("source", ""):
            raise where.error(f"{fld}.source", "expected the source of a function check(candidate)")
        return CodeTest("check", input=raw["source"], fn_name=raw["fn_name"], setup=raw.get("setup", ""))
    raise where.error(f"{fld}.kind", f"expected 'stdio', 'call' or 'check', got {kind!r}")


def _parse_arlkit_entry(entry: Mapping[str, Any], path: str, index: int, split: Any = None) -> CodeProblem:
    where = _Where(path, index, entry)
    if not isinstance(entry, Mapping):
        raise where.error("(entry)", f"expected an object, got {type(entry).__name__}")
    problem_id = _need_str(entry, "id", where)
    statement = _need_str(entry, "statement", where)
    difficulty = _need_str(entry, "difficulty", where)
    reference = entry.get("reference")
    if reference is not None and (not isinstance(reference, str) or not reference.strip()):
        raise where.error("reference", "expected a non-empty program or null")
    tests: dict[str, tuple[CodeTest, ...]] = {}
    for key in ("public_tests", "hidden_tests"):
        raw = entry.get(key)
        if not isinstance(raw, list):
            raise where.error(key, "expected a list of tests")
        tests[key] = tuple(_parse_test(t, where, f"{key}[{i}]") for i, t in enumerate(raw))
    if not tests["hidden_tests"]:
        raise where.error("hidden_tests", "needs at least one test")
    split = split if split is not None else entry.get("split")
    if split is not None and split not in SPLITS:
        raise where.error("split", f"expected one of {', '.join(SPLITS)}, got {split!r}")
    problem = CodeProblem(
        problem_id=problem_id,
        title=str(entry.get("title") or problem_id),
        difficulty=difficulty,
        statement=statement,
        public_tests=tests["public_tests"],
        hidden_tests=tests["hidden_tests"],
        reference=reference,
        starter_code=str(entry.get("starter_code") or ""),
        source=str(entry.get("source") or path),
    )
    return _with_split(problem, split)


def _with_split(problem: CodeProblem, split: Any) -> CodeProblem:
    chosen = split if split in SPLITS else split_of(problem.content_key)
    return CodeProblem(**{**problem.__dict__, "split": chosen})


# -- foreign formats ----------------------------------------------------------------------------
def _maybe_json(value: Any, where: _Where, fld: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise where.error(fld, f"is a string but not valid JSON ({exc})") from None
    return value


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles strings, numbers, lists and dicts only: any class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dataset file")


def _decode_lcb_private(value: Any, where: _Where) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        raw = zlib.decompress(base64.b64decode(value.encode("ascii")))
        decoded = _PlainUnpickler(io.BytesIO(raw)).load()
    except Exception as exc:  # any decoding failure is a malformed field
        raise where.error("private_test_cases", f"neither JSON nor base64/zlib/plain pickle ({exc})") from None
    return json.loads(decoded) if isinstance(decoded, (str, bytes)) else decoded


def _call_args(raw_input: Any, where: _Where, fld: str) -> tuple[Any, ...]:
    if isinstance(raw_input, list):
        return tuple(raw_input)
    if isinstance(raw_input, str):
        args = []
        for line in raw_input.splitlines():
            if line.strip():
                try:
                    args.append(json.loads(line))
                except ValueError:
                    raise where.error(fld, f"argument line is not JSON: {line[:60]!r}") from None
        return tuple(args)
    raise where.error(fld, f"expected a list or JSON lines of arguments, got {type(raw_input).__name__}")


def _call_expected(raw_output: Any, unwrap: bool) -> Any:
    value = raw_output
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    # TACO/APPS wrap a function's expected return value in a one-element list.
    if unwrap and isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value) + "\n"
    return str(value)


def _tests_from_pairs(
    pairs: Sequence[tuple[Any, Any]], fn_name: str | None, where: _Where, fld: str, unwrap: bool
) -> list[CodeTest]:
    out = []
    for i, (inp, outp) in enumerate(pairs):
        if fn_name:
            args = _call_args(inp, where, f"{fld}[{i}]")
            out.append(CodeTest("call", fn_name=fn_name, args=args, expected=_call_expected(outp, unwrap)))
        else:
            out.append(CodeTest("stdio", input=_as_text(inp), output=_as_text(outp)))
    return out


def _tests_any(raw: Any, where: _Where, fld: str, fn_hint: str | None = None) -> list[CodeTest]:
    raw = _maybe_json(raw, where, fld)
    if isinstance(raw, Mapping):
        inputs, outputs = raw.get("inputs"), raw.get("outputs")
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise where.error(fld, "expected 'inputs' and 'outputs' lists of the same length")
        fn_name = raw.get("fn_name") or fn_hint
        return _tests_from_pairs(list(zip(inputs, outputs, strict=True)), fn_name, where, fld, unwrap=True)
    if isinstance(raw, list):
        pairs, fn_name = [], fn_hint
        for i, t in enumerate(raw):
            if not isinstance(t, Mapping) or "input" not in t or "output" not in t:
                raise where.error(f"{fld}[{i}]", "expected an object with 'input' and 'output'")
            meta = _maybe_json(t.get("metadata") or {}, where, f"{fld}[{i}].metadata")
            meta_fn = meta.get("func_name") if isinstance(meta, Mapping) else None
            if t.get("testtype") == "functional" or t.get("fn_name") or meta_fn:
                fn_name = t.get("fn_name") or meta_fn or fn_name
                if not fn_name:
                    raise where.error(f"{fld}[{i}]", "functional test without a function name")
            pairs.append((t["input"], t["output"]))
        return _tests_from_pairs(pairs, fn_name, where, fld, unwrap=False)
    raise where.error(fld, f"expected a list or an object of tests, got {type(raw).__name__}")


def _first_str(entry: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = entry.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _parse_foreign_entry(entry: Mapping[str, Any], path: str, index: int, n_public: int) -> CodeProblem:
    where = _Where(path, index, entry)
    statement = _first_str(entry, ("problem", "question", "question_content", "prompt", "description"))
    if statement is None:
        raise where.error("problem/question/question_content", "missing: no problem statement found")
    meta = _maybe_json(entry.get("metadata") or {}, where, "metadata")
    fn_hint = meta.get("func_name") if isinstance(meta, Mapping) else None
    if "public_test_cases" in entry or "private_test_cases" in entry:
        public = _tests_any(entry.get("public_test_cases") or [], where, "public_test_cases", fn_hint)
        raw_private = _decode_lcb_private(entry.get("private_test_cases") or [], where)
        private = _tests_any(raw_private, where, "private_test_cases", fn_hint)
        hidden = public + private
    else:
        key = "tests" if "tests" in entry else "input_output" if "input_output" in entry else None
        if key is None:
            raise where.error("tests/input_output", "missing: no tests found")
        hidden = _tests_any(entry[key], where, key, fn_hint)
        public = hidden[:n_public]
    if not hidden:
        raise where.error("tests", "needs at least one test")
    reference = _first_str(entry, ("reference", "solution", "canonical_solution"))
    if reference is None and "solutions" in entry:
        sols = _maybe_json(entry["solutions"], where, "solutions")
        if isinstance(sols, list) and sols and isinstance(sols[0], str):
            reference = sols[0]
    raw_id = entry.get("id", entry.get("problem_id", entry.get("task_id", entry.get("question_id"))))
    problem_id = str(raw_id) if raw_id is not None else f"{Path(path).stem}-{index}"
    problem = CodeProblem(
        problem_id=problem_id,
        title=str(entry.get("title") or entry.get("question_title") or problem_id),
        difficulty=str(entry.get("difficulty") or "unknown").lower(),
        statement=statement,
        public_tests=tuple(public),
        hidden_tests=tuple(hidden),
        reference=reference,
        starter_code=str(entry.get("starter_code") or ""),
        source=path,
    )
    return _with_split(problem, entry.get("split"))


# -- files ----------------------------------------------------------------------------------------
def _entries(path: Path) -> Iterator[tuple[str, int, Any, bool]]:
    """``(file, index, entry, is_arlkit)`` for every entry of a file or folder."""
    files = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl")) if path.is_dir() else [path]
    if not files:
        raise DatasetError(f"{path}: no .json or .jsonl files found")
    for file in files:
        text = file.read_text(encoding="utf-8")
        name = str(file)
        if file.suffix == ".jsonl":
            for i, line in enumerate(text.splitlines()):
                if line.strip():
                    try:
                        yield name, i, json.loads(line), False
                    except ValueError as exc:
                        raise DatasetError(f"{name}: entry {i}: not valid JSON ({exc})") from None
            continue
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise DatasetError(f"{name}: not valid JSON ({exc})") from None
        if isinstance(data, Mapping) and data.get("format") == "arlkit-code-v1":
            problems = data.get("problems")
            if not isinstance(problems, list):
                raise DatasetError(f"{name}: field 'problems': expected a list")
            for i, entry in enumerate(problems):
                yield name, i, entry, True
        elif isinstance(data, list):
            for i, entry in enumerate(data):
                yield name, i, entry, False
        else:
            raise DatasetError(f"{name}: expected a list of problems or an arlkit-code-v1 object")


def load_problems(path: str | Path, fmt: DatasetFormat = "auto", n_public: int = 3) -> list[CodeProblem]:
    """Every problem of a file or folder, validated; raises :class:`DatasetError` on bad input
    (naming the file, the entry and the field) or when train and test share a statement."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: no such file or folder")
    problems: list[CodeProblem] = []
    for name, index, entry, is_arlkit in _entries(path):
        if not isinstance(entry, Mapping):
            raise DatasetError(f"{name}: entry {index}: expected an object, got {type(entry).__name__}")
        if fmt == "arlkit" or (fmt == "auto" and is_arlkit):
            problems.append(_parse_arlkit_entry(entry, name, index))
        else:
            problems.append(_parse_foreign_entry(entry, name, index, n_public))
    _check_unique(problems)
    return problems


def _check_unique(problems: Sequence[CodeProblem]) -> None:
    ids: dict[str, CodeProblem] = {}
    splits_of: dict[str, CodeProblem] = {}
    for p in problems:
        if p.problem_id in ids:
            raise DatasetError(f"{p.source}: problem id {p.problem_id!r} appears twice")
        ids[p.problem_id] = p
        other = splits_of.get(p.content_key)
        if other is not None and other.split != p.split:
            raise DatasetError(
                f"{p.source}: problem {p.problem_id!r} ({p.split}) has the same statement as "
                f"{other.problem_id!r} ({other.split}): train and test must not overlap"
            )
        splits_of.setdefault(p.content_key, p)


def problems_by_split(problems: Sequence[CodeProblem], split: str, difficulty: str = "all") -> list[CodeProblem]:
    """The problems of ``split`` (and ``difficulty``), one per statement, in dataset order."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid choices: {', '.join(SPLITS)}")
    seen: set[str] = set()
    out = []
    for p in problems:
        if p.split == split and (difficulty == "all" or p.difficulty == difficulty) and p.content_key not in seen:
            seen.add(p.content_key)
            out.append(p)
    return out


_SHIPPED: list[CodeProblem] | None = None


def shipped_problems() -> list[CodeProblem]:
    """arlkit's own task set (cached)."""
    global _SHIPPED
    if _SHIPPED is None:
        _SHIPPED = load_problems(SHIPPED_FILE, "arlkit")
    return list(_SHIPPED)


def task_id_of(problem: CodeProblem) -> str:
    """The task id of a problem: derived from its statement."""
    return "code-" + re.sub(r"[^a-z0-9-]+", "-", problem.problem_id.lower())[:40] + "-" + content_id(problem.content_key)[:8]
