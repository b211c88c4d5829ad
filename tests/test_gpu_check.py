"""``scripts/gpu_check.sh`` on the CPU (it selects the CPU when no GPU is present, or with DEVICE=cpu): the
same GRPO, BudgetMix and LoRA runs and hf evaluation a GPU machine runs, with the nano model; the script
checks its own outputs (finite losses, trained weights, every trajectory) and exits 1 when one fails."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_check_runs_its_cpu_path_and_writes_its_table(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHON": sys.executable, "DEVICE": "cpu"}
    done = run_child(["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path / "work")], env=env,
                     capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "work" / "gpu_check.json").read_text())
    assert report["device"] == "CPU" and report["model"] == "nano" and report["failures"] == []
    assert [r["run"] for r in report["rows"]] == ["grpo-full", "grpo-budgetmix", "grpo-lora", "eval hf"]
    assert all(r["turns_per_s"] > 0 and math.isfinite(r["tokens_per_s"]) for r in report["rows"])
    assert "| grpo-lora | 2 |" in done.stdout and "| eval hf | 4 |" in done.stdout
