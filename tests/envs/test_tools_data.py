"""The shipped tool-calling entries and the BFCL-v3 multi-turn loader."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import arlkit.data
from arlkit.envs import make
from arlkit.envs.splits import split_of
from arlkit.envs.tools import DatasetError, ToolEntry, instantiate, load_bfcl, shipped_entries
from arlkit.envs.tools.apis import specs_for
from arlkit.envs.tools.calls import parse_calls
from arlkit.envs.tools.checks import bind, execute

DATA = Path(arlkit.data.__file__).resolve().parent / "tools"


def test_shipped_files_equal_the_generator_output(data_script) -> None:  # type: ignore[no-untyped-def]
    make_entries = data_script("make_tool_entries")
    questions, answers = make_entries.build_entries()
    assert (DATA / "questions.jsonl").read_text(encoding="utf-8") == make_entries.render(questions)
    assert (DATA / "answers.jsonl").read_text(encoding="utf-8") == make_entries.render(answers)


def test_shipped_entries_cover_every_class_and_split_by_content() -> None:
    entries = shipped_entries()
    assert len(entries) >= 100
    assert Counter(a for e in entries for a in e.apis).keys() == {
        "FileSystem",
        "Calculator",
        "Messenger",
        "TradingAccount",
        "TravelAgency",
        "Vehicle",
    }
    assert all(len(e.turns) >= 2 for e in entries)
    assert sum(1 for e in entries for t in e.ground_truth if not t) >= 20  # irrelevance turns
    assert max(e.min_turns() for e in entries) <= 24
    splits = {s: [e for e in entries if split_of(e.content()) == s] for s in ("train", "test")}
    assert len(splits["test"]) >= 25 and len(splits["train"]) >= 75
    assert not {e.content() for e in splits["train"]} & {e.content() for e in splits["test"]}


def test_ground_truth_never_fails() -> None:
    for entry in shipped_entries():
        specs = specs_for(entry.apis)
        instances = {a: instantiate(a, entry.initial_config.get(a)) for a in entry.apis}
        for turn in entry.ground_truth:
            for text in turn:
                result = execute(instances, bind(parse_calls(text)[0], specs))
                assert "error" not in result, (entry.entry_id, text, result)


# -- the BFCL loader ---------------------------------------------------------------------------
FS_CONFIG = {
    "root": {
        "kim": {
            "type": "directory",
            "contents": {
                "workspace": {
                    "type": "directory",
                    "contents": {"log.txt": {"type": "file", "content": "ok\nError: disk full\nok"}},
                }
            },
        }
    }
}


def bfcl_question(entry_id: str, classes: list[str], turns: list[str], **extra: Any) -> dict[str, Any]:
    record = {
        "id": entry_id,
        "question": [[{"role": "user", "content": t}] for t in turns],
        "initial_config": {"GorillaFileSystem": FS_CONFIG},
        "path": ["GorillaFileSystem.cd"],
        "involved_classes": classes,
    }
    record.update(extra)
    return record


def write(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_bfcl_entries_with_aliases_load_and_run(tmp_path: Path) -> None:
    questions = write(
        tmp_path / "q.json",
        [
            bfcl_question(
                "multi_turn_base_0",
                ["GorillaFileSystem", "MathAPI"],
                ["Go to workspace and find the errors in log.txt.", "What is the mean of 3, 16 and 60?"],
            ),
            bfcl_question("multi_turn_base_1", ["GorillaFileSystem", "TwitterAPI"], ["Tweet it."]),
            bfcl_question("multi_turn_miss_func_0", ["GorillaFileSystem"], ["x", "y"], missed_function={"1": ["cd"]}),
        ],
    )
    answers = write(
        tmp_path / "a.json",
        [
            {
                "id": "multi_turn_base_0",
                "ground_truth": [
                    ["cd(folder='workspace')", "grep(file_name='log.txt',pattern='Error')"],
                    ["mean([3,16,60])"],
                ],
            },
            {"id": "multi_turn_base_1", "ground_truth": [["post_tweet(content='x')"]]},
            {"id": "multi_turn_miss_func_0", "ground_truth": [[], []]},
        ],
    )
    loaded = load_bfcl(questions, answers)
    assert [e.entry_id for e in loaded.entries] == ["multi_turn_base_0"]
    assert loaded.entries[0].apis == ("FileSystem", "Calculator")
    assert dict(loaded.skipped) == {
        "multi_turn_base_1": "needs TwitterAPI, which arlkit does not implement",
        "multi_turn_miss_func_0": "hides functions in some turns (BFCL miss_func), which arlkit does not model",
    }
    with pytest.raises(
        DatasetError, match=r"q\.json: entry 1 \(id 'multi_turn_base_1'\): unsupported: needs TwitterAPI"
    ):
        load_bfcl(questions, answers, skip_unsupported=False)
    # The environment runs it; the expert policy solves it.
    env = make("tools", questions_file=str(questions), answers_file=str(answers))
    assert [e.entry_id for e in env.entries] == ["multi_turn_base_0"] and len(env.skipped) == 2
    task = env.tasks(split_of(env.entries[0].content()), 1)[0]
    env.reset(task, 0)
    observations = []
    for turn in range(env.t_max):
        result = env.step(env.optimal_actions(env.t_max - turn)[0])
        observations.append(result.observation)
        if result.done:
            break
    assert result.success and turn + 1 == 3
    assert "Error: disk full" in "\n".join(observations)


def test_ground_truth_may_sit_inside_the_question_file(tmp_path: Path) -> None:
    record = bfcl_question("e1", ["GorillaFileSystem"], ["List files."], ground_truth=[["ls()"]])
    loaded = load_bfcl(write(tmp_path / "q.jsonl", [record]))
    assert loaded.entries[0].ground_truth == (("ls()",),)


GOOD_GT = {"id": "e1", "ground_truth": [["ls()"]]}


@pytest.mark.parametrize(
    ("record", "answer", "message"),
    [
        ("not an object", GOOD_GT, r"q\.jsonl: entry 0: expected an object"),
        ({"question": []}, GOOD_GT, r"entry 0: field 'id' must be a non-empty string"),
        (
            bfcl_question("e1", ["GorillaFileSystem"], []),
            GOOD_GT,
            r"entry 0 \(id 'e1'\): field 'question' must be a non-empty list",
        ),
        (bfcl_question("e1", [], ["q"]), GOOD_GT, r"field 'involved_classes' must be a non-empty list"),
        (
            bfcl_question("e1", ["GorillaFileSystem"], ["q"], initial_config=[]),
            GOOD_GT,
            r"field 'initial_config' must be an object",
        ),
        (
            bfcl_question("e1", ["GorillaFileSystem"], ["q"], initial_config={"GorillaFileSystem": {"root": {}}}),
            GOOD_GT,
            r"field 'initial_config'.GorillaFileSystem: FileSystem: 'root' must hold exactly one top-level directory",
        ),
        (
            bfcl_question("e1", ["GorillaFileSystem"], ["q"]),
            {"id": "other", "ground_truth": []},
            r"\(id 'e1'\): no ground truth",
        ),
        (
            bfcl_question("e1", ["GorillaFileSystem"], ["q"]),
            {"id": "e1", "ground_truth": [[], []]},
            r"field 'ground_truth': 2 turns of ground truth for 1 user turns",
        ),
        (
            bfcl_question("e1", ["GorillaFileSystem"], ["q"]),
            {"id": "e1", "ground_truth": [["ls(a=yes)"]]},
            r"field 'ground_truth'\[0\]\[0\]: arguments must be literal values",
        ),
        (
            bfcl_question("e1", ["GorillaFileSystem"], ["q"]),
            {"id": "e1", "ground_truth": [["cd(folder=3)"]]},
            r"field 'ground_truth'\[0\]\[0\]: cd\(\): argument 'folder': expected a string, got 3",
        ),
        (
            bfcl_question("e1", ["GorillaFileSystem"], ["q"]),
            {"id": "e1", "ground_truth": [["ls(); ls()"]]},
            r"field 'ground_truth'\[0\]\[0\]: expected exactly one call, got 2",
        ),
        (
            bfcl_question("e1", ["GorillaFileSystem"], [[{"role": "user"}]]),
            GOOD_GT,
            r"field 'question'\[0\]\[0\]: expected a message object",
        ),
    ],
)
def test_malformed_entries_name_file_entry_and_field(tmp_path: Path, record: Any, answer: Any, message: str) -> None:
    questions = write(tmp_path / "q.jsonl", [record])
    answers = write(tmp_path / "a.jsonl", [answer])
    with pytest.raises(DatasetError, match=message):
        load_bfcl(questions, answers)


def test_file_level_problems(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file"):
        load_bfcl(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n{oops\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl: line 2: not valid JSON"):
        load_bfcl(bad)
    answers = write(tmp_path / "a.jsonl", [{"id": "e1"}])
    with pytest.raises(DatasetError, match=r"a\.jsonl: entry 0: expected an object with 'id' and 'ground_truth'"):
        load_bfcl(write(tmp_path / "q.jsonl", []), answers)


def test_duplicate_ids_and_duplicate_content_are_refused(tmp_path: Path) -> None:
    one = bfcl_question("e1", ["GorillaFileSystem"], ["List files."], ground_truth=[["ls()"]])
    two = bfcl_question("e2", ["GorillaFileSystem"], ["List files."], ground_truth=[["ls()"]])
    with pytest.raises(DatasetError, match=r"entry 1 \(id 'e1'\)|entry 1: field 'id': 'e1' also used by entry 0"):
        load_bfcl(write(tmp_path / "q.jsonl", [one, one]))
    with pytest.raises(DatasetError, match=r"entry 1: same content as entry 'e1'"):
        load_bfcl(write(tmp_path / "q2.jsonl", [one, two]))


def test_entry_payload_round_trip() -> None:
    entry = shipped_entries()[0]
    assert ToolEntry.from_payload(json.loads(json.dumps(entry.payload()))) == entry
