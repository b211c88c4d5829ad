"""arlkit outside its checkout: the wheel built from the source carries the package data, the starter
files (``arlkit init``), the license and the entry points; installed into a fresh virtualenv, it runs the
README's evaluations from an empty folder.

The fresh virtualenv reaches the dependencies (torch, transformers, ...) through a ``.pth`` line naming
this interpreter's site-packages, so nothing is downloaded; arlkit itself comes only from the wheel (the
checkout's editable hook lives in a ``.pth`` file there, which a plain path line does not run)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ("src", "configs", "examples", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE")


@pytest.fixture(scope="module")
def run_ok(run_child):  # type: ignore[no-untyped-def]
    """``run_ok(*command, cwd=None)``: the command run under the suite's deadline for child processes; its exit
    status 0 checked, its output in the failure."""

    def run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        done = run_child([str(c) for c in command], cwd=cwd, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
        return done

    return run


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, run_ok) -> Path:  # type: ignore[no-untyped-def]
    """The wheel, built from a copy of the source (a build folder left in the checkout cannot leak in)."""
    copy, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in SOURCE:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, copy / name)
    run_ok(sys.executable, "-m", "pip", "wheel", copy, "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", out)
    (built,) = out.glob("arlkit-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh(wheel: Path, tmp_path_factory: pytest.TempPathFactory, run_ok) -> Path:  # type: ignore[no-untyped-def]
    """A fresh virtualenv with the wheel installed; its ``bin`` folder."""
    venv = tmp_path_factory.mktemp("venv") / "fresh"
    run_ok(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = Path(run_ok(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    run_ok(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel)
    return venv / "bin"


def test_the_wheel_carries_data_starter_files_license_and_entry_points(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "arlkit/data/starter/configs/eval_frozenlake.yaml" in names
    assert "arlkit/data/starter/examples/trl_grpo_frozenlake.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert any(n.startswith("arlkit/data/") and n.endswith(".json") for n in names)  # shipped task data
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(points).decode()
    assert "arlkit = arlkit.cli:main" in text and "[arlkit.envs]" in text


def test_the_installed_wheel_runs_the_readme_from_an_empty_folder(  # type: ignore[no-untyped-def]
        fresh: Path, tmp_path: Path, run_ok) -> None:
    work = tmp_path / "empty"
    work.mkdir()
    where = run_ok(fresh / "python", "-c", "import arlkit, json; print(json.dumps([arlkit.__file__, arlkit.__version__]))",
                   cwd=work)
    location, version = json.loads(where.stdout)
    assert Path(location).is_relative_to(fresh.parent) and not Path(location).is_relative_to(ROOT)
    assert run_ok(fresh / "arlkit", "--version", cwd=work).stdout.strip().endswith(version)
    run_ok(fresh / "arlkit", "init", cwd=work)

    def starter(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for name in ("configs", "examples")
                for p in sorted((root / name).rglob("*")) if p.is_file() and "__pycache__" not in p.parts}

    assert starter(work) == starter(ROOT) and len(starter(work)) >= 10
    # The README's eval block: its config line as written; its first line with fewer tasks (the checkout's
    # README test runs it whole).
    run_ok(fresh / "arlkit", "eval", "--config", "configs/eval_frozenlake.yaml", "--out", "runs/fl-scripted", "--tasks", "20",
           cwd=work)
    run_ok(fresh / "arlkit", "eval", "--env", "frozenlake", "--policy", "oracle", "--policy", "random", "--tasks", "10",
           "--samples", "8", "--budgets", "25%,50%,75%,100%", "--budget-mode", "announced", "--out", "runs/fl", cwd=work)
    for run in ("runs/fl-scripted", "runs/fl"):
        assert {"summary.md", "passkt.csv", "passkt.png", "trajectories.jsonl"} <= {p.name for p in (work / run).iterdir()}
    rows = (work / "runs" / "fl" / "passkt.csv").read_text().splitlines()
    assert rows[0].startswith("env,policy,") and len(rows) > 8
