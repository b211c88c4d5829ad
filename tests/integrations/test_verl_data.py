"""``arlkit verl data``: verl-format rows, one per task group, that pass the BudgetMix audit (and a
tampered file that does not)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="pyarrow comes with the verl extra, installed by `make test`")

from arlkit.budgets import budget_candidates  # noqa: E402
from arlkit.cli import main  # noqa: E402
from arlkit.integrations.verl_data import AGENT_NAME, audit_data, build_rows, read_rows, row_episode, write_rows  # noqa: E402
from arlkit.rollout.prompts import PromptConfig  # noqa: E402

FIELDS = {"env", "env_args", "split", "task_id", "task_index", "tasks", "group", "index", "budget", "budget_spec",
          "t_max", "job_seed", "env_seed", "policy_seed", "budget_mode", "history", "counters", "profile", "layout",
          "reward"}


def test_budgetmix_rows_pass_the_audit_and_are_reproducible(tmp_path: Path) -> None:
    rows = build_rows("frozenlake", {"size": 4}, budget="budgetmix", groups=120, tasks=30, seed=3)
    assert len(rows) == 120 and all(r["agent_name"] == AGENT_NAME and r["data_source"] == "arlkit/frozenlake"
                                    for r in rows)
    assert all(set(r["extra_info"]) == FIELDS for r in rows)
    assert {r["extra_info"]["budget"] for r in rows} == set(budget_candidates(rows[0]["extra_info"]["t_max"]))
    first = rows[0]
    announced = first["extra_info"]["budget"]
    assert f"{announced} turns in total, 0 completed, {announced} remaining" in first["prompt"][0]["content"]
    path = write_rows(rows, tmp_path / "train.parquet")
    assert read_rows(path) == rows
    report = audit_data(path)
    assert report.passed, report.render()
    assert build_rows("frozenlake", {"size": 4}, groups=120, tasks=30, seed=3) == rows
    assert build_rows("frozenlake", {"size": 4}, groups=120, tasks=30, seed=4) != rows


def test_a_tampered_file_fails_the_audit(tmp_path: Path) -> None:
    rows = build_rows("frozenlake", {"size": 4}, budget="budgetmix", groups=40, tasks=10, seed=1)
    other = 1 + max(r["extra_info"]["budget"] for r in rows)
    rows[5]["extra_info"]["budget"] = other  # not a candidate, and its prompt still announces the old budget
    report = audit_data(write_rows(rows, tmp_path / "bad.parquet"))
    failed = {check.name for check in report.checks if not check.passed}
    assert failed == {"budgets from the allowed set", "prompts announced the sampled budget"}, report.render()


def test_full_budget_compact_and_hidden_prompts(tmp_path: Path) -> None:
    full = build_rows("sokoban", budget="full", groups=6, tasks=3, prompt=PromptConfig("announced", profile="compact"))
    t_max = full[0]["extra_info"]["t_max"]
    assert {r["extra_info"]["budget"] for r in full} == {t_max}
    assert f"turns remaining: {t_max:02d} of {t_max:02d}" in full[0]["prompt"][-1]["content"]
    hidden = build_rows("sokoban", budget="full", groups=4, tasks=3, prompt=PromptConfig("hidden"))
    assert "remaining" not in hidden[0]["prompt"][0]["content"]
    assert audit_data(write_rows(full, tmp_path / "full.parquet")).passed


def test_the_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sql.parquet"
    assert main(["verl", "data", "--env", "sql", "--groups", "20", "--tasks", "5", "--out", str(out)]) == 0
    assert "wrote 20 rows" in capsys.readouterr().out
    assert main(["budgetmix", "audit", str(out)]) == 0
    assert "verdict: PASS" in capsys.readouterr().out
    assert main(["verl", "data", "--env", "nope", "--out", str(out)]) == 2
    assert "valid choices" in capsys.readouterr().err
    assert main(["verl", "data", "--env", "frozenlake", "--budget", "soon", "--out", str(out)]) == 2


def test_layout_prompt_and_reward_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "traj.parquet"
    assert main(["verl", "data", "--env", "frozenlake", "--env-arg", "size=4", "--groups", "4", "--tasks", "2",
                 "--layout", "trajectory", "--counters", "observation", "--reward", "invalid_action_penalty=0.5",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "trajectory layout" in printed and "agent_loop_config_path=" in printed and "trainer_mode" not in printed
    episode = row_episode(read_rows(out)[0]["extra_info"])
    assert (episode.layout, episode.prompt.counters, episode.reward.invalid_action_penalty) == ("trajectory",
                                                                                                 "observation", 0.5)
    assert audit_data(out).passed
    assert main(["verl", "data", "--env", "frozenlake", "--layout", "trajectory", "--out", str(out)]) == 2
    assert "counters=observation" in capsys.readouterr().err
    assert main(["verl", "data", "--env", "frozenlake", "--reward", "bonus=1", "--out", str(out)]) == 2
    assert "bonus" in capsys.readouterr().err
