"""``arlkit arena``: the variants, and a two-preset arena end to end that resumes after a kill."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arlkit.algos import get_preset
from arlkit.config import ConfigError, EnvSpec
from arlkit.recipes.arena import ARENA_VARIANTS, DEFAULT_VARIANTS, arena_plan

ENV_ARGS = ["--env-arg", "size=4", "--env-arg", "slippery=false", "--env-arg", "t_max=10"]


def test_every_variant_is_a_valid_config_and_differs_as_named() -> None:
    configs = {name: get_preset(preset, **extra) for name, (preset, extra) in ARENA_VARIANTS.items()}
    assert set(DEFAULT_VARIANTS) <= set(configs)
    assert configs["grpo-st"].loss_agg_mode == "seq-mean-token-mean" and configs["grpo"].loss_agg_mode == "token-mean"
    assert configs["cispo-sm"].loss_config.sequence_mask and not configs["cispo"].loss_config.sequence_mask
    assert configs["sapo-sm"].loss_config.sequence_mask and configs["grpo-sm"].loss_config.sequence_mask
    assert configs["dapo-gigpo"].dynamic_filtering and configs["dapo-gigpo"].adv_estimator == "gigpo"
    assert configs["sampo"].policy_loss == "gspo" and configs["sampo"].adv_estimator == "gigpo"
    plan = arena_plan(EnvSpec("frozenlake", {}), ["gspo", "grpo"], quick=True)
    assert plan.variants == ("grpo", "gspo") and plan.rl["mini_batches"] == 2 and plan.rl["algo"]["step_rows"]
    with pytest.raises(ConfigError, match="unknown arena variant"):
        arena_plan(EnvSpec("frozenlake", {}), ["grpo", "ppo2"])


def _command(model: Path, out: Path, steps: int = 2) -> list[str]:
    return [sys.executable, "-m", "arlkit", "arena", "--presets", "grpo,gspo", "--steps", str(steps), "--seeds", "1",
            "--bc-steps", "0", "--model", str(model), "--eval-tasks", "2", "--eval-samples", "2", "--budgets", "100%",
            *ENV_ARGS, "--out", str(out)]  # fmt: skip


def test_two_presets_end_to_end_and_a_resume_after_sigkill(  # type: ignore[no-untyped-def]
        tiny_model_dir: Path, tmp_path: Path, run_child, child_deadline_s) -> None:
    out = tmp_path / "arena"
    first = subprocess.Popen(_command(tiny_model_dir, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + child_deadline_s
    try:
        while not any(p.stat().st_size for p in out.glob("runs/*/metrics.jsonl")):  # a training step is logged
            assert time.monotonic() < deadline, f"no training step was logged within {child_deadline_s:.0f} s"
            try:  # waits on the process: returns at once if the arena ends
                first.wait(timeout=0.2)
                raise AssertionError("the arena ended before it was killed")
            except subprocess.TimeoutExpired:
                pass
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    again = run_child(_command(tiny_model_dir, out), capture_output=True, text=True)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "| grpo | grpo |" in again.stdout and "| gspo | gspo |" in again.stdout
    for run in ("grpo-s0", "gspo-s0"):
        steps = [line for line in (out / "runs" / run / "metrics.jsonl").read_text().splitlines() if line.strip()]
        assert len(steps) == 2, run  # resumed, not started over or logged twice
        assert (out / "eval" / run / "passkt.csv").is_file()
    with open(out / "arena.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["variant"] for r in rows] == ["grpo", "gspo"] and all(0 <= float(r["success"]) <= 1 for r in rows)
    assert (out / "stability" / "stability.csv").is_file() and (out / "arena.png").stat().st_size > 0
    other = run_child(_command(tiny_model_dir, out, steps=3), capture_output=True, text=True)
    assert other.returncode == 2 and "holds a different arena" in other.stderr and "Traceback" not in other.stderr, other.stderr


def test_bad_options_are_one_line_errors(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    for args, message in ((["--presets", "grpo,nope"], "unknown arena preset(s) nope; valid choices: grpo"),
                          (["--steps", "0"], "--steps must be >= 1"), (["--budgets", "150%"], "--budgets: 150%"),
                          (["--env", "chess"], "unknown environment 'chess'")):  # fmt: skip
        proc = run_child([sys.executable, "-m", "arlkit", "arena", *args, "--out", str(tmp_path / "a")],
                         capture_output=True, text=True)  # fmt: skip
        assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
