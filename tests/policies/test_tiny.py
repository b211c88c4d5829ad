"""The embedded tiny model: ``arlkit model init`` is deterministic and the result reloads offline."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from arlkit.cli import main
from arlkit.envs import make
from arlkit.policies.tiny import TINY_SIZES, parameter_count
from arlkit.rollout import build_messages
from arlkit.rollout.prompts import system_prompt


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_model_init_is_deterministic_and_refuses_to_overwrite(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "again"
    assert main(["model", "init", "--size", "nano", "--out", str(out)]) == 0
    expected = {
        "config.json", "generation_config.json", "model.safetensors",
        "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
    }
    assert expected <= set(_digests(out))
    assert _digests(out) == _digests(tiny_model_dir)  # byte-identical to the session's build
    capsys.readouterr()
    assert main(["model", "init", "--size", "nano", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "use --force" in err[0]
    assert not list(tmp_path.glob(".again.*"))  # no temporary directory left behind


def test_saved_model_reloads_offline(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "qwen2"
    params = sum(p.numel() for p in model.parameters())
    assert params == parameter_count("nano", model.config.vocab_size)
    assert 0.8e6 <= params <= 1.2e6
    assert 8e6 <= parameter_count("micro", model.config.vocab_size) <= 12e6
    assert 95e6 <= parameter_count("small", model.config.vocab_size) <= 110e6  # the GPU check's model
    assert set(TINY_SIZES) == {"nano", "micro", "small"}
    assert len(tokenizer) <= model.config.vocab_size
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"


def test_chat_template_renders_the_budget_aware_prompt(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    env = make("frozenlake", size=4, t_max=10)
    first = env.reset(env.tasks("test", 1)[0], seed=0)
    system = system_prompt(
        env.name, env.prompt_text().instruction, env.prompt_text().action_format, budget=10, completed=3, budget_mode="announced"
    )
    assert "10 turns in total, 3 completed, 7 remaining" in system
    messages = build_messages(system, [first, "You chose Left.\n" + first], ["<think>go</think><action>Left</action>"])
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    expected = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    assert rendered == expected + "<|im_start|>assistant\n"

    ids = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == rendered  # byte-level BPE: lossless
    for tag in ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<action>", "</action>"):
        assert len(tokenizer(tag, add_special_tokens=False)["input_ids"]) == 1, tag
    # One token per grid cell (and one per line break).
    grid = tokenizer(first, add_special_tokens=False)["input_ids"]
    assert len(grid) == len(first)
    sokoban = "#####\n#_√S#\n#X_O#\n#####"
    assert len(tokenizer(sokoban, add_special_tokens=False)["input_ids"]) == len(sokoban)


def test_a_saved_model_directory_is_readable_and_loads_without_offline_flags(tiny_model_dir: Path,
                                                                             tmp_path: Path) -> None:
    import json
    import os
    import stat

    from arlkit.policies.hf_ops import load_hf_model
    from arlkit.policies.tiny import save_model_dir

    model, tokenizer = load_hf_model(tiny_model_dir)  # loads with local_files_only=True
    out = save_model_dir(model, tokenizer, tmp_path / "saved")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask
    for path in out.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path.name
    assert "local_files_only" not in json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    again, _ = load_hf_model(out)
    assert again.config.vocab_size == model.config.vocab_size
