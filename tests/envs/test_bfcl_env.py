"""The ``bfcl`` environment: BFCL's own data, classes and checker (docs/benchmarks.md)."""

from __future__ import annotations

import copy
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval", reason="the bfcl extra is not installed (pip install --no-deps bfcl-eval mpmath)")

from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as bfcl_checker  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils as bfcl_utils  # noqa: E402

from arlkit.config import ConfigError  # noqa: E402
from arlkit.envs import make  # noqa: E402
from arlkit.envs.bfcl import CATEGORIES, FINISH, BfclEntry, BfclEnv, DatasetError, function_docs, load_entries  # noqa: E402
from arlkit.envs.bfcl import backend  # noqa: E402
from arlkit.envs.checker import check_env  # noqa: E402
from arlkit.envs.protocol import StepResult, Task  # noqa: E402

# One call per class that reads and changes nothing (for the "extra read-only call" alteration).
READ_ONLY = {
    "GorillaFileSystem": "pwd()",
    "MessageAPI": "list_users()",
    "TwitterAPI": "posting_get_login_status()",
    "TicketAPI": "ticket_get_login_status()",
    "TradingBot": "get_watchlist()",
    "TravelAPI": "travel_get_login_status()",
    "VehicleControlAPI": "check_tire_pressure()",
}


@pytest.fixture(scope="module", params=CATEGORIES)
def category_env(request: pytest.FixtureRequest) -> BfclEnv:
    return make("bfcl", category=request.param)


def _bfcl_verdict(entry: BfclEntry, turns: list[list[str]]) -> tuple[bool, str]:
    """BFCL's own multi_turn_checker on one call per step (it evaluates the strings itself)."""
    name = "arlkit_test_" + uuid.uuid4().hex[:12]
    record = {"id": entry.entry_id, "initial_config": entry.initial_config, "involved_classes": list(entry.classes)}
    try:
        verdict = bfcl_checker.multi_turn_checker([[[c] for c in t] for t in turns], [list(t) for t in entry.ground_truth], record, "", name)
    finally:
        for key in [k for k in vars(bfcl_utils) if k.startswith(name)]:
            del vars(bfcl_utils)[key]  # BFCL keeps every instance in its module's globals
    return bool(verdict["valid"]), str(verdict.get("error_type", ""))


def _arlkit_verdict(env: BfclEnv, task: Task, turns: list[list[str]]) -> bool:
    env.reset(task, 0)
    for calls in turns:
        for call in calls:
            assert env.step(call).valid, call
        result = env.step(f"{FINISH}()")
        if result.done:
            return result.success
    raise AssertionError("the episode did not end after the last turn")


def _alterations(entry: BfclEntry) -> dict[str, list[list[str]]]:
    gt = [list(t) for t in entry.ground_truth]
    out = {"ground truth": gt}
    first = next(i for i, t in enumerate(gt) if t)
    out["dropped call"] = copy.deepcopy(gt)
    out["dropped call"][first].pop()
    read_only = next((READ_ONLY[c] for c in entry.classes if c in READ_ONLY), None)
    if read_only:
        out["extra read-only call"] = copy.deepcopy(gt)
        out["extra read-only call"][first].insert(0, read_only)
    early = next((i for i in range(len(gt) - 1) if gt[i + 1]), None)
    if early is not None:
        out["call one turn early"] = copy.deepcopy(gt)
        out["call one turn early"][early].append(out["call one turn early"][early + 1].pop(0))
    pair = next((i for i, t in enumerate(gt) if len(t) >= 2), None)
    if pair is not None:
        out["swapped calls"] = copy.deepcopy(gt)
        turn = out["swapped calls"][pair]
        turn[0], turn[1] = turn[1], turn[0]
    return out


def test_every_category_loads_all_200_entries(category_env: BfclEnv) -> None:
    assert len(category_env.entries) == 200
    ids = [t.task_id for t in category_env.tasks("test", 200)]
    assert len(set(ids)) == 200 and all(i.startswith(category_env.config.category + "_") for i in ids)


