"""Runs are safe to stop: SIGKILL at any moment, ``--resume``, and the metrics equal an uninterrupted run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from arlkit.cli import main
from arlkit.train import read_metrics

from .conftest import EASY_ENV


def _write_config(path: Path, model: Path, steps: int) -> Path:
    config = {
        "model": str(model), "env": {"name": "frozenlake", "args": EASY_ENV}, "train_tasks": 8, "steps": steps, "tasks_per_step": 2,
        "group_size": 4, "mini_batches": 2, "epochs": 2, "prompt": {"history": 1}, "algo": {"step_rows": True},
        "sampling": {"max_new_tokens": 10}, "optim": {"lr": 1e-3},
        "validation": {"every": 2, "tasks": 3, "dynamics": {"states": 6, "actions": 2, "pool_tasks": 2, "pool_samples": 1}},
        "checkpoint_every": 1, "progress": False,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _comparable(run: Path) -> list[dict]:
    return [{k: v for k, v in m.items() if not k.startswith("time/")} for m in read_metrics(run / "metrics.jsonl")]


def _run(args: list[str]) -> subprocess.Popen[bytes]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "arlkit", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def test_sigkill_and_resume_gives_identical_metrics(bc_dir: Path, tmp_path: Path, finish_child, child_deadline_s) -> None:  # type: ignore[no-untyped-def]
    config = _write_config(tmp_path / "c.yaml", bc_dir, steps=4)
    reference = _run(["train", "--config", str(config), "--out", str(tmp_path / "ref")])
    killed = _run(["train", "--config", str(config), "--out", str(tmp_path / "killed")])
    deadline = time.monotonic() + child_deadline_s
    checkpoints = tmp_path / "killed" / "checkpoints"
    while not (checkpoints / "step_000002.pt").exists():
        assert killed.poll() is None, killed.stderr.read().decode() if killed.stderr else ""
        assert time.monotonic() < deadline, "the run did not reach step 2 in time"
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert killed.returncode == -signal.SIGKILL
    _, err = finish_child(reference)
    assert reference.returncode == 0, err.decode(errors="replace")
    assert len(read_metrics(tmp_path / "killed" / "metrics.jsonl")) < 5

    resumed = _run(["train", "--config", str(config), "--out", str(tmp_path / "killed"), "--resume"])
    _, err = finish_child(resumed)
    assert resumed.returncode == 0, err.decode(errors="replace")
    ref, got = _comparable(tmp_path / "ref"), _comparable(tmp_path / "killed")
    assert [m["step"] for m in ref] == [0, 1, 2, 3, 4]
    assert got == ref
    rollouts = [(tmp_path / r / "rollouts.jsonl").read_text() for r in ("ref", "killed")]
    assert rollouts[0] == rollouts[1]


def test_resume_refuses_a_changed_config_unless_forced(bc_dir: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    config = _write_config(tmp_path / "c.yaml", bc_dir, steps=1)
    data = yaml.safe_load(config.read_text())
    data["validation"] = {"every": 0}
    config.write_text(yaml.safe_dump(data))
    out = str(tmp_path / "run")
    assert main(["train", "--config", str(config), "--out", out]) == 0
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--out", out]) == 2  # not empty, no --resume
    assert "--resume" in capsys.readouterr().err
    argv = ["train", "--config", str(config), "--out", out, "--resume", "optim.lr=0.5", "steps=2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "optim.lr: 0.001 -> 0.5" in err and "steps: 1 -> 2" in err and "--force" in err
    assert main([*argv, "--force"]) == 0
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["config"]["steps"] == 2 and "config.optim.lr: 0.001 -> 0.5" in info["forced_changes"]
    assert [m["step"] for m in read_metrics(tmp_path / "run" / "metrics.jsonl")] == [1, 2]
    # runtime-only fields may change freely
    assert main(["train", "--config", str(config), "--out", out, "--resume", "optim.lr=0.5", "steps=2",
                 "checkpoint_every=5", "tensorboard=false"]) == 0
    # the run folder holds its config: resuming needs only --out (overrides still apply on top)
    capsys.readouterr()
    assert main(["train", "--out", out, "--resume"]) == 0
    assert [m["step"] for m in read_metrics(tmp_path / "run" / "metrics.jsonl")] == [1, 2]
    assert main(["train", "--out", out, "--resume", "optim.lr=0.25"]) == 2
    assert "optim.lr: 0.5 -> 0.25" in capsys.readouterr().err
