"""Fuzzed model replies never crash: hypothesis-generated text (any code point, lone surrogates
included; control bytes; huge and nested tags) through every registered environment's
``parse_action`` / ``step`` and through the trajectory writer, which must read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from arlkit.envs import list_envs, make
from arlkit.envs.protocol import ParsedAction, StepResult
from arlkit.rollout import JsonlWriter, Trajectory, TurnRecord, read_trajectories, valid_utf8

TAGS = ("<action>", "</action>", "<think>", "</think>", "<ACTION>", "<action >", "</action", "<")
# Fragments an environment reacts to, so that some fuzzed actions get past its first checks.
WORDS = (
    "Left", "Down", "Right", "Up", "up", "left", "submit", "SELECT * FROM student", "SELECT name FROM sqlite_master;",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT n FROM r LIMIT 5", "ls(a=True)", "cd(folder='x')",
    "finish_turn()", "```python\nprint(input())\n```", "```python\nimport os\nprint(os.listdir('/'))\n```", "f(a=1, a=2)",
    "\\ud800", "'", '"', "\\", "{", "}", ";", "(", ")", "ls -la", "cat /etc/passwd; cd / && pwd", "\\boxed{12}",
    "\\boxed{\\frac{1}{2}}", "search[shampoo]", "search[", "click[buy now]", "click[next >]", "click[back to search]",
    "click[< prev]", "click[", "look", "Go To Cabinet 1",
)
ANY_CHAR = st.characters(codec=None, exclude_categories=())  # every code point, surrogates included
CONTROL = st.sampled_from([chr(c) for c in (*range(0x20), 0x7F, 0x85, 0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF)])
PIECE = st.one_of(
    st.text(ANY_CHAR, max_size=40),
    st.sampled_from(TAGS),
    st.sampled_from(WORDS),
    CONTROL,
    st.builds(lambda tag, n: tag * n, st.sampled_from(TAGS[:4]), st.integers(1, 300)),  # nested tags
    st.builds(lambda c, n: c * n, ANY_CHAR, st.sampled_from([1_000, 50_000])),  # huge content
)
REPLY = st.lists(PIECE, max_size=12).map("".join)
TAGGED = st.tuples(REPLY, REPLY).map(lambda parts: f"{parts[0]}<action>{parts[1]}</action>")  # one action, usually
KNOWN = st.tuples(REPLY, st.sampled_from(WORDS), st.sampled_from(["", " ", "\n", "\x00", "\ud800", "()", "x" * 5000])).map(
    lambda parts: f"<think>{parts[0]}</think><action>{parts[1]}{parts[2]}</action>"
)  # an action the environment knows, or nearly
REPLIES = st.one_of(REPLY, TAGGED, KNOWN)

# Examples per environment: the code environment runs every program in the sandbox (~0.3 s); an
# alfworld reset after a valid command resets its game (~0.5 s).
EXAMPLES = {"code": 30, "sql": 80, "terminal": 30, "math-tir": 40, "alfworld": 40}


def _check_one(name: str, env: object, task: object, reply: str, tmp: Path) -> None:
    env.reset(task, 0)  # type: ignore[attr-defined]
    parsed = env.parse_action(reply)  # type: ignore[attr-defined]
    assert isinstance(parsed, ParsedAction)
    observation = "no action"
    event(f"action: {'none' if parsed.action is None else 'some'}")
    if parsed.action is not None:
        result = env.step(parsed.action)  # type: ignore[attr-defined]
        assert isinstance(result, StepResult) and isinstance(result.observation, str)
        observation = result.observation
        env.render()  # type: ignore[attr-defined]
        env.state_key()  # type: ignore[attr-defined]
    turn = TurnRecord(reply=reply, action=parsed.action, valid=parsed.action is not None, reward=0.0, observation=observation)
    trajectory = Trajectory(name, "fuzz", "t", 0, 1, "announced", 0, 0, reply, [turn], ended_by="budget")
    path = tmp / f"{name}.jsonl"
    path.unlink(missing_ok=True)
    with JsonlWriter(path) as writer:
        writer.write(trajectory)
    path.read_bytes().decode("utf-8")  # strictly valid UTF-8
    (back,) = read_trajectories(path)
    assert back.turns[0].reply == back.initial_observation == valid_utf8(reply)[0]
    assert back.turns[0].observation == valid_utf8(observation)[0]


@pytest.mark.parametrize("name", list_envs(plugins=False))  # plugins: their own tests (tests/integrations)
def test_fuzzed_replies_never_crash_an_environment_or_the_writer(name: str, tmp_path: Path) -> None:
    env = make(name)
    task = env.tasks("test", 1)[0]

    @settings(max_examples=EXAMPLES.get(name, 150), deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(reply=REPLIES)
    def check(reply: str) -> None:
        _check_one(name, env, task, reply, tmp_path)

    check()
