"""The ``tools`` environment: user turns, the three checks, invalid actions, oracle, snapshots."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arlkit.config import ConfigError
from arlkit.envs import Oracle, make
from arlkit.envs.checker import JUNK_REPLIES, check_env
from arlkit.envs.protocol import Env, StepResult, Task
from arlkit.envs.tools import ToolEntry, ToolsEnv, public_state

FS = {
    "root": {
        "ann": {
            "type": "directory",
            "contents": {
                "a.txt": {"type": "file", "content": "alpha\nbeta"},
                "docs": {"type": "directory", "contents": {}},
            },
        }
    }
}
ENTRY = ToolEntry(
    "hand-made",
    (
        "Move a.txt into docs.",  # 1 call
        "What's the weather tomorrow?",  # irrelevant: no call
        "Go into docs and show me the content of a.txt.",  # 2 calls, the second must be seen
        "What is 2 to the power of 10?",
    ),
    ("FileSystem", "Calculator"),
    {"FileSystem": FS},
    (
        ("mv(source='a.txt', destination='docs')",),
        (),
        ("cd(folder='docs')", "cat(file_name='a.txt')"),
        ("power(base=2, exponent=10)",),
    ),
)
TASK = Task(ENTRY.task_id, ENTRY.payload())


@pytest.fixture()
def env() -> ToolsEnv:
    e = make("tools")
    assert isinstance(e, ToolsEnv)
    return e


def test_registered_and_protocols(env: ToolsEnv) -> None:
    assert isinstance(env, Env) and isinstance(env, Oracle)
    assert env.name == "tools" and env.t_max == 24


def test_a_full_episode_by_hand(env: ToolsEnv) -> None:
    assert env.reset(TASK, 0) == "User request 1 of 4: Move a.txt into docs."
    assert "mv(source: str, destination: str)" in env.prompt_text().instruction and "power(base: float" in env.prompt_text().instruction
    r = env.step("mv(source='a.txt', destination='docs'); finish_turn()")
    assert r.valid and not r.done
    assert (
        r.observation.splitlines()[0]
        == """mv(source='a.txt', destination='docs') -> {"result": "moved 'a.txt' to 'docs/a.txt'"}"""
    )
    assert r.observation.endswith("Request 1 is complete.\nUser request 2 of 4: What's the weather tomorrow?")
    r = env.step("finish_turn()")
    assert r.valid and "User request 3 of 4" in r.observation
    r = env.step("cd(folder='docs')")
    assert r.valid and not r.done and r.reward == 0.0
    r = env.step("cat(file_name='a.txt')\nfinish_turn()")
    assert "Request 3 is complete." in r.observation
    r = env.step("power(2, 10)\nfinish_turn()")
    assert (r.valid, r.done, r.success, r.reward) == (True, True, True, 1.0)
    assert r.observation.endswith("All 4 requests are complete.")
    assert not env.step("ls()").valid


def test_state_check_fails_on_a_wrong_state(env: ToolsEnv) -> None:
    env.reset(TASK, 0)
    r = env.step("cp(source='a.txt', destination='docs'); finish_turn()")  # copy instead of move
    assert r.done and not r.success and r.reward == 0.0
    assert "state differs from the expected one in FileSystem.root" in r.observation


def test_response_check_needs_the_ground_truth_results(env: ToolsEnv) -> None:
    env.reset(TASK, 0)
    env.step("mv(source='a.txt', destination='docs'); finish_turn()")
    env.step("finish_turn()")
    env.step("cd(folder='docs')")
    r = env.step("finish_turn()")  # the state matches, but the file was never shown
    assert r.done and not r.success and "results the request needed were not all obtained" in r.observation


def test_extra_read_only_calls_are_allowed(env: ToolsEnv) -> None:
    env.reset(TASK, 0)
    env.step("ls()")
    env.step("pwd()")
    r = env.step("mv(source='a.txt', destination='docs'); finish_turn()")
    assert r.valid and not r.done and "Request 1 is complete" in r.observation


def test_irrelevance_check(env: ToolsEnv) -> None:
    env.reset(TASK, 0)
    env.step("mv(source='a.txt', destination='docs'); finish_turn()")
    env.step("ls()")  # a call on a request that needed none
    r = env.step("finish_turn()")
    assert r.done and not r.success and "needed no function call, but 1 were made" in r.observation


INVALID = [
    ("__import__('os').system('touch /tmp/arlkit_tools_pwned')", "attribute chains are not allowed"),
    ("os.system('rm -rf ~')", "attribute chains are not allowed"),
    ("mv(source=__import__('os').getcwd(), destination='x')", "found a nested call"),
    ("mv(source='a.txt', destination=(lambda: 'docs')())", "found a nested call"),
    ("mean(numbers=[x for x in range(3)])", "found a comprehension"),
    ("mv(*['a.txt', 'docs'])", "starred (*) arguments are not allowed"),
    ("mv(**{'source': 'a.txt', 'destination': 'docs'})", "'**' arguments are not allowed"),
    ("mv(source=src, destination='docs')", "found a variable name"),
    ("eval(\"__import__('os')\")", "unknown function 'eval'"),
    ("exec('x=1')", "unknown function 'exec'"),
    ("rm_rf(path='/')", "unknown function 'rm_rf'"),
    ("mv(source=1, destination='docs')", "expected a string, got 1"),
    ("power(base='2', exponent=10)", "expected a number, got '2'"),
    ("ls(a='yes')", "expected True or False"),
    ("mv(source='a.txt')", "missing the required argument 'destination'"),
    ("ls()\nls()", "2 calls in one action; at most 1 call per action"),
    ("finish_turn(); ls()", "finish_turn() must be the last call"),
    ("finish_turn(now=True)", "finish_turn() takes no arguments"),
    ("mv(source='a.txt', destination='docs') and rm(file_name='a.txt')", "found a boolean expression"),
    ("I moved the file for you!", "not valid call syntax"),
]


@pytest.mark.parametrize(("action", "message"), INVALID)
def test_invalid_actions_have_no_side_effect(env: ToolsEnv, action: str, message: str) -> None:
    env.reset(TASK, 0)
    env.step("ls()")
    key, state = env.state_key(), copy.deepcopy({k: public_state(v) for k, v in env.instances.items()})
    r = env.step(action)
    assert (r.valid, r.done, r.reward) == (False, False, 0.0)
    assert r.observation.startswith("Invalid action: ") and message in r.observation
    assert r.observation.endswith("Nothing was executed.")
    assert env.state_key() == key and {k: public_state(v) for k, v in env.instances.items()} == state
    assert not os.path.exists("/tmp/arlkit_tools_pwned")


def test_failing_tool_calls_are_valid_and_recoverable(env: ToolsEnv) -> None:
    env.reset(TASK, 0)
    r = env.step("mv(source='b.txt', destination='docs')")
    assert r.valid and '"error": "mv: no such file or directory' in r.observation
    r = env.step("mv(source='a.txt', destination='docs'); finish_turn()")
    assert r.valid and "Request 1 is complete" in r.observation


def test_several_calls_per_action_when_configured() -> None:
    env = make("tools", max_calls_per_action=3)
    env.reset(TASK, 0)
    r = env.step("[cd(folder='docs'), ls(), pwd()]")
    assert r.valid and len(r.observation.splitlines()) == 3
    assert "up to 3 calls per action" in env.prompt_text().instruction


def test_oracle_plan_and_values(env: ToolsEnv) -> None:
    env.reset(TASK, 0)
    # Actions: 1 (mv + finish) + 1 (finish) + 2 (cd, cat + finish) + 1 (power + finish) = 5 >= 4 calls.
    assert env.shortest_solution_length() == 5 == ENTRY.min_turns() and ENTRY.n_calls == 4
    assert env.optimal_actions(5) == ["mv(source='a.txt', destination='docs')\nfinish_turn()"]
    assert env.action_values(5) == {"mv(source='a.txt', destination='docs')\nfinish_turn()": pytest.approx(0.95**4)}
    assert env.success_probability(5) == 1.0 and env.success_probability(4) == 0.0
    env.step("ls()")  # off the ground-truth path, but harmless: the plan continues
    assert env.shortest_solution_length() == 5
    env.step("rm(file_name='a.txt')")  # irreparable
    assert env.shortest_solution_length() is None and env.success_probability(24) == 0.0


def test_oracle_finds_the_remaining_suffix_after_a_detour() -> None:
    env = make("tools")
    env.reset(TASK, 0)
    for action in (
        "mv(source='a.txt', destination='docs'); finish_turn()",
        "finish_turn()",
        "cd(folder='docs')",
        "ls()",
    ):
        env.step(action)
    assert env.shortest_solution_length() == 2  # cat + finish, then power + finish
    assert env.optimal_actions(24)[0] == "cat(file_name='a.txt')\nfinish_turn()"


def test_expert_policy_solves_every_shipped_entry_within_t_max(env: ToolsEnv) -> None:
    for split in ("test", "train"):
        tasks = env.tasks(split, len(env.split_entries(split)))
        for task in tasks:
            env.reset(task, 0)
            entry = ToolEntry.from_payload(task.payload)
            shortest = env.shortest_solution_length()
            assert shortest == entry.min_turns() <= env.t_max and entry.n_calls <= shortest
            for turn in range(env.t_max):
                result = env.step(env.optimal_actions(env.t_max - turn)[0])
                if result.done:
                    break
            assert result.success and turn + 1 == shortest, task.task_id


def test_snapshot_restore_round_trip(env: ToolsEnv) -> None:
    env.reset(TASK, 0)
    env.step("mv(source='a.txt', destination='docs'); finish_turn()")
    snap, key = env.snapshot(), env.state_key()
    first = [env.step(a) for a in ("finish_turn()", "cd(folder='docs')", "ls()")]
    env.restore(snap)
    assert env.state_key() == key
    assert [env.step(a) for a in ("finish_turn()", "cd(folder='docs')", "ls()")] == first
    env.restore(snap)  # a snapshot can be restored more than once
    assert env.state_key() == key and env.turn == 1
    other = make("tools")
    other.restore(snap)
    assert other.state_key() == key


def test_state_key_distinguishes_states(env: ToolsEnv) -> None:
    env.reset(TASK, 0)
    k0 = env.state_key()
    env.step("ls()")  # a read-only call: same instances, but a result on record
    k1 = env.state_key()
    env.step("cd(folder='docs')")
    assert len({k0, k1, env.state_key()}) == 3


def test_task_counts_and_bad_config() -> None:
    env = make("tools")
    assert len(env.entries) >= 100 and len(env.split_entries("test")) >= 25
    with pytest.raises(ValueError, match="only"):
        env.tasks("test", 10_000)
    for override in ({"max_calls_per_action": 0}, {"t_max": 0}, {"answers_file": "x.json"}, {"unknown": 1}):
        with pytest.raises(ConfigError):
            make("tools", **override)


def test_contract_checker_passes() -> None:
    assert not check_env("tools", n_tasks=5).problems


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200) | st.sampled_from(JUNK_REPLIES) | st.sampled_from([a for a, _ in INVALID]))
def test_parse_and_step_never_raise(env: ToolsEnv, text: str) -> None:
    env.reset(TASK, 0)
    parsed = env.parse_action(text)
    assert parsed.action is None or isinstance(parsed.action, str)
    for action in (text, f"<action>{text}</action>", f"ls(); {text}"):
        assert isinstance(env.step(action), StepResult)


def test_cwd_of_the_test_process_is_untouched(tmp_path: Path) -> None:
    # The file system is in memory: tool calls never touch the real disk.
    before = sorted(os.listdir(tmp_path))
    env = make("tools")
    env.reset(TASK, 0)
    env.step("echo(content='x', file_name='real.txt')")
    assert sorted(os.listdir(tmp_path)) == before and not Path("real.txt").exists()
