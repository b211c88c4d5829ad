"""The shipped code task set, the loaders for foreign formats, and bad dataset files."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from collections import Counter
from pathlib import Path

import pytest

from arlkit.envs import make
from arlkit.envs.code.env import CodeEnv
from arlkit.envs.code.data import DatasetError, load_problems, problems_by_split, shipped_problems
from arlkit.envs.splits import split_of


def test_shipped_set_size_grades_shapes_and_splits() -> None:
    problems = shipped_problems()
    assert len(problems) >= 60
    grades = Counter((p.split, p.difficulty) for p in problems)
    for split in ("train", "test"):
        for grade in ("easy", "medium", "hard"):
            assert grades[(split, grade)] >= 3, grades
    kinds = Counter(t.kind for p in problems for t in p.hidden_tests)
    assert kinds["stdio"] > 100 and kinds["call"] > 100
    for p in problems:
        assert p.reference and p.public_tests and len(p.hidden_tests) >= 5
        assert all(t in p.hidden_tests for t in p.public_tests), p.problem_id
        assert p.split == split_of(p.content_key)


def test_train_and_test_are_disjoint_and_deterministic() -> None:
    env = make("code")
    train, test = env.tasks("train", 40), env.tasks("test", 15)
    assert not {t.task_id for t in train} & {t.task_id for t in test}
    statements = lambda ts: {t.payload["statement"] for t in ts}  # noqa: E731
    assert not statements(train) & statements(test)
    assert [t.task_id for t in make("code").tasks("test", 15)] == [t.task_id for t in test]
    with pytest.raises(ValueError, match="only"):
        env.tasks("test", 1000)


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _arlkit_entry(**overrides: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "id": "p1",
        "difficulty": "easy",
        "statement": "Print the input back.",
        "reference": "print(input())",
        "public_tests": [{"kind": "stdio", "input": "a\n", "output": "a\n"}],
        "hidden_tests": [{"kind": "stdio", "input": "b\n", "output": "b\n"}],
    }
    entry.update(overrides)
    return entry


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"statement": 7}, "'statement'"),
        ({"statement": ""}, "'statement'"),
        ({"id": None}, "'id'"),
        ({"hidden_tests": []}, "'hidden_tests'"),
        ({"hidden_tests": "nope"}, "'hidden_tests'"),
        ({"public_tests": [{"kind": "stdio", "input": 3, "output": ""}]}, "'public_tests[0].input'"),
        ({"hidden_tests": [{"kind": "call", "fn_name": "not valid", "args": [], "expected": 1}]}, "'hidden_tests[0].fn_name'"),
        ({"hidden_tests": [{"kind": "call", "fn_name": "f", "args": 1, "expected": 1}]}, "'hidden_tests[0].args'"),
        ({"hidden_tests": [{"kind": "call", "fn_name": "f", "args": []}]}, "'hidden_tests[0].expected'"),
        ({"hidden_tests": [{"kind": "shell"}]}, "'hidden_tests[0].kind'"),
        ({"reference": ""}, "'reference'"),
        ({"split": "validation"}, "'split'"),
    ],
)
def test_malformed_arlkit_files_name_file_entry_and_field(tmp_path: Path, change: dict[str, object], field: str) -> None:
    good = _arlkit_entry(id="ok", statement="Another problem.")
    path = _write(tmp_path / "bad.json", {"format": "arlkit-code-v1", "problems": [good, _arlkit_entry(**change)]})
    with pytest.raises(DatasetError) as info:
        load_problems(path)
    message = str(info.value)
    assert str(path) in message and "entry 1" in message and field in message, message


def test_broken_json_and_wrong_top_level_are_reported(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(DatasetError, match="broken.json: not valid JSON"):
        load_problems(broken)
    with pytest.raises(DatasetError, match="expected a list of problems"):
        load_problems(_write(tmp_path / "top.json", {"problems": 3}))
    lines = tmp_path / "x.jsonl"
    lines.write_text(json.dumps({"question": "q", "input_output": "{}"}) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="x.jsonl: entry 0.*'input_output'"):
        load_problems(lines)
    with pytest.raises(DatasetError, match="no such file"):
        load_problems(tmp_path / "missing.json")


def test_overlapping_train_and_test_are_refused(tmp_path: Path) -> None:
    a = _arlkit_entry(id="a", split="train")
    b = _arlkit_entry(id="b", split="test", statement="  print THE input back. ")
    path = _write(tmp_path / "overlap.json", {"format": "arlkit-code-v1", "problems": [a, b]})
    with pytest.raises(DatasetError, match="train and test must not overlap"):
        load_problems(path)
    dup = _write(tmp_path / "dup.json", {"format": "arlkit-code-v1", "problems": [_arlkit_entry(), _arlkit_entry(statement="x")]})
    with pytest.raises(DatasetError, match="appears twice"):
        load_problems(dup)


def test_deepcoder_taco_and_livecodebench_entries_load_and_run(tmp_path: Path) -> None:
    lcb_private = base64.b64encode(zlib.compress(pickle.dumps(json.dumps([
        {"input": "4\n5", "output": "9", "testtype": "functional"},
    ])))).decode()  # fmt: skip
    entries = [
        {  # DeepCoder, LiveCodeBench part: functional tests with metadata.func_name
            "problem": "Add two numbers a and b.",
            "tests": json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional", "metadata": {"func_name": "add"}}] * 2),
            "split": "test",
        },
        {  # DeepCoder, PrimeIntellect part: stdin/stdout
            "problem": "Echo the line.",
            "tests": [{"input": "hi\n", "output": "hi\n"}, {"input": "yo\n", "output": "yo\n"}],
            "split": "test",
        },
        {  # TACO/APPS: input_output with fn_name and wrapped outputs, solutions as a JSON string
            "question": "Return the double of x.",
            "input_output": json.dumps({"fn_name": "double", "inputs": [[2], [5]], "outputs": [[4], [10]]}),
            "solutions": json.dumps(["def double(x):\n    return 2 * x\n"]),
            "difficulty": "EASY",
            "split": "test",
        },
        {  # LiveCodeBench: public + compressed private, metadata as a JSON string
            "question_content": "Add a and b (functional).",
            "public_test_cases": json.dumps([{"input": "1\n1", "output": "2", "testtype": "functional"}]),
            "private_test_cases": lcb_private,
            "metadata": json.dumps({"func_name": "plus"}),
            "question_id": "lcb-1",
            "split": "test",
        },
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n", encoding="utf-8")
    problems = load_problems(path)
    assert [p.hidden_tests[0].kind for p in problems] == ["call", "stdio", "call", "call"]
    assert problems[0].hidden_tests[0].args == (1, 2) and problems[0].hidden_tests[0].expected == 3
    assert problems[2].hidden_tests[1].expected == 10 and problems[2].reference is not None
    assert [t.args for t in problems[3].hidden_tests] == [(1, 1), (4, 5)] and problems[3].problem_id == "lcb-1"
    assert len(problems_by_split(problems, "test")) == 4

    env = make("code", dataset=str(path), test_timeout_s=1.0, step_budget_s=5.0)
    assert isinstance(env, CodeEnv)
    solutions = ["def add(a, b):\n    return a + b\n", "print(input())\n", "def double(x):\n    return 2 * x\n",
                 "class Solution:\n    def plus(self, a, b):\n        return a + b\n"]  # fmt: skip
    for task, program in zip(env.tasks("test", 4), solutions):
        env.reset(task, seed=0)
        assert env.step(program).success, task.task_id


def test_a_malicious_pickle_is_refused(tmp_path: Path) -> None:
    class Boom:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (print, ("pwned",))

    payload = base64.b64encode(zlib.compress(pickle.dumps(Boom()))).decode()
    entry = {"question_content": "q", "public_test_cases": "[]", "private_test_cases": payload}
    with pytest.raises(DatasetError, match="private_test_cases.*refusing to load"):
        load_problems(_write(tmp_path / "evil.json", [entry]))
