"""``arlkit analyze ...`` end to end on small runs, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arlkit.cli import main

BASE, RL = "noisy-oracle:0.6", "noisy-oracle:0.2"  # the two policies of the fl_run fixture


def _ok(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_every_analysis_writes_csv_png_markdown_and_json(fl_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "an"
    pair = ["--base", BASE, "--rl", RL, "--runs", str(fl_run), "--out", str(out), "--bootstrap", "200"]
    text = _ok(["analyze", "steps", *pair, "--states", "30", "--actions", "4"], capsys)
    assert "states where RL is better" in text
    _ok(["analyze", "depth", "--steps", str(out), "--out", str(out), "--bins", "4"], capsys)
    _ok(["analyze", "errors", *pair, "--states", "10", "--actions", "4", "--continuations", "1"], capsys)
    _ok(["analyze", "flows", "--runs", str(fl_run), "--out", str(out)], capsys)
    _ok(["analyze", "judge", "--judge", "random", "--runs", str(fl_run), "--out", str(out), "--states", "4",
         "--bootstrap", "200"], capsys)
    for kind in ("steps", "depth", "errors", "flows", "judge"):
        assert (out / f"{kind}.md").read_text().startswith("# ")
        assert json.loads((out / f"{kind}.json").read_text())["arlkit_analysis"] == kind
        assert (out / f"{kind}.png").read_bytes()[:4] == b"\x89PNG"
    for name in ("steps.csv", "depth.csv", "errors.csv", "flows_nodes.csv", "flows_links.csv", "loops.csv", "judge.csv"):
        assert len((out / name).read_text().splitlines()) >= 2
    judge = json.loads((out / "judge.json").read_text())
    assert judge["failures"] == judge["actions"] > 0  # a policy that is no judge: every reply a recorded failure
    assert "<svg" in (out / "flows.html").read_text()


def test_refusals(fl_run: Path, sokoban_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], run_factory) -> None:  # type: ignore[no-untyped-def]
    out = str(tmp_path / "x")
    err = _refused(["analyze", "steps", "--base", BASE, "--rl", RL, "--runs", str(fl_run), str(sokoban_run), "--out", out], capsys)
    assert "mix environments" in err
    shorter = run_factory(tmp_path / "short", "frozenlake", {"t_max": 20}, (RL,), tasks=3, samples=1, budgets=("50%",))
    err = _refused(["analyze", "errors", "--base", BASE, "--rl", RL, "--runs", str(fl_run), str(shorter), "--out", out,
                    "--base-label", BASE], capsys)
    assert "incompatible budgets" in err
    err = _refused(["analyze", "steps", "--base", "oracle", "--rl", "random", "--runs", str(fl_run), "--out", out], capsys)
    assert "--base-label" in err
    err = _refused(["analyze", "likelihood", "--base", "oracle", "--rl", "oracle", "--runs", str(fl_run), "--out", out,
                    "--base-label", BASE, "--rl-label", RL], capsys)
    assert "cannot score" in err
    assert "--steps DIR" in _refused(["analyze", "depth", "--out", out], capsys)
    assert "states" in _refused(["analyze", "steps", "--base", BASE, "--rl", RL, "--runs", str(fl_run), "--out", out,
                                 "--states", "1"], capsys)
