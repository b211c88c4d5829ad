"""BudgetMix: integer candidates, uniform per-group draws, the chi-square test and the audit verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from arlkit.cli import main
from arlkit.train.budgetmix import audit_run, budget_candidates, chi_square_uniform, sample_group_budgets


def test_candidates_match_spec_lists() -> None:
    # docs/algorithms.md#budgetmix: the three lists written out there.
    assert budget_candidates(70) == [7, 14, 21, 28, 35, 42, 49, 56, 63, 70]
    assert budget_candidates(10) == list(range(1, 11))
    assert budget_candidates(24) == [3, 5, 8, 10, 12, 15, 17, 20, 22, 24]
    # ceil(i*32/10): 3.2->4, 6.4->7, 9.6->10, 12.8->13, 16, 19.2->20, 22.4->23, 25.6->26, 28.8->29, 32
    assert budget_candidates(32) == [4, 7, 10, 13, 16, 20, 23, 26, 29, 32]


def test_candidates_are_exact_ceilings_and_avoid_float_error() -> None:
    for t_max in range(1, 200):
        expected = sorted({-(-i * t_max // 10) for i in range(1, 11)})
        assert budget_candidates(t_max) == expected
    # the float form gives 4 for T_max = 10, i = 3 (0.30000000000000004 * 10 -> ceil 4)
    assert math.ceil(3 * 0.1 * 10) == 4 and 3 in budget_candidates(10)
    assert budget_candidates(3) == [1, 2, 3]  # duplicates removed


def test_group_budgets_only_candidates_and_roughly_uniform() -> None:
    candidates = budget_candidates(32)
    draws = sample_group_budgets(candidates, 20_000, np.random.default_rng(0))
    assert set(draws) == set(candidates)
    counts = [draws.count(c) for c in candidates]
    assert max(counts) - min(counts) < 0.15 * 2000
    with pytest.raises(ValueError):
        sample_group_budgets([], 3, np.random.default_rng(0))


def test_chi_square_matches_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    for counts in ([10, 12, 9, 11], [30, 5, 5, 5, 5], [100] * 10, [3, 0, 0, 1, 7, 2], [50, 60]):
        stat, p = chi_square_uniform(counts)
        ref = scipy_stats.chisquare(counts)
        assert stat == pytest.approx(ref.statistic, rel=1e-12)
        assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
    assert chi_square_uniform([5]) == (0.0, 1.0)


def _write_run(run: Path, groups: list[dict], budget: str = "budgetmix", t_max: int = 10) -> None:
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"config": {"budget": budget, "prompt": {"budget_mode": "announced"}},
                                              "t_max": t_max}))
    (run / "rollouts.jsonl").write_text("".join(json.dumps(g) + "\n" for g in groups))


def _group(i: int, budget: int, turns: int = 2, success: bool = True, outcome: float = 1.0) -> dict:
    trajs = [{"sample": j, "budget": budget, "turns": turns, "success": success, "exhausted": turns >= budget and not success,
              "outcome": outcome, "score": outcome, "announced": [[budget, t, budget - t] for t in range(turns)]}
             for j in range(2)]
    return {"step": i, "attempt": 1, "group": f"g{i}", "task_id": "t", "budget": budget, "kept": True, "trajectories": trajs}


def test_audit_passes_on_clean_log_and_names_each_doctored_failure(tmp_path: Path) -> None:
    candidates = budget_candidates(10)
    clean = [_group(i, candidates[i % 10], turns=min(2, candidates[i % 10])) for i in range(100)]
    _write_run(tmp_path / "clean", clean)
    report = audit_run(tmp_path / "clean")
    assert report.passed, report.render()

    doctored = [dict(g) for g in clean]
    doctored[3] = _group(3, 11)  # not a candidate
    doctored[4] = dict(_group(4, 5))
    doctored[4]["trajectories"][1]["budget"] = 6  # two budgets in one group
    doctored[5] = _group(5, 3, turns=3, success=False, outcome=1.0)  # exhausted but paid
    doctored[6] = _group(6, 7)
    doctored[6]["trajectories"][0]["announced"][1] = [10, 1, 9]  # prompt announced T_max, not the budget
    _write_run(tmp_path / "bad", doctored)
    report = audit_run(tmp_path / "bad")
    failed = {c.name for c in report.checks if not c.passed}
    assert failed == {"one budget per group", "budgets from the allowed set", "exhausted trajectories got zero reward",
                      "prompts announced the sampled budget"}

    skewed = [_group(i, 10) for i in range(60)] + clean[:40]
    _write_run(tmp_path / "skewed", skewed)
    check = {c.name: c for c in audit_run(tmp_path / "skewed").checks}["budgets uniform over the candidates"]
    assert not check.passed and "p = " in check.detail


def test_cli_plan_and_audit_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budgetmix", "plan", "--tmax", "24"]) == 0
    assert capsys.readouterr().out.split() == ["3", "5", "8", "10", "12", "15", "17", "20", "22", "24"]
    _write_run(tmp_path / "r", [_group(0, 11)])
    assert main(["budgetmix", "audit", str(tmp_path / "r")]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(["budgetmix", "audit", str(tmp_path / "missing")]) == 2
    assert main(["budgetmix", "plan", "--tmax", "0"]) == 2
