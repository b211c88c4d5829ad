"""Action flows, the Sankey layout and loop metrics on hand-built trajectories."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

import pytest

from arlkit.analysis.flows import INVALID_LABEL, action_flows, action_label, loop_stats, summarize_loops
from arlkit.analysis.sankey import sankey_layout, sankey_svg
from arlkit.rollout.records import Trajectory, TurnRecord


def traj(actions: Sequence[str | None], states: Sequence[str] | None = None, *, success: bool = False,
         invalid: Sequence[int] = ()) -> Trajectory:  # fmt: skip
    """A trajectory with the given actions (None: unparsable) and pre-action state keys."""
    states = states if states is not None else [f"s{i}" for i in range(len(actions))]
    turns = [
        TurnRecord(reply=f"<action>{a}</action>", action=a, valid=a is not None and i not in invalid, reward=0.0,
                   observation="", state=s)
        for i, (a, s) in enumerate(zip(actions, states, strict=True))
    ]  # fmt: skip
    return Trajectory("frozenlake", "p", "task", 0, len(actions), "announced", 0, 0, "", turns, success=success)


def test_repeat_run_and_wall_bumps() -> None:
    # Left x3 into a wall (the state does not change), then Right: a repeat run of 3 turns; the
    # state s0 is revisited at turns 1 and 2, so turns 0 and 1 are in revisit cycles.
    stats = loop_stats(traj(["Left", "Left", "Left", "Right"], ["s0", "s0", "s0", "s1"]))
    assert (stats.repeat, stats.oscillation, stats.revisit, stats.loop_turns) == (True, False, True, 3)
    assert not loop_stats(traj(["Left", "Left", "Right"])).repeat  # 2 < k = 3
    assert loop_stats(traj(["Left", "Left", "Right"]), repeat_k=2).repeat


def test_oscillations() -> None:
    stats = loop_stats(traj(["A", "B", "A", "B", "A", "C"]))
    assert (stats.repeat, stats.oscillation, stats.revisit, stats.loop_turns) == (False, True, False, 5)
    assert not loop_stats(traj(["A", "B", "A"])).oscillation  # 3 < 4 turns
    two = loop_stats(traj(["A", "B", "A", "B", "C", "D", "C", "D"]))
    assert two.oscillation and two.loop_turns == 8
    assert not loop_stats(traj(["A", "A", "B", "B"])).oscillation


def test_state_revisits_count_the_cycle() -> None:
    # a b c a d: back in 'a' at turn 3, so the cycle is turns 0..2
    stats = loop_stats(traj(["x", "y", "z", "w", "v"], ["a", "b", "c", "a", "d"]))
    assert (stats.revisit, stats.loop_turns, stats.turns) == (True, 3, 5)
    assert not loop_stats(traj(["x", "y"], ["a", "b"])).any_loop


def test_invalid_replies_repeat_as_one_action() -> None:
    # unparsable replies and rejected actions share one key: three in a row are a repeat run
    assert loop_stats(traj([None, "Jump", None], invalid=[1])).repeat
    assert not loop_stats(traj([None, "Left", None])).repeat


def test_summary_shares() -> None:
    s = summarize_loops("g", [loop_stats(traj(["A", "A", "A"])), loop_stats(traj(["A", "B"]))])
    assert (s.n, s.repeat, s.oscillation, s.any_loop) == (2, 0.5, 0.0, 0.5)
    assert s.loop_turn_share == pytest.approx(3 / 5) and s.loop_turns_mean == pytest.approx(1.5)


def test_labels() -> None:
    def turn(action: str | None, valid: bool = True) -> TurnRecord:
        return TurnRecord("", action, valid, 0.0, "")

    assert action_label(turn("Left")) == "left"
    assert action_label(turn("SELECT name FROM t")) == "select"
    assert action_label(turn("ls(path='/tmp')")) == "ls"
    assert action_label(turn("  math.sqrt(4)")) == "math.sqrt"
    assert action_label(turn(None)) == INVALID_LABEL == action_label(turn("Left", valid=False))


def test_flows_and_sankey_geometry() -> None:
    trajs = [traj(["up", "up", "left"], success=True), traj(["up", "left"]), traj(["left", "left", "left", "up"])]
    flows = action_flows(trajs, max_steps=3)
    assert flows.steps == 3 and flows.trajectories == {"success": 1, "failure": 2}
    assert flows.nodes[(1, "up", "success")] == 1 and flows.nodes[(1, "up", "failure")] == 1
    assert flows.nodes[(3, "left", "failure")] == 1 and (4, "up", "failure") not in flows.nodes  # max_steps
    assert flows.links[(1, "up", "left", "failure")] == 1 and flows.links[(2, "left", "left", "failure")] == 1
    layout = sankey_layout(flows)
    scale = layout.nodes[0].height / layout.nodes[0].count
    for node in layout.nodes:
        incoming = sum(link.width for link in layout.links if link.step + 1 == node.step and link.target == node.label)
        outgoing = sum(link.width for link in layout.links if link.step == node.step and link.source == node.label)
        assert node.height == pytest.approx(node.count * scale)
        assert outgoing <= node.height + 1e-9
        if node.step > 1:
            assert incoming == pytest.approx(node.height)  # every trajectory at step t came from step t-1
    svg = sankey_svg(layout, title="a <b> & c")
    root = ET.fromstring(svg)  # well-formed XML
    assert root.tag.endswith("svg") and len(root.findall("{http://www.w3.org/2000/svg}path")) == len(layout.links)
    only_success = sankey_layout(flows, outcomes=("success",))
    assert sum(n.count for n in only_success.nodes if n.step == 1) == 1
