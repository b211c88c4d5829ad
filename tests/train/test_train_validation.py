"""A refused command writes nothing that would make the corrected command fail: ``--out`` is claimed
(``run.json``) only once everything the run needs was checked and built."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from arlkit.cli import main
from arlkit.train import OptimConfig, SFTConfig, TrainConfig

from .conftest import EASY_ENV

TINY_RUN = ["steps=0", "validation.every=0", "progress=false", "tensorboard=false", "train_tasks=2",
            f"env.args={EASY_ENV}".replace("'", "")]


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and "error:" in err, err
    return err


def test_a_refused_train_command_leaves_out_free_for_the_corrected_one(
    nano_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["train", "--out", str(out), *TINY_RUN]
    # refused by the config checks: nothing is created
    assert main([*argv, f"model={tmp_path / 'missing'}"]) == 2
    assert "does not exist" in _err(capsys) and not out.exists()
    assert main([*argv, f"model={nano_dir}", "optim.lr=.inf"]) == 2
    assert "finite" in _err(capsys) and not out.exists()
    # refused once the model is loaded (no layer of that name): still not claimed
    assert main([*argv, f"model={nano_dir}", "lora.enabled=true", "lora.target_modules=no_such_layer"]) == 2
    assert "target_modules" in _err(capsys)
    assert not (out / "run.json").exists()
    # the corrected command is accepted
    assert main([*argv, f"model={nano_dir}"]) == 0
    assert (out / "run.json").exists() and (out / "final" / "config.json").exists()


def test_a_tiny_model_built_before_a_refusal_does_not_claim_out(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # tiny:nano is built into OUT/base_model before the LoRA layers are resolved; that alone is no claim
    out = tmp_path / "run"
    argv = ["train", "--out", str(out), *TINY_RUN, "model=tiny:nano"]
    assert main([*argv, "lora.enabled=true", "lora.target_modules=no_such_layer"]) == 2
    assert "target_modules" in _err(capsys)
    assert sorted(p.name for p in out.iterdir()) == ["base_model"]
    assert main(argv) == 0
    assert (out / "run.json").exists()


def test_out_must_be_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    assert main(["train", "--out", str(target), *TINY_RUN]) == 2
    assert "is a file" in _err(capsys)
    assert main(["sft", "--out", str(target), "steps=1"]) == 2
    assert "is a file" in _err(capsys)
    assert target.read_text() == "x"


def test_python_callers_get_the_same_range_checks() -> None:
    with pytest.raises(ValueError, match="lr: must be a finite number >= 0, got inf"):
        OptimConfig(lr=math.inf)
    with pytest.raises(ValueError, match="lr: must be a finite number >= 0, got nan"):
        SFTConfig(optim=OptimConfig(lr=math.nan))
    with pytest.raises(ValueError, match="grad_clip"):
        OptimConfig(grad_clip=math.nan)
    with pytest.raises(ValueError, match="seed"):
        TrainConfig(seed=-1)
    OptimConfig(lr=0.0)  # allowed: updates that change nothing (test_learning_rate_zero_changes_nothing)
