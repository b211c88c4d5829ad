"""Trajectory records: every line is valid UTF-8 whatever the model sent, and reads back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from arlkit.config import EnvSpec
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.policies import Reply, Request, register_policy
from arlkit.rollout import JsonlWriter, Trajectory, TurnRecord, read_trajectories
from arlkit.rollout import valid_utf8

LONE = "\ud800"  # what json.loads('"\\ud800"') returns: a lone high surrogate


def _trajectory(reply: str, action: str | None, observation: str, sample: int = 0) -> Trajectory:
    turn = TurnRecord(reply=reply, action=action, valid=False, reward=0.0, observation=observation)
    return Trajectory("frozenlake", "p", "fl-1", sample, 5, "announced", 1, 2, "start", [turn], ended_by="budget")


@pytest.mark.parametrize(
    "text,expected,replaced",
    [
        ("plain", "plain", 0),
        ("caf\u00e9 \u2603", "caf\u00e9 \u2603", 0),
        (f"a{LONE}b", "a\ufffdb", 1),
        ("\udc00\udfff", "\ufffd\ufffd", 2),  # two lone low surrogates
        ("\ud83d\ude00", "\U0001f600", 0),  # a high/low pair is the character it encodes
        (f"\ufffd{LONE}", "\ufffd\ufffd", 1),  # a U+FFFD already there does not count
    ],
)
def test_valid_utf8_replaces_and_counts_only_what_utf8_cannot_encode(text: str, expected: str, replaced: int) -> None:
    assert valid_utf8(text) == (expected, replaced)
    expected.encode("utf-8")  # never raises


def test_lone_surrogates_in_reply_action_and_observation_are_replaced_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    bad = _trajectory(f"<action>Left{LONE}</action>", f"Left{LONE}", f"Invalid action 'Left\udfff{LONE}'")
    bad.error = f"server said {LONE}"
    clean = _trajectory("<action>Left</action>", "Left", "ok", sample=1)
    with JsonlWriter(path) as writer:
        writer.write(bad)
        writer.write(clean)
        assert writer.replaced == 5 and writer.written == 2
    raw = path.read_bytes()
    raw.decode("utf-8")  # strictly valid UTF-8
    first, second = read_trajectories(path)
    assert first.turns[0].reply == "<action>Left\ufffd</action>"
    assert first.turns[0].action == "Left\ufffd"
    assert first.turns[0].observation == "Invalid action 'Left\ufffd\ufffd'"
    assert first.error == "server said \ufffd"
    assert first.replaced_code_points == 5 and second.replaced_code_points == 0
    assert second == clean
    assert bad.turns[0].reply.endswith(f"{LONE}</action>")  # the caller's object is left as it was
    # appending to the repaired file and reading again works
    with JsonlWriter(path) as writer:
        writer.write(replace(first, sample=2))
    assert [t.replaced_code_points for t in read_trajectories(path)] == [5, 0, 5]


def test_a_file_with_invalid_bytes_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    line = json.dumps(_trajectory("r", "a", "o").to_json()).encode().replace(b'"o"', b'"o\xff"')
    path.write_bytes(line + b"\n")
    assert read_trajectories(path)[0].turns[0].observation == "o\ufffd"
    path.write_bytes(b"[1, 2]\n")
    with pytest.raises(ValueError, match="not a trajectory record"):
        read_trajectories(path)


@pytest.mark.parametrize("mode", ["announced", "hidden"])
def test_the_announced_remaining_budget_survives_a_jsonl_round_trip(tmp_path: Path, mode: str) -> None:
    from arlkit.envs import make
    from arlkit.policies import make_policy
    from arlkit.rollout import PromptConfig, make_jobs, run_rollouts

    tasks = make("frozenlake", size=4, t_max=6).tasks("test", 3)
    trajs = run_rollouts(lambda: make("frozenlake", size=4, t_max=6), make_jobs(tasks, 2, 6, 0),
                         make_policy("random"), PromptConfig(mode), keep_prompts=True)  # type: ignore[arg-type]
    path = tmp_path / "t.jsonl"
    with JsonlWriter(path) as writer:
        for t in trajs:
            writer.write(t)
    line = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert [turn["remaining"] for turn in line["turns"]] == (
        [6 - k for k in range(len(line["turns"]))] if mode == "announced" else [None] * len(line["turns"]))
    assert all("prompt" not in turn for turn in line["turns"])  # the messages stay in memory
    back = read_trajectories(path)
    assert back == trajs
    assert [[turn.remaining for turn in t.turns] for t in back] == [[turn.remaining for turn in t.turns] for t in trajs]


@dataclass
class SurrogatePolicy:
    """Replies with lone surrogates inside and outside the action tag (as a server's JSON
    ``"\\ud800"`` decodes); the second turn's action is a valid move."""

    name: str = "surrogates"
    context_length: None = None

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        replies = [f"<think>{LONE}</think><action>Le{LONE}ft</action>", f"{LONE}<action>Down</action>\udc80"]
        return [Reply(replies[r.turn % 2]) for r in requests]


@register_policy("test-surrogates")
def _make_surrogates(arg: object, sampling: object, backend: object) -> SurrogatePolicy:
    return SurrogatePolicy()


def test_an_evaluation_with_surrogate_replies_finishes_and_resumes(tmp_path: Path) -> None:
    config = EvalConfig(env=EnvSpec("frozenlake", {"size": 4, "t_max": 6}), policies=("test-surrogates",), tasks=2,
                        samples=2, budgets=("100%",), bootstrap=100)
    result = run_eval(config, tmp_path / "run")
    assert len(result.trajectories) == 4 and not result.failed
    lines = (tmp_path / "run" / "trajectories.jsonl").read_bytes().decode("utf-8").splitlines()
    assert len(lines) == 4
    for traj, line in zip(result.trajectories, lines, strict=True):
        turns = traj.turns
        assert turns[0].reply == "<think>\ufffd</think><action>Le\ufffdft</action>"
        assert turns[0].action == "Le\ufffdft" and not turns[0].valid
        assert turns[1].action == "Down"
        # the engine replaced the replies' lone surrogates (2 a turn) before the environment saw them
        assert traj.replaced_code_points == 2 * len(turns)
        assert "\ufffd" in line and "\\ud800" not in line
    summary = (tmp_path / "run" / "summary.md").read_text(encoding="utf-8")
    assert "code points that are not valid UTF-8" in summary
    again = run_eval(config, tmp_path / "run")
    assert again.resumed == 4 and again.rows == result.rows
