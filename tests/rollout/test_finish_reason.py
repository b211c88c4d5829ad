"""Turn records keep why a reply ended (``finish_reason``): a reply the token cap cut is told apart
from a malformed one in the records, ``summary.md``, the flows and the matched-state notes."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import torch

from arlkit.analysis.flows import CUT_OFF_LABEL, INVALID_LABEL, action_label
from arlkit.analysis.sampling import ActionSample, unusable_note
from arlkit.config import EnvSpec
from arlkit.metrics.finish import finish_by_policy
from arlkit.policies import Reply, Request, SamplingConfig, register_policy
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.rollout import Trajectory, TurnRecord, read_trajectories

ENV = EnvSpec("frozenlake", {"size": 4, "t_max": 8})

_SCRIPT = (  # (reply, finish_reason) by turn: cut off, malformed, refused by the environment, valid
    ("<think>the hole is left, so I", "length"),
    ("I would rather not", "stop"),
    ("<action>Jump</action>", "stop"),
    ("<action>Right</action>", "stop"),
)


class _Scripted:
    """A policy whose replies say how they ended, turn by turn (:data:`_SCRIPT`)."""

    name = "test-finish"

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        script = [_SCRIPT[r.turn % len(_SCRIPT)] for r in requests]
        return [Reply(text, finish_reason=finish) for text, finish in script]


@register_policy("test-finish")
def _make_scripted(arg: object, sampling: object, backend: object) -> _Scripted:
    return _Scripted()


def _turn(**kwargs: object) -> TurnRecord:
    values: dict[str, object] = {"reply": "<think>", "action": None, "valid": False, "reward": 0.0, "observation": "o"}
    return TurnRecord(**(values | kwargs))  # type: ignore[arg-type]


def test_finish_reason_is_written_only_when_set_and_reads_back() -> None:
    cut = _turn(finish_reason="length", usage={"prompt_tokens": 9, "completion_tokens": 2})
    plain = _turn()
    assert cut.to_json()["finish_reason"] == "length" and "finish_reason" not in plain.to_json()
    trajectory = Trajectory("frozenlake", "p", "fl-1", 0, 4, "announced", 1, 2, "start", [cut, plain], ended_by="budget")
    back = Trajectory.from_json(json.loads(json.dumps(trajectory.to_json())))
    assert back == trajectory and back.turns[0].finish_reason == "length" and back.turns[1].finish_reason is None


def test_a_scripted_run_writes_no_finish_reason(tmp_path: Path) -> None:
    config = EvalConfig(env=ENV, policies=("oracle", "random"), tasks=3, samples=2, budgets=("50%",), bootstrap=100)
    run_eval(config, tmp_path / "run")
    lines = (tmp_path / "run" / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines and all("finish_reason" not in turn for line in lines for turn in json.loads(line)["turns"])
    assert "cut at the token cap" not in (tmp_path / "run" / "summary.md").read_text(encoding="utf-8")


def test_summary_counts_cut_off_malformed_and_refused_turns_apart(tmp_path: Path) -> None:
    config = EvalConfig(env=ENV, policies=("test-finish", "random"), tasks=2, samples=2, budgets=("4",), bootstrap=100)
    result = run_eval(config, tmp_path / "run")
    mine = [t for t in result.trajectories if t.policy == "test-finish"]
    assert len(mine) == 4 and all(len(t.turns) == 4 for t in mine)
    assert [turn.finish_reason for turn in mine[0].turns] == ["length", "stop", "stop", "stop"]
    assert [turn.valid for turn in mine[0].turns] == [False, False, False, True]
    counts = finish_by_policy(result.trajectories)
    assert (counts["test-finish"].cut_off, counts["test-finish"].invalid) == (4, 12)
    assert (counts["test-finish"].invalid_cut_off, counts["test-finish"].malformed, counts["test-finish"].refused) == (4, 4, 4)
    summary = (tmp_path / "run" / "summary.md").read_text(encoding="utf-8")
    assert "`test-finish`: 25.0% of 16 turns cut off; invalid 12 = 4 cut off + 4 malformed + 4 refused" in summary
    assert "`random`: not reported" in summary


def test_flows_and_matched_state_notes_say_cut_off_not_invalid() -> None:
    assert action_label(_turn(finish_reason="length")) == CUT_OFF_LABEL
    assert action_label(_turn(finish_reason="stop")) == INVALID_LABEL == action_label(_turn())
    samples = [[ActionSample("<think>", None, 0.0, cut_off=True), ActionSample("junk", None, 0.0),
                ActionSample("<action>Up</action>", "Up", 1.0), ActionSample("", None, math.nan, "timeout")]]
    assert unusable_note("base", samples) == ("base: 2 of 3 replies without a usable action: 1 cut off at the token "
                                              "cap (max_new_tokens), 1 malformed")
    assert unusable_note("rl", [[ActionSample("junk", None, 0.0)]]) is None


@pytest.fixture
def one_thread() -> Iterator[None]:
    saved = torch.get_num_threads()  # the nano model on a shared CPU: one thread avoids OpenMP stalls
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def test_an_hf_reply_cut_by_max_new_tokens_is_recorded_and_counted_as_cut_off(
    tiny_model_dir: Path, tmp_path: Path, one_thread: None
) -> None:
    spec = f"hf:{tiny_model_dir}"
    config = EvalConfig(env=ENV, policies=(spec,), tasks=2, samples=2, budgets=("3",), bootstrap=100,
                        sampling=SamplingConfig(temperature=1.0, max_new_tokens=3))
    run_eval(config, tmp_path / "run")
    records = read_trajectories(tmp_path / "run" / "trajectories.jsonl")
    turns = [turn for t in records for turn in t.turns]
    assert turns and {turn.finish_reason for turn in turns} <= {"stop", "length"}
    cut = [turn for turn in turns if turn.finish_reason == "length"]
    assert cut, "three tokens of the untrained nano model end no reply"
    for turn in turns:  # the backend's own token counts go with the turn
        assert turn.usage is not None and turn.usage["prompt_tokens"] > 0
        assert turn.usage["completion_tokens"] == 3 if turn.finish_reason == "length" else 1 <= turn.usage["completion_tokens"] <= 3
    invalid_cut = sum(1 for turn in cut if not turn.valid)
    assert invalid_cut == len(cut)  # three tokens hold no <action>...</action>
    summary = (tmp_path / "run" / "summary.md").read_text(encoding="utf-8")
    share = len(cut) / len(turns)
    invalid = sum(1 for turn in turns if not turn.valid)
    assert f"`{spec}`: {share:.1%} of {len(turns)} turns cut off; invalid {invalid} = {invalid_cut} cut off + " in summary
