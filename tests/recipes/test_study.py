"""``arlkit study``: every stage of RT's study of two policies in one folder, skipped stages with their reason,
the judge where there is no oracle, resuming after kill -9, and the report in headless Chromium.

The policies are scripted (noisy oracles on FrozenLake, a SQL solver and explorer from ``study_fixtures``)
so the study runs in seconds; the tiny models' study, local and served, is in tests/train/test_study_models.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from arlkit.cli import main
from arlkit.config import EnvSpec
from arlkit.recipes.eval import EvalConfig
from arlkit.recipes.study import StudyConfig, run_study

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

BASE, RL = "noisy-oracle:0.6", "noisy-oracle:0.2"
LAKE = ["--env", "frozenlake", "--env-arg", "size=4", "--env-arg", "t_max=10"]
SMALL = ["--tasks", "8", "--samples", "4", "--budgets", "50%,100%", "--quick"]


@pytest.fixture(scope="module")
def lake_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("study") / "lake"
    assert main(["study", "--base", BASE, "--rl", RL, *LAKE, *SMALL, "--judge", "study_fixtures:frozen_judge",
                 "--out", str(out)]) == 0
    return out


def _stages(summary: str) -> dict[str, str]:
    block = summary[summary.index("## Stages"):].split("\n\n")[1]
    return dict(line[2:].split(": ", 1) for line in block.splitlines())


def test_a_study_writes_every_part_and_says_why_a_stage_is_skipped(lake_study: Path) -> None:
    summary = (lake_study / "summary.md").read_text()
    stages = _stages(summary)
    assert list(stages) == ["eval", "steps", "depth", "errors", "likelihood", "judge", "flows"]
    assert all(stages[k] == "done" for k in ("steps", "depth", "errors", "judge", "flows")), stages
    assert stages["likelihood"].startswith("skipped: Base noisy-oracle:0.6 and RL noisy-oracle:0.2 cannot score")
    skipped = json.loads((lake_study / "analysis" / "likelihood.json").read_text())
    assert "cannot score continuations" in skipped["skipped"]
    for kind in ("steps", "depth", "errors", "judge", "flows"):
        data = json.loads((lake_study / "analysis" / f"{kind}.json").read_text())
        assert "skipped" not in data, kind
    takeaways = summary[summary.index("## Takeaways"):summary.index("## Pass@(K,T)")]
    # RT's takeaways for this pair: Pass@1 and Pass@K at the largest budget, the budget trend, the optimum
    assert "**Pass@1 at T = 10**" in takeaways and "**Pass@4 at T = 10**" in takeaways
    assert "**Turn budget**: RL - Base at Pass@1 is" in takeaways and "**Expected optimum at T = 10**" in takeaways
    assert "Step quality at matched states (" in takeaways and "mean oracle quality Q*" in takeaways
    assert "Continuation from " in takeaways and "Quality by depth, RL - Base" in takeaways
    assert "LLM judge study_fixtures:frozen_judge vs the oracle over " in takeaways
    assert "Likelihood: not available (Base noisy-oracle:0.6" in takeaways and "Action loops" in takeaways
    # the noisier policy is the base: at T_max the RL one solves more, and the reading says so only with its CI
    with open(lake_study / "eval" / "passkt.csv") as handle:
        header, *rows = [line.strip().split(",") for line in handle]
    cell = {(r[header.index("policy")], r[header.index("T")], r[header.index("k")]): float(r[header.index("pass")])
            for r in rows}
    table = summary[summary.index("## Pass@(K,T)"):summary.index("## Stages")]
    assert f"| 10 | 1 | {100 * cell[(BASE, '10', '1')]:.1f} [" in table
    assert f"| {100 * cell[(RL, '10', '1')]:.1f} [" in table
    assert table.count("points |") == 2 * 3  # every (T, k) cell with its paired difference
    html = (lake_study / "report.html").read_text()
    assert "<section id=\"findings\">" in html and "Turn budget" in html
    for section in ("steps", "errors", "depth", "judge"):
        assert f'<section id="{section}">' in html, section


def test_the_study_report_renders_in_headless_chromium(lake_study: Path, tmp_path: Path, rendered_page) -> None:  # type: ignore[no-untyped-def]
    dom, attrs = rendered_page(lake_study / "report.html", tmp_path)
    assert int(attrs["data-images"]) >= 5
    for section in ("findings", "passk", "steps", "errors", "depth", "judge"):
        assert f'<section id="{section}">' in dom, section


def test_a_judge_scores_the_steps_where_the_environment_cannot(tmp_path: Path) -> None:
    """SQL has no step quality: without a judge the step-level stages say so; with one, the judge's scores
    are the quality (the solver submits, the explorer counts rows), and its unscored replies are counted."""
    common = ["--base", "study_fixtures:sql_explorer", "--rl", "study_fixtures:sql_solver", "--env", "sql",
              "--tasks", "4", "--samples", "2", "--budgets", "3,6"]
    assert main(["study", *common, "--out", str(tmp_path / "blind")]) == 0
    stages = _stages((tmp_path / "blind" / "summary.md").read_text())
    assert stages["steps"].startswith("skipped: environment 'sql' cannot score actions") and "no judge was given" in stages["steps"]
    assert stages["depth"].startswith("skipped: depth needs the matched-state analysis")
    assert stages["judge"] == "skipped: no --judge given; without one the step-level analyses of this environment have no scorer"
    assert main(["study", *common, "--judge", "study_fixtures:submit_judge", "--out", str(tmp_path / "judged")]) == 0
    steps = json.loads((tmp_path / "judged" / "analysis" / "steps.json").read_text())
    assert steps["judge"] == "study_fixtures:submit_judge" and "LLM judge" in steps["quality"]
    c = steps["comparison"]
    assert c["rl_mean"]["value"] == pytest.approx(1.0) and c["base_mean"]["value"] == pytest.approx(0.3)
    assert any("the judge gave no score to" in note for note in steps["notes"])  # 'submit SELECT 1' gets words
    summary = (tmp_path / "judged" / "summary.md").read_text()
    assert "mean judge score (study_fixtures:submit_judge) 1.000" in summary
    assert "- judge: skipped: no oracle on sql to check the judge against" in summary


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["study", "--base", BASE, "--rl", BASE, *LAKE, "--out", str(tmp_path / "same")]) == 2
    assert "are the same policy" in capsys.readouterr().err
    assert main(["study", "--base", "no-such-model", "--rl", RL, *LAKE, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "neither a policy spec nor a model folder" in err
    assert main(["study", "--base", BASE, "--rl", RL, *LAKE, "--train-runs", str(tmp_path), "--out", str(tmp_path / "y")]) == 2
    assert "holds no training metrics" in capsys.readouterr().err


def _study(out: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "arlkit", "study", "--base", BASE, "--rl", RL, *LAKE,
                             "--tasks", "24", "--samples", "8", "--budgets", "25%,50%,75%,100%", *extra,
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _kill_at(proc: subprocess.Popen[str], marker: str) -> list[str]:
    """Read the study's output until a line matching ``marker``, then kill -9 it; the lines read."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if re.search(marker, line):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    return seen