def test_verdicts_equal_bfcl_checker_on_truth_and_altered_sequences(category_env: BfclEnv) -> None:
    tally: dict[str, list[int]] = {}
    disagreements = []
    for entry, task in zip(category_env.entries, category_env.tasks("test", 200), strict=True):
        for kind, turns in _alterations(entry).items():
            ours, (theirs, error_type) = _arlkit_verdict(category_env, task, turns), _bfcl_verdict(entry, turns)
            counts = tally.setdefault(kind, [0, 0])
            counts[0] += 1
            counts[1] += theirs
            if ours != theirs:
                disagreements.append((entry.entry_id, kind, ours, theirs, error_type))
    assert not disagreements, disagreements[:5]
    assert tally["ground truth"] == [200, 200]  # the ground truth replays to success on every entry
    assert tally["dropped call"][1] == 0  # and the alterations are not vacuous: each kind has failures or passes
    assert 0 < tally["call one turn early"][1] < tally["call one turn early"][0]
    assert 0 < tally["swapped calls"][1] < tally["swapped calls"][0]
    assert tally["extra read-only call"][0] >= 150


def test_excluded_functions_are_not_offered_unless_asked() -> None:
    env = make("bfcl")
    entry = next(e for e in env.entries if e.hidden)
    env.reset(Task(entry.entry_id, entry.payload()), 0)
    offered = {json.loads(line)["name"] for line in env.prompt_text().instruction.split("The functions, as JSON:\n")[1].splitlines()}
    assert set(entry.hidden) and not set(entry.hidden) & offered
    assert offered == {d["name"] for c in entry.classes for d in function_docs(c)} - set(entry.hidden)
    shown = make("bfcl", hide_excluded=False)
    raw = next(e for e in shown.entries if e.entry_id == entry.entry_id)
    shown.reset(Task(raw.entry_id, raw.payload()), 0)
    assert all(f'"name": "{n}"' in shown.prompt_text().instruction for n in entry.hidden)


def test_missed_functions_appear_at_the_turn_bfcl_reveals_them() -> None:
    env = make("bfcl", category="multi_turn_miss_func")
    entry = env.entries[0]
    (turn, names), = entry.revealed.items()
    env.reset(Task(entry.entry_id, entry.payload()), 0)
    assert not any(f'"name": "{n}"' in env.prompt_text().instruction for n in names)
    for k in range(turn):
        for call in entry.ground_truth[k]:
            env.step(call)
        result = env.step(f"{FINISH}()")
    assert env.turn == turn and "more functions are now available" in result.observation
    assert all(f'"name": "{n}"' in result.observation for n in names)


def test_call_results_are_bfcl_executor_strings() -> None:
    env = make("bfcl")
    entry = env.entries[0]  # GorillaFileSystem + TwitterAPI
    calls = ["cd(folder='document')", "touch(file_name='new.txt')", "ls()", "undefined_tool(x=1)", "mkdir()"]
    env.reset(Task(entry.entry_id, entry.payload()), 0)
    ours = [env.step(c).observation.split(" -> ", 1)[1] for c in calls]
    name = "arlkit_test_" + uuid.uuid4().hex[:12]
    theirs, _ = bfcl_utils.execute_multi_turn_func_call(calls, entry.initial_config, list(entry.classes), name, entry.entry_id)
    for key in [k for k in vars(bfcl_utils) if k.startswith(name)]:
        del vars(bfcl_utils)[key]
    assert ours == theirs
    assert ours[1] == "None" and ours[3] == "Error during execution: name 'undefined_tool' is not defined"


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("os.system('ls')", "attribute chains are not allowed"),
        ("print(open('/etc/passwd').read())", "arguments must be literal values"),
        ("ls(); finish_turn(); ls()", "must be the last call"),
        ("finish_turn(now=True)", "takes no arguments"),
        ("ls()\npwd()", "2 calls in one action; at most 1 call per action"),
        ("just text", "not valid call syntax"),
    ],
)
def test_invalid_actions_run_nothing(action: str, message: str) -> None:
    env = make("bfcl")
    env.reset(env.tasks("test", 1)[0], 0)
    key = env.state_key()
    result = env.step(action)
    assert (result.valid, result.done, result.reward) == (False, False, 0.0) and message in result.observation
    assert env.state_key() == key


def test_calls_that_would_not_terminate_are_refused() -> None:
    env = make("bfcl")
    entry = next(e for e in env.entries if "MathAPI" in e.classes)
    env.reset(Task(entry.entry_id, entry.payload()), 0)
    assert "arlkit refused power()" in env.step("power(base=10, exponent=1000000000)").observation
    assert "arlkit refused square_root()" in env.step("square_root(number=2, precision=100000000)").observation
    assert "arlkit refused power()" in env.step(f"power(base=1, exponent={10**3999})").observation  # no float of it
    assert env.step("power(base=2, exponent=10)").observation.endswith('{"result": 1024}')
    assert backend.hazard("MathAPI", "power", {"base": 2.0, "exponent": 10**9}) is None  # a float overflows at once


