"""Bad input is refused at the boundary: one line naming the problem, exit 2, no traceback, nothing written.

Each case is a probe that used to be accepted or to crash: ``optim.lr=.inf`` trained to a NaN model,
``optim.lr=.nan`` passed ``--check`` then died, invalid UTF-8 and duplicate YAML keys, ``--check`` with a
missing model path.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from arlkit.cli import main
from arlkit.config import ConfigError, check_model_dir, check_number, parse_key_values, parse_yaml


def _one_line_error(capsys: pytest.CaptureFixture[str], *wanted: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and " error: " in err, err
    for text in wanted:
        assert text in err, (text, err)
    return err


def test_an_infinite_learning_rate_is_refused_by_the_entry_point(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = run_child([sys.executable, "-m", "arlkit", "train", "--out", str(out), "optim.lr=.inf"],
                     capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "lr" in done.stderr and "finite" in done.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["train", "--check", "optim.lr=.nan"], ("lr", "finite number", "nan")),
        (["train", "--check", "optim.lr=inf"], ("lr", "finite number")),
        (["train", "--check", "optim.lr=-1e-3"], ("lr", ">= 0")),
        (["train", "--check", "optim.grad_clip=.nan"], ("grad_clip", "finite")),
        (["train", "--check", "optim.beta2=1"], ("beta2", ">= 0 and < 1")),
        (["train", "--check", "optim.eps=0"], ("eps", "> 0")),
        (["train", "--check", "algo.kl_coef=-0.1"], ("kl_coef", ">= 0")),
        (["train", "--check", "algo.kl_coef=.inf"], ("kl_coef", "finite")),
        (["train", "--check", "algo.clip_ratio_high=.nan"], ("clip_ratio_high", "finite")),
        (["train", "--check", "algo.clip_ratio_low=1.5"], ("clip_ratio_low", "[0, 1]")),
        (["train", "--check", "reward.success_reward=.inf"], ("success_reward", "finite")),
        (["train", "--check", "reward.invalid_action_penalty=-1"], ("invalid_action_penalty", ">= 0")),
        (["train", "--check", "sampling.temperature=.nan"], ("temperature", "finite")),
        (["train", "--check", "lora.dropout=1"], ("dropout", "< 1")),
        (["train", "--check", "group_size=0"], ("group_size", ">= 1")),
        (["train", "--check", "tasks_per_step=0"], ("tasks_per_step", ">= 1")),
        (["train", "--check", "seed=-1"], ("seed", ">= 0")),
        (["train", "--check", "validation.tasks=0"], ("tasks", ">= 1")),
        (["train", "--check", "steps=1", "steps=2"], ("'steps' is given twice",)),
        (["train", "--check", "model.attn_implementation=fast"], ("model.attn_implementation", "valid choices", "sdpa")),
        (["sft", "--check", "optim.lr=.nan"], ("optim: lr", "finite")),
        (["sft", "--check", "lr=1e-3"], ("unknown key 'lr'", "optim")),
        (["train", "--check", "history=0"], ("unknown key 'history'", "prompt")),
        (["train", "--check", "model.precision=fp8"], ("model: precision", "auto, fp32, bf16")),
        (["sft", "--check", "batch_rows=0"], ("batch_rows", ">= 1")),
        (["sft", "--check", "optim.grad_clip=-1"], ("grad_clip", ">= 0")),
        (["sft", "--check", "expert=noisy-oracle:2"], ("expert", "[0, 1]")),
    ],
)
def test_numeric_ranges_and_finiteness(argv: list[str], wanted: tuple[str, ...], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main([*argv[:1], "--out", str(out), *argv[1:]]) == 2
    _one_line_error(capsys, *wanted)
    assert not out.exists()


def test_a_config_file_that_is_not_utf8_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "latin1.yaml"
    config.write_bytes("steps: 2\nthink: caf\u00e9\n".encode("latin-1"))
    for command in ("train", "sft"):
        assert main([command, "--config", str(config), "--out", str(tmp_path / "out"), "--check"]) == 2
        _one_line_error(capsys, str(config), "not valid UTF-8", "0xe9")


def test_duplicate_yaml_keys_are_refused_with_key_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "dup.yaml"
    config.write_text("steps: 2\noptim:\n  lr: 1.0e-3\n  lr: 1.0e-2\n")
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "out"), "--check"]) == 2
    _one_line_error(capsys, str(config), "duplicate key 'lr'", "line 4", "first given on line 3")
    config.write_text("steps: 2\nseed: 1\nsteps: 3\n")
    assert main(["sft", "--config", str(config), "--out", str(tmp_path / "out"), "--check"]) == 2
    _one_line_error(capsys, "duplicate key 'steps'", "line 3")
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        parse_yaml("{a: 1, a: 2}", where="override algo")
    # merge keys override on purpose and stay allowed
    assert parse_yaml("base: &b {p: 1, q: 2}\nc:\n  <<: *b\n  p: 3\n", where="x")["c"] == {"p": 3, "q": 2}


def test_yaml_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("steps: [1, 2\n")
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "out"), "--check"]) == 2
    _one_line_error(capsys, str(config), "not valid YAML", "line ")
    assert main(["train", "--out", str(tmp_path / "out"), "--check", "algo={kl_coef: [1"]) == 2
    _one_line_error(capsys, "override algo", "not valid YAML")


def _fake_model_dir(path: Path, *, weights: bool = True, tokenizer: bool = True, config: str = "{}") -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(config)
    if weights:
        (path / "model.safetensors").write_bytes(b"\0")
    if tokenizer:
        (path / "tokenizer.json").write_text("{}")
    return path


def test_check_resolves_model_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "out")
    cases = [
        (f"model={tmp_path / 'missing'}", ("model:", "does not exist")),
        (f"model=hf:{tmp_path / 'missing'}", ("model:", "does not exist")),
        (f"model={tmp_path}", ("model:", "no config.json")),
        (f"model={_fake_model_dir(tmp_path / 'noweights', weights=False)}", ("model:", "no model weights")),
        (f"model={_fake_model_dir(tmp_path / 'notok', tokenizer=False)}", ("model:", "no tokenizer")),
        (f"model={_fake_model_dir(tmp_path / 'badjson', config='{')}", ("model:", "not a readable JSON file")),
        ("model=tiny:huge", ("model:", "unknown tiny model size", "nano")),
    ]
    for override, wanted in cases:
        assert main(["train", "--out", out, "--check", override]) == 2, override
        _one_line_error(capsys, *wanted)
        assert main(["sft", "--out", out, "--check", override]) == 2, override
        _one_line_error(capsys, *wanted)
    assert main(["sft", "--out", out, "--check", f"expert=hf:{tmp_path / 'missing'}"]) == 2
    _one_line_error(capsys, "expert:", "does not exist")
    good = _fake_model_dir(tmp_path / "good")
    assert main(["train", "--out", out, "--check", f"model=hf:{good}"]) == 0
    shown = json.loads(capsys.readouterr().out)  # the whole config, and what it resolved to
    assert shown["resolved"]["algo"]["preset"] == "grpo" and shown["config"]["model"]["path"] == f"hf:{good}"
    assert shown["resolved"]["algo"]["policy_loss"] == "vanilla" and shown["config"]["optim"]["lr"] > 0
    assert main(["sft", "--out", out, "--check", f"model={good}", f"expert=hf:{good}"]) == 0
    assert not (tmp_path / "out").exists()


def test_the_shared_helpers_name_the_field() -> None:
    # check_model_dir and check_number are what other commands (eval) use for the same checks
    with pytest.raises(ConfigError, match="--policy: model directory '/nonexistent' does not exist"):
        check_model_dir("/nonexistent", field="--policy")
    with pytest.raises(ValueError, match=r"lr: must be a finite number > 0, got nan"):
        check_number("lr", float("nan"), gt=0)
    with pytest.raises(ValueError, match=r"p: must be a finite number >= 0 and <= 1, got 2"):
        check_number("p", 2, ge=0, le=1)
    with pytest.raises(ValueError, match="x: must be a finite number, got True"):
        check_number("x", True)  # type: ignore[arg-type]
    check_number("lr", 3e-4, gt=0)
    with pytest.raises(ConfigError, match="'a' is given twice"):
        parse_key_values(["a=1", "b=2", "a=3"], option="override")


def test_a_full_disk_while_building_the_tiny_model_is_one_line_exit_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import arlkit.recipes.model as model_recipe

    class SafetensorError(Exception):  # safetensors' own type; the OS error only in its text
        pass

    def no_space(*args: object, **kwargs: object) -> None:
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(model_recipe, "init_tiny_model", no_space)
    out = tmp_path / "nano"
    assert main(["model", "init", "--out", str(out)]) == 1
    _one_line_error(capsys, "No space left on device while writing " + str(out))