@pytest.mark.slow
def test_a_study_killed_twice_resumes_to_the_same_result(tmp_path: Path, finish_child) -> None:  # type: ignore[no-untyped-def]
    """kill -9 during the evaluation, then during the error-state analysis; the third run finishes, keeps
    what was on disk and writes what an uninterrupted study writes."""
    whole = _study(tmp_path / "whole")
    out, _ = finish_child(whole)
    assert whole.returncode == 0, out[-3000:]
    seen = _kill_at(_study(tmp_path / "killed"), r"trajectories: [1-9][0-9]*/")  # some have finished
    assert not any("the study is in" in line for line in seen), "".join(seen[-20:])
    seen = _kill_at(_study(tmp_path / "killed"), r"\[study\] errors:")
    assert any("steps: done" in line for line in seen), "".join(seen[-20:])
    last = _study(tmp_path / "killed")
    text, _ = finish_child(last)
    assert last.returncode == 0, text[-3000:]
    stages = _stages((tmp_path / "killed" / "summary.md").read_text())
    kept = int(stages["eval"].split("(")[1].split()[0])
    assert kept > 0 and stages["steps"] == "kept" and stages["errors"] == "done"
    for name in ("eval/passkt.csv", "analysis/steps.csv", "analysis/depth.csv", "analysis/errors.csv",
                 "analysis/loops.csv"):
        assert (tmp_path / "killed" / name).read_text() == (tmp_path / "whole" / name).read_text(), name