def test_the_oracle_recovers_after_a_detour() -> None:
    env = make("bfcl")
    entry = env.entries[0]
    env.reset(Task(entry.entry_id, entry.payload()), 0)
    before = env.shortest_solution_length()
    assert before == entry.min_actions()
    assert env.step("pwd()").valid and env.shortest_solution_length() == before  # read-only: same distance
    env.step("mkdir(dir_name='stray')")  # changes the state: no ground-truth suffix repairs it
    assert env.shortest_solution_length() is None and env.success_probability(24) == 0.0
    env.reset(Task(entry.entry_id, entry.payload()), 0)
    first = entry.ground_truth[0][0]
    assert env.optimal_actions(24) == [first] and env.action_values(24) == {first: 0.95 ** (before - 1)}


def test_snapshot_restore_and_state_keys() -> None:
    env = make("bfcl")
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    start = env.state_key()
    snap = env.snapshot()
    env.step(env.optimal_actions(24)[0])
    moved = env.state_key()
    assert moved != start
    env.restore(snap)
    assert env.state_key() == start
    env.step(env.optimal_actions(24)[0])
    assert env.state_key() == moved


def test_contract_checker_passes_and_train_is_refused() -> None:
    assert not check_env("bfcl", n_tasks=5).problems
    with pytest.raises(ValueError, match="every entry is in the test split"):
        make("bfcl").tasks("train", 1)


def test_bad_config_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="multi_turn_base"):
        make("bfcl", category="multi_turn_everything")
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps({"id": "x_0", "question": [[{"role": "user", "content": "hi"}]], "involved_classes": ["Nope"]}) + "\n")
    with pytest.raises(DatasetError, match=r"q.json: entry 0 \(id 'x_0'\): field 'involved_classes'"):
        load_entries(bad)
    ok = tmp_path / "ok.json"
    record = {"id": "mine_0", "question": [[{"role": "user", "content": "Where am I?"}]],
              "involved_classes": ["GorillaFileSystem"], "initial_config": {}, "ground_truth": [["pwd()"]]}  # fmt: skip
    ok.write_text(json.dumps(record) + "\n")
    env = make("bfcl", questions_file=str(ok))
    env.reset(env.tasks("test", 1)[0], 0)
    assert env.step("pwd(); finish_turn()").success


def test_missing_extra_is_one_clear_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = backend.importlib.import_module

    def no_bfcl(name: str, *args: Any) -> Any:
        if name.startswith("bfcl_eval"):
            raise ImportError("No module named 'bfcl_eval'")
        return real(name, *args)

    monkeypatch.setattr(backend.importlib, "import_module", no_bfcl)
    with pytest.raises(ConfigError, match=r"pip install --no-deps bfcl-eval==2026\.3\.23 mpmath"):
        make("bfcl").tasks("test", 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200) | st.sampled_from(["ls(a=True)", "cd('..')", "rm(file_name=[1])", "mv(source=None)"]))
def test_parse_and_step_never_raise(text: str) -> None:
    env = make("bfcl")
    env.reset(env.tasks("test", 1)[0], 0)
    for action in (text, f"<action>{text}</action>", f"ls(); {text}"):
        assert isinstance(env.step(action), StepResult)


def test_the_file_system_is_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = make("bfcl")
    env.reset(env.tasks("test", 1)[0], 0)
    env.step("echo(content='x', file_name='real.txt')")
    env.step("rm(file_name='final_report.pdf')")
    assert os.listdir(tmp_path) == []


def test_long_context_results_reach_the_model_whole() -> None:
    """BFCL shows every call result whole; multi_turn_long_context is made of long ones."""
    env = make("bfcl", category="multi_turn_long_context")
    longest = 0
    for entry in env.entries[:40]:
        env.reset(Task(entry.entry_id, entry.payload()), 0)
        for call in entry.ground_truth[0]:
            observation = env.step(call).observation
            result = observation.split(" -> ", 1)[1]
            longest = max(longest, len(result))
            assert "...(cut)" not in observation
    assert longest > 2000, longest  # the category's outputs run to thousands of characters
    assert env.summary_notes([]) == []
    cut = make("bfcl", category="multi_turn_long_context", result_chars=800)
    entry = next(e for e in cut.entries if e.entry_id == env.entries[0].entry_id)
    cut.reset(Task(entry.entry_id, entry.payload()), 0)
    assert cut.summary_notes([]) == ["- BFCL call results were cut at 800 characters (`result_chars`); BFCL shows them whole."]
