"""``arlkit demo --quick``: the training experiment end to end, writing every file it promises."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from arlkit.rollout.prompts import COMPACT_PROMPT_VERSION
from arlkit.train import audit_run, read_metrics


@pytest.mark.slow
def test_demo_quick_writes_every_file(quick_demo: Any) -> None:
    out, done, wall = quick_demo.out, quick_demo.done, quick_demo.wall
    assert done.returncode == 0, done.stderr[-3000:]
    assert "everything is in" in done.stdout and "BudgetMix - Full" in done.stdout
    for name in ("summary.md", "table.csv", "passkt.png", "training_dynamics.png", "timing.json", "report.html"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    for name in ("steps.json", "steps.csv", "errors.json", "errors.csv"):
        assert (out / "analysis" / name).is_file(), name
    # without a terminal the progress bars print sparse lines (a tenth of a stage, or 30 s), not one per step
    assert len(done.stderr.splitlines()) <= 6 * 10 + wall / 30 + 5, done.stderr
    # one wall time, in the final message and summary.md, covering every stage
    summary = (out / "summary.md").read_text()
    line = re.search(r"^Wall time: (.+? min \(.+?\)):", summary, re.MULTILINE)
    assert line is not None and f"demo finished in {line.group(1)};" in done.stdout
    seconds = json.loads((out / "timing.json").read_text())
    assert list(seconds) == ["model", "bc", "rl", "eval", "analysis", "report"]
    assert line.group(1).startswith(f"{sum(seconds.values()) / 60:.1f} min")
    assert sum(seconds.values()) <= wall and wall - sum(seconds.values()) < 20  # interpreter start and imports
    findings = summary[summary.index("## Findings"):summary.index("## Pass@1")]
    assert [f"{i}." for i in range(1, 5)] == [x.split()[0] for x in findings.splitlines() if x[:1].isdigit()]
    assert all(("MET." in x) or ("MISSED." in x) for x in findings.splitlines() if x[:1].isdigit())
    # two RL runs per method, pooled: the CIs' scope is said with the findings, in summary.md and the report
    scope = "they do not cover the spread between RL seeds"
    assert scope in findings and scope in (out / "report.html").read_text()
    per_seed = summary[summary.index("## Per RL seed"):summary.index("## Below trajectory success")]
    assert [line.split("|")[1].strip() for line in per_seed.splitlines()[4:6]] == ["0", "1"], per_seed
    assert "Step quality at matched states (" in summary and "Continuation from " in summary
    assert (out / "bc" / "model" / "model.safetensors").is_file()
    # one prompt profile, the compact one, in cloning, all four RL runs and all 20 evaluations, recorded in each run
    rl_runs = [out / f"rl-{method}-s{seed}" for method in ("full", "budgetmix") for seed in (0, 1)]
    stages = [out / "bc", *rl_runs, *sorted((out / "eval").glob("*/*"))]
    assert len(stages) == 5 + 20
    assert sorted(p.name for p in (out / "eval").iterdir()) == ["base", "budgetmix-s0", "budgetmix-s1", "full-s0", "full-s1"]
    for folder in stages:
        run = json.loads((folder / "run.json").read_text())
        profile = run.get("config", run)["prompt"]["profile"]  # cloning and RL record their config; an eval is one
        assert (run["prompt_version"], profile) == (COMPACT_PROMPT_VERSION, "compact"), folder
    for folder in rl_runs:
        run = folder.name
        for name in ("config.yaml", "run.json", "metrics.jsonl", "rollouts.jsonl", "dynamics_pool.json"):
            assert (folder / name).is_file(), (run, name)
        assert list((folder / "checkpoints").glob("step_*.pt")) and (folder / "final" / "config.json").is_file()
        assert list((folder / "tb").glob("events.out.tfevents.*"))
        assert any("val/r_single" in m for m in read_metrics(folder / "metrics.jsonl"))
    assert all(audit_run(folder).passed for folder in rl_runs)
    seeds = [json.loads((folder / "run.json").read_text())["config"]["seed"] for folder in rl_runs]
    assert seeds == [0, 1, 0, 1]
    with open(out / "table.csv") as handle:
        rows = list(csv.DictReader(handle))
    methods = {r["method"] for r in rows}
    assert {"Base", "Full", "BudgetMix", "BudgetMix - Full", "Full seed 1", "BudgetMix seed 0 - Full seed 0"} <= methods
    _pooled_is_the_mean_of_the_seeds(rows)
    assert {r["budget"] for r in rows} == {"25%", "50%", "75%", "100%"} and {r["k"] for r in rows} >= {"1", "8"}
    for r in rows:
        assert float(r["ci_low"]) <= float(r["pass"]) <= float(r["ci_high"])
    assert "Pass@1" in summary and "Pass@8" in summary and "budget headroom" in summary


def _pooled_is_the_mean_of_the_seeds(rows: list[dict]) -> None:
    """A method's pooled Pass@1 is the mean of its two runs' (the same maps, equal samples per run)."""
    value = {(r["budget"], r["k"], r["method"]): float(r["pass"]) for r in rows}
    for budget in ("25%", "100%"):
        for method in ("Full", "BudgetMix"):
            runs = [value[(budget, "1", f"{method} seed {s}")] for s in (0, 1)]
            assert abs(value[(budget, "1", method)] - sum(runs) / 2) < 1e-5, (budget, method)


RECORDINGS = Path(__file__).resolve().parents[1] / "data" / "seeded"
"""The quick demo's table (``demo_quick_table.<kernels>.csv``), one per torch CPU kernel family
(``torch.backends.cpu.get_cpu_capability()``); re-record them only with a change that moves the demo's
results on purpose (its recipe, its maps). A family has its own file because float reductions round
differently between kernel families and a sampled token that flips sends a trajectory elsewhere: the AVX2
table differs from the AVX512 one in about a tenth of its cells, by up to one sample at Pass@1 and one map
at Pass@8, so no tolerance between families is principled."""


@pytest.mark.slow
def test_demo_quick_table_is_the_recorded_one(quick_demo: Any) -> None:
    """The seeded quick demo is deterministic: on a CPU of a recorded kernel family its table is byte for byte
    the recorded one."""
    import torch

    kernels = torch.backends.cpu.get_cpu_capability()
    recorded = RECORDINGS / f"demo_quick_table.{kernels}.csv"
    if not recorded.is_file():
        known = sorted(p.name for p in RECORDINGS.glob("demo_quick_table.*.csv"))
        pytest.skip(f"no quick-demo table recorded for {kernels} kernels (recorded: {', '.join(known)}); record it "
                    f"with `arlkit demo --quick --out D` and `cp D/table.csv {recorded}`")
    assert quick_demo.done.returncode == 0, quick_demo.done.stderr[-3000:]
    assert (quick_demo.out / "table.csv").read_bytes() == recorded.read_bytes()


@pytest.mark.slow
def test_a_rerun_with_other_rl_seeds_reuses_the_runs(quick_demo: Any, tmp_path: Path, run_child: Any) -> None:
    """``--rl-seeds 1`` into a copy of the quick demo (seeds 0 and 1): nothing is cloned, trained or
    evaluated again, the tables hold seed 1 alone (the numbers of the first run's seed-1 rows), and
    the step-level analyses, which compared Base with seed 0's Full run, are redone for seed 1's."""
    import shutil

    assert quick_demo.done.returncode == 0, quick_demo.done.stderr[-3000:]
    out = tmp_path / "demo"
    shutil.copytree(quick_demo.out, out)
    done = run_child([sys.executable, "-m", "arlkit", "demo", "--quick", "--rl-seeds", "1", "--out", str(out)],
                     env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for stage in ("building the nano model", "behaviour cloning", "RL at the full budget", "evaluating"):
        assert stage not in done.stdout, done.stdout
    assert "step-level diagnostics of Base vs Full seed 1 " in done.stdout
    assert json.loads((out / "demo.json").read_text())["rl_seeds"] == [1]
    assert json.loads((out / "analysis" / "compared.json").read_text())["rl"].endswith("rl-full-s1/final")
    with open(quick_demo.out / "table.csv") as before, open(out / "table.csv") as after:
        first = {(r["T"], r["k"], r["method"]): r["pass"] for r in csv.DictReader(before)}
        second = {(r["T"], r["k"], r["method"]): r["pass"] for r in csv.DictReader(after)}
    assert {m for _, _, m in second} == {"Base", "Full", "BudgetMix", "Full - Base", "BudgetMix - Base",
                                         "BudgetMix - Full"}
    for (T, k, method), value in second.items():
        if method != "BudgetMix - Base":  # the first table has that difference pooled only
            assert value == first[(T, k, method.replace("Full", "Full seed 1").replace("BudgetMix", "BudgetMix seed 1"))]


def test_a_demo_directory_refuses_another_plan(tmp_path: Path) -> None:
    from arlkit.config import ConfigError
    from arlkit.recipes.demo import _claim, demo_plan

    _claim(tmp_path, demo_plan(quick=True))
    _claim(tmp_path, demo_plan(quick=True))  # the same plan resumes
    with pytest.raises(ConfigError, match="different plan"):
        _claim(tmp_path, demo_plan(quick=False))


def test_a_demo_directory_takes_other_rl_seeds(tmp_path: Path) -> None:
    """Only the RL seeds may change in a demo folder (each seed has its own runs and evaluations); the
    record then holds the seeds asked for last, and any other change is still refused."""
    import json

    from arlkit.config import ConfigError
    from arlkit.recipes.demo import _claim, demo_plan

    _claim(tmp_path, demo_plan(quick=False))
    _claim(tmp_path, demo_plan(quick=False, rl_seeds=(0, 1, 2, 3)))
    assert json.loads((tmp_path / "demo.json").read_text())["rl_seeds"] == [0, 1, 2, 3]
    _claim(tmp_path, demo_plan(quick=False, rl_seeds=(2,)))
    assert json.loads((tmp_path / "demo.json").read_text())["rl_seeds"] == [2]
    with pytest.raises(ConfigError, match=r"different plan \(differs in: eval_tasks, ") as refused:
        _claim(tmp_path, demo_plan(quick=True, rl_seeds=(2,)))
    assert "rl_seeds" not in str(refused.value)
    assert demo_plan(quick=True).rl_seeds == (0, 1) and demo_plan(quick=True, rl_seeds=[5]).rl_seeds == (5,)


def test_step_analyses_of_another_full_run_are_redone(tmp_path: Path) -> None:
    """The step-level analyses compare Base with the first seed's Full run: a re-run whose first seed
    differs deletes them (so they run again); the same pair, or a resumed half, keeps them."""
    from arlkit.recipes.demo import _stale_analysis

    analysis = tmp_path / "analysis"
    pair = {"base": "bc/model", "rl": "rl-full-s0/final"}
    _stale_analysis(analysis, pair)  # a fresh folder: nothing to delete, the pair recorded
    for name in ("steps.md", "steps.json", "errors.md"):
        (analysis / name).write_text("x")
    _stale_analysis(analysis, pair)
    assert sorted(p.name for p in analysis.iterdir()) == ["compared.json", "errors.md", "steps.json", "steps.md"]
    _stale_analysis(analysis, {**pair, "rl": "rl-full-s1/final"})
    assert sorted(p.name for p in analysis.iterdir()) == ["compared.json"]
    (analysis / "steps.md").write_text("x")
    (analysis / "compared.json").unlink()  # a folder from before the record: its pair is unknown
    _stale_analysis(analysis, pair)
    assert sorted(p.name for p in analysis.iterdir()) == ["compared.json"]


@pytest.mark.parametrize("seeds,message", [
    ("0,x", "--rl-seeds '0,x': give non-negative integers separated by commas, e.g. 0,1,2,3"),
    ("-1", "--rl-seeds '-1': give non-negative integers"),
    ("", "--rl-seeds '': give non-negative integers"),
    ("1,2,1", "rl_seeds must be non-empty and without repeats, got [1, 2, 1]"),
])
def test_bad_rl_seeds_end_in_one_line(tmp_path: Path, seeds: str, message: str, run_child: Any) -> None:
    out = tmp_path / "demo"
    done = run_child([sys.executable, "-m", "arlkit", "demo", "--quick", "--rl-seeds", seeds, "--out", str(out)],
                     capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"arlkit demo: error: {message}") and done.stderr.count("\n") == 1, done.stderr
    assert not out.exists()  # refused before anything was written


def test_finding_1_reads_the_base_on_the_evaluation_maps() -> None:
    """The base's optimal-action rate (finding 1, the RL runs' step-0 R_single) is measured on a pool
    built from the same held-out maps as the evaluation (docs/training.md, "The demo's recipe")."""
    from arlkit.recipes.demo import demo_plan

    full = demo_plan(quick=False)
    dynamics = full.rl["validation"]["dynamics"]
    assert dynamics["pool_tasks"] == full.eval_tasks == 100
    assert dynamics["states"] >= full.eval_tasks  # several states per map on average, not a handful of maps


def test_a_demo_plan_needs_distinct_rl_seeds() -> None:
    from arlkit.config import ConfigError
    from arlkit.recipes.demo import demo_plan
    from arlkit.recipes.demo_outputs import eval_folders, rl_runs

    full = demo_plan(quick=False)
    assert full.rl_seeds == (0,) and full.rl["steps"] == 45 and full.rl["algo"]["adv_estimator"] == "grpo"
    assert [p.name for p in rl_runs(Path("d"), full).values()] == ["rl-full-s0", "rl-budgetmix-s0"]
    assert list(eval_folders(full).values()) == ["base", "full-s0", "budgetmix-s0"]
    plan = demo_plan(quick=True)
    assert plan.rl_seeds == (0, 1)
    assert [p.name for p in rl_runs(Path("d"), plan).values()] == ["rl-full-s0", "rl-full-s1", "rl-budgetmix-s0",
                                                                    "rl-budgetmix-s1"]
    assert list(eval_folders(plan).values()) == ["base", "full-s0", "full-s1", "budgetmix-s0", "budgetmix-s1"]
    for seeds in ((), (1, 1)):
        with pytest.raises(ConfigError, match="rl_seeds must be non-empty and without repeats"):
            dataclasses.replace(plan, rl_seeds=seeds)


# -- findings, readings and timing without running the demo ---------------------------------------------

BUDGETS = {8: "25%", 16: "50%", 24: "75%", 32: "100%"}


def _rows(cells: dict[tuple[str, int], tuple[float, float, float]]) -> list[dict]:
    """``table.csv``-like rows at k = 1 and 8 for every budget: the given cells, 0.5 [0.4, 0.6] elsewhere."""
    methods = ("Base", "Full", "BudgetMix", "BudgetMix - Full", "Full - Base", "BudgetMix - Base")
    rows = []
    for T, budget in BUDGETS.items():
        for k in (1, 8):
            for method in methods:
                value, low, high = cells.get((method, T), (0.5, 0.4, 0.6)) if k == 1 else (0.5, 0.4, 0.6)
                rows.append({"budget": budget, "T": T, "k": k, "method": method, "pass": value, "ci_low": low,
                             "ci_high": high})
    return rows


BOUND = {8: 0.33, 16: 0.9, 24: 0.97, 32: 0.70}


def test_findings_met() -> None:
    from arlkit.recipes.demo_outputs import demo_findings

    rows = _rows({
        ("Base", 32): (0.40, 0.30, 0.50),               # >= 0.5 x 0.70 = 0.35
        ("Full - Base", 32): (0.05, 0.01, 0.09),        # exactly +5 points, CI above 0
        ("Full - Base", 8): (0.01, -0.03, 0.05),        # smaller at 25%
        ("BudgetMix - Full", 8): (0.04, 0.01, 0.07),    # > 0, CI above 0
        ("BudgetMix - Full", 32): (-0.02, -0.06, 0.02),  # exactly 2 points below Full: allowed
    })  # fmt: skip
    lines = demo_findings(rows, BOUND, r_single=0.85)
    assert len(lines) == 4 and all(": MET." in line for line in lines), lines
    assert lines[0].startswith("1. The base plays: MET.") and "40.0 [30.0, 50.0]%" in lines[0] and "0.850" in lines[0]
    assert "+5.0 [+1.0, +9.0] points" in lines[1]
    assert "+1.0 [-3.0, +5.0] points at T=8 (25%) vs +5.0 [+1.0, +9.0] at T=32 (100%): the advantage shrinks" in lines[2]
    assert "the two CIs overlap" in lines[2]
    assert "+4.0 [+1.0, +7.0] points at T=8 (25%)" in lines[3] and "-2.0 [-6.0, +2.0] at T=32 (100%)" in lines[3]


def test_findings_missed_are_reported_plainly() -> None:
    from arlkit.recipes.demo_outputs import demo_findings

    rows = _rows({
        ("Base", 32): (0.30, 0.20, 0.40),               # < 0.35
        ("Full - Base", 32): (0.06, -0.01, 0.13),       # +6 points but the CI reaches below 0
        ("Full - Base", 8): (0.07, 0.02, 0.12),         # larger at 25%, and no resolved gain at T_max
        ("BudgetMix - Full", 8): (0.03, -0.01, 0.07),   # CI contains 0
        ("BudgetMix - Full", 32): (-0.03, -0.07, 0.01),  # 3 points below Full
    })  # fmt: skip
    lines = demo_findings(rows, BOUND, r_single=None)
    assert all(": MISSED." in line for line in lines), lines
    assert "30.0 [20.0, 40.0]% (< 0.5 x the expected optimum 70.0% = 35.0%)" in lines[0]
    assert "not measured" in lines[0]
    assert "+6.0 [-1.0, +13.0] points" in lines[1]
    assert "does not shrink: it is as large or larger at the tight budget" in lines[2]
    assert "at T_max it is not resolvable (CI contains 0)" in lines[2]
    larger = _rows({("Full - Base", 32): (0.06, 0.01, 0.11), ("Full - Base", 8): (0.07, 0.02, 0.12)})
    assert "MISSED." in demo_findings(larger, BOUND, r_single=0.9)[2]
    assert "the advantage does not shrink" in demo_findings(larger, BOUND, r_single=0.9)[2]
    assert "CI above 0: no" in lines[3] and "needs >= -2.0: no" in lines[3]
    # one part missed is enough: a finding is met only when all of its conditions are
    assert ": MISSED." in demo_findings(rows, BOUND, r_single=0.9)[0]
    no_gain = _rows({("Full - Base", 32): (-0.01, -0.05, 0.03), ("Full - Base", 8): (-0.04, -0.08, 0.0)})
    assert "the advantage shrinks; at T_max it is not resolvable" in demo_findings(no_gain, BOUND, r_single=0.9)[2]
    unresolved = _rows({("Full - Base", 32): (0.047, -0.094, 0.187), ("Full - Base", 8): (0.0, 0.0, 0.0)})
    assert ": MISSED." in demo_findings(unresolved, BOUND, r_single=0.9)[2]  # smaller, but from an unresolved gain


def test_analysis_readings(tmp_path: Path) -> None:
    import json

    from arlkit.recipes.readings import analysis_readings

    def est(v: float, lo: float, hi: float) -> dict:
        return {"value": v, "low": lo, "high": hi}

    missing = analysis_readings(tmp_path)
    assert len(missing) == 2 and all("not available" in line for line in missing)
    (tmp_path / "steps.json").write_text(json.dumps({"arlkit_analysis": "steps", "actions": 8, "quality": "Q*_h(s, a) from the oracle", "comparison": {
        "n_states": 120, "n_tasks": 40, "share_rl_better": est(0.5, 0.4, 0.6), "share_base_better": est(0.3, 0.2, 0.4),
        "share_tie": 0.2, "base_mean": est(0.4, 0.35, 0.45), "rl_mean": est(0.5, 0.45, 0.55),
        "difference": est(0.1, 0.05, 0.15)}}))
    (tmp_path / "errors.json").write_text(json.dumps({"arlkit_analysis": "errors", "continuation": {
        "n_states": 60, "samples": 4, "base": est(0.2, 0.1, 0.3), "rl": est(0.25, 0.15, 0.35),
        "difference": est(0.05, -0.02, 0.12)}}))
    steps, errors = analysis_readings(tmp_path)
    assert "Q* 0.500 [0.450, 0.550] vs Base's 0.400 [0.350, 0.450]" in steps and "Full steps better (CI above 0)" in steps
    assert "better at 50% of the states, Base at 30%" in steps
    assert "Full succeeds 25.0 [15.0, 35.0]% vs Base's 20.0 [10.0, 30.0]%" in errors
    assert "5.0 [-2.0, 12.0] points: no resolvable difference" in errors


def test_summary_and_final_message_give_the_same_wall_time(tmp_path: Path) -> None:
    """The stages are timed back to back (they add up to the whole run), and summary.md's wall-time line
    is the final message's, report stage included."""
    from arlkit.recipes.demo import _Stages, demo_plan, final_message
    from arlkit.recipes.demo_outputs import DemoTables
    from arlkit.recipes.demo_summary import wall_time, write_summary

    ticks = iter([100.0, 101.5, 104.0, 110.0, 111.0, 111.25, 112.0])  # a fake clock: creation, then one per stage
    stages = _Stages(clock=lambda: next(ticks))
    for stage in ("model", "bc", "rl", "eval", "analysis", "report"):
        stages.done(stage)
    assert stages.seconds == {"model": 1.5, "bc": 2.5, "rl": 6.0, "eval": 1.0, "analysis": 0.25, "report": 0.75}
    assert sum(stages.seconds.values()) == 12.0  # back to back: the stages add up to creation .. last stage
    seconds = {"model": 6.2, "bc": 19.4, "rl": 27.0, "eval": 40.1, "analysis": 9.6, "report": 8.3}
    tables = DemoTables(_rows({}), list(BUDGETS), [1, 8], {T: 0.0 for T in BUDGETS}, BOUND, {}, 32)
    runs = {("Full", 0): tmp_path / "rl-full-s0", ("BudgetMix", 0): tmp_path / "rl-budgetmix-s0"}
    one_seed = dataclasses.replace(demo_plan(quick=True), rl_seeds=(0,))
    write_summary(tmp_path, one_seed, tables, ["1. finding"], ["- reading"], seconds, runs)
    summary = (tmp_path / "summary.md").read_text()
    line = wall_time(seconds)
    assert line == "1.8 min (model 6s, bc 19s, rl 27s, eval 40s, analysis 10s, report 8s)"
    assert f"Wall time: {line}:" in summary
    assert final_message(tmp_path, seconds, ["1. finding"], runs).startswith(f"demo finished in {line};")
    assert "expected optimum (mean exact success probability; sampled Pass@k can exceed it)" in summary
    assert summary.index("## Findings") < summary.index("## Pass@1") and "- reading" in summary