def test_the_python_api_runs_the_same_study(tmp_path: Path, lake_study: Path) -> None:
    config = StudyConfig(BASE, RL, EvalConfig(env=EnvSpec("frozenlake", {"size": 4, "t_max": 10}), tasks=8, samples=4,
                                              budgets=("50%", "100%"), bootstrap=500),
                         judge="study_fixtures:frozen_judge", quick=True)
    result = run_study(config, tmp_path / "api", say=lambda line: None)
    assert result.stages["likelihood"].startswith("skipped:") and result.stages["steps"] == "done"
    assert [r.pass_ for r in result.eval.rows] == [float(x.split(",")[6]) for x in
                                                   (lake_study / "eval" / "passkt.csv").read_text().splitlines()[1:]]


def test_arlkit_analyze_takes_the_judge_too(tmp_path: Path) -> None:
    explorer, solver = "study_fixtures:sql_explorer", "study_fixtures:sql_solver"
    run = tmp_path / "run"
    assert main(["eval", "--env", "sql", "--policy", explorer, "--policy", solver, "--tasks", "3", "--samples", "2",
                 "--budgets", "4", "--out", str(run)]) == 0
    pair = ["--base", explorer, "--rl", solver, "--runs", str(run), "--states", "6", "--actions", "2"]
    assert main(["analyze", "steps", *pair, "--out", str(tmp_path / "blind")]) == 0
    assert "no judge was given" in json.loads((tmp_path / "blind" / "steps.json").read_text())["skipped"]
    assert main(["analyze", "steps", *pair, "--judge", "study_fixtures:submit_judge", "--out", str(tmp_path / "a")]) == 0
    assert main(["analyze", "errors", *pair, "--judge", "study_fixtures:submit_judge", "--out", str(tmp_path / "a")]) == 0
    steps = json.loads((tmp_path / "a" / "steps.json").read_text())
    assert steps["comparison"]["difference"]["value"] == pytest.approx(0.7)
    assert json.loads((tmp_path / "a" / "errors.json").read_text())["judge"] == "study_fixtures:submit_judge"


def test_takeaways_follow_the_cis() -> None:
    """A direction is read only from a difference whose CI excludes 0; two unresolved ones give no trend."""
    from arlkit.metrics.bootstrap import Estimate
    from arlkit.metrics.passkt import PassRow
    from arlkit.recipes.study_summary import pass_takeaways

    def row(policy: str, T: int, k: int, p: float) -> PassRow:
        return PassRow("frozenlake", policy, "announced", T, T / 20, k, p, p - 0.1, p + 0.1, 0.8, 10, 4)

    rows = [row(spec, T, k, p) for spec, p in (("b", 0.2), ("r", 0.4)) for T in (10, 20) for k in (1, 4)]
    labels = {"b": "Base", "r": "RL"}
    sure = {(T, k): Estimate(0.2, 0.1, 0.3) for T in (10, 20) for k in (1, 4)}
    sure[(20, 4)] = Estimate(0.1, 0.05, 0.2)
    lines = pass_takeaways(rows, sure, labels)
    assert "RL - Base +20.0 [+10.0, +30.0] points: RL solves more tasks per try (CI above 0)" in lines[0]
    assert "The gain is smaller than at K = 1: RL mostly sharpens" in lines[1]
    assert "**Expected optimum at T = 20**: 80.0%" in lines[3] and "Base reaches 25% of it, RL 50%" in lines[3]
    unsure = {key: Estimate(0.05 * key[1], -0.1, 0.3) for key in sure}
    lines = pass_takeaways(rows, unsure, labels)
    assert "no resolvable difference (CI contains 0)" in lines[0]
    assert "Neither difference is resolvable, so no trend over K can be read" in lines[1]
    assert "neither is resolvable, so no trend over the budget can be read" in lines[2]
