"""The one config loader (``arlkit.config``): the ``env``, ``prompt`` and ``model`` sections, keys outside a
config refused naming the valid ones, the eval run identity, behaviour cloning's optimizer and schedule
built like RL's, and YAML alias bombs and deep nesting refused in one short line."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from arlkit.cli import main
from arlkit.config import ConfigError, EnvSpec, config_to_plain, load_config, read_yaml
from arlkit.envs.frozenlake.env import FrozenLakeConfig
from arlkit.policies import BackendOptions
from arlkit.recipes.eval import EvalConfig, _run_identity
from arlkit.rollout import PromptConfig
from arlkit.rollout.engine import EngineConfig
from arlkit.train import ModelConfig, OptimConfig, SFTConfig, TrainConfig

CONFIGS = (EvalConfig, TrainConfig, SFTConfig)


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("cls", CONFIGS)
def test_env_and_prompt_are_sections(cls: type, tmp_path: Path) -> None:
    text = "env: {name: frozenlake, args: {size: 5}}\nprompt: {budget_mode: announced, history: 0, counters: observation}\n"
    config = load_config(cls, _yaml(tmp_path, text), {"env.args.t_max": "12", "prompt.counters": "system",
                                                       "prompt.profile": "compact"})
    assert config.env == EnvSpec("frozenlake", {"size": 5, "t_max": 12})
    assert config.prompt == PromptConfig("announced", 0, "system", "compact")
    assert config_to_plain(config)["prompt"] == {"budget_mode": "announced", "history": 0, "counters": "system",
                                                 "profile": "compact", "tool_calls": "text"}
    # the defaults are those of the sections' own classes
    assert cls().env == EnvSpec() and cls().prompt == PromptConfig()


def test_a_bare_environment_name_is_short_for_its_name(tmp_path: Path) -> None:
    config = load_config(TrainConfig, _yaml(tmp_path, "env: sokoban\n"), {"env.args.dim_room": "7"})
    assert config.env == EnvSpec("sokoban", {"dim_room": 7})
    # an override env=NAME sets the name only: the file's args stay (and are checked against the new env)
    config = load_config(TrainConfig, _yaml(tmp_path, "env: {name: frozenlake, args: {size: 5}}\n"), {"env": "sokoban"})
    assert config.env == EnvSpec("sokoban", {"size": 5})
    assert load_config(TrainConfig, None, {"env": "{name: sokoban}"}).env == EnvSpec("sokoban")


@pytest.mark.parametrize("cls", CONFIGS)
def test_a_key_outside_the_config_is_refused_naming_the_valid_ones(cls: type, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^unknown key 'env_args'; valid keys: .*\benv\b.*\bprompt\b") as raised:
        load_config(cls, _yaml(tmp_path, "env: frozenlake\nenv_args: {size: 5}\n"))
    assert "\n" not in str(raised.value)


def test_a_key_outside_the_config_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _yaml(tmp_path, "env: frozenlake\nhistory: 0\n")
    for argv in (["train", "--check", "--config", str(bad)], ["sft", "--check", "--config", str(bad)],
                 ["eval", "--config", str(bad)]):
        assert main([*argv, "--out", str(tmp_path / "out")]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert "unknown key 'history'" in err and "\n" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cls", (TrainConfig, SFTConfig))
def test_the_model_section_takes_a_path_alone(cls: type, tmp_path: Path) -> None:
    config = load_config(cls, _yaml(tmp_path, "model: {path: tiny:micro, precision: fp32}\n"), {"model": "runs/x"})
    assert config.model == ModelConfig("runs/x", precision="fp32")  # model=PATH sets the path, the rest stays
    assert load_config(cls, _yaml(tmp_path, "model: runs/y\n")).model == ModelConfig("runs/y")
    assert cls(model="runs/z").model == ModelConfig("runs/z")  # Python callers: the same shorthand
    with pytest.raises(ValueError, match="model: expected a ModelConfig or a model path"):
        cls(model=3)


def test_the_eval_run_identity_is_the_config_with_its_env_resolved() -> None:
    config = EvalConfig(env=EnvSpec("frozenlake", {"size": 6}), policies=("oracle", "random"), tasks=3, samples=2,
                        budgets=("50%", "10"), prompt=PromptConfig("hidden", 2, "observation"), ks=(1, 2),
                        backend=BackendOptions(context_length=512))
    identity = _run_identity(config)
    assert identity["env"] == {"name": "frozenlake", "args": config_to_plain(FrozenLakeConfig(size=6))}
    assert identity["prompt"] == config_to_plain(config.prompt) and identity["context_length"] == 512
    # what does not change results is left out: the engine's bounds, errors allowed, W&B, timeouts
    assert {"engine", "allow_errors", "wandb", "backend"}.isdisjoint(identity)
    assert _run_identity(replace(config, engine=EngineConfig(max_active=3), wandb="p")) == identity
    assert json.loads(json.dumps(identity)) == identity


def test_sft_reuses_optim_config_with_its_own_defaults() -> None:
    optim = SFTConfig().optim
    assert isinstance(optim, OptimConfig)
    assert (optim.lr, optim.warmup_steps, optim.weight_decay, optim.grad_clip, optim.schedule) == (
        1e-3, 10, 0.01, 1.0, "constant")
    # a partial section keeps SFT's defaults (not OptimConfig's lr 1e-6 / warm-up 0)
    assert load_config(SFTConfig, None, {"optim.lr": "3e-3"}).optim == OptimConfig(lr=3e-3, warmup_steps=10)
    with pytest.raises(ConfigError, match="optim: lr: must be a finite number >= 0"):
        load_config(SFTConfig, None, {"optim.lr": "-1"})


def test_sft_builds_the_optimizer_and_schedule_it_built_before() -> None:
    torch = pytest.importorskip("torch")
    from arlkit.train.optim import adamw, lr_lambda

    for warmup in (0, 1, 4, 10):
        optim = OptimConfig(lr=3e-3, warmup_steps=warmup, weight_decay=0.01, grad_clip=1.0)
        before = (lambda u: min(1.0, (u + 1) / warmup) if warmup > 0 else 1.0)  # recipes/sft.py's _lr_lambda
        factor = lr_lambda(optim, total_updates=40)
        assert [factor(u) for u in range(60)] == [before(u) for u in range(60)]
        params = [torch.nn.Parameter(torch.zeros(2))]
        old = torch.optim.AdamW(params, lr=optim.lr, weight_decay=optim.weight_decay)  # what SFT built before
        assert adamw(params, optim).defaults == old.defaults


def _bomb(levels: int, width: int = 9) -> str:
    """A YAML alias bomb: each anchor a list of ``width`` aliases of the one before; the last one used
    inside a valid key. ``levels`` levels expand to ``width ** levels`` values."""
    lines = ["seed: 1", f"x0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nenv:\n  name: frozenlake\n  args:\n    size: *a{levels - 1}\n"


@pytest.mark.parametrize("text,problem", [
    (_bomb(7), "expands to more than"),  # 9 ** 7 values: 4.8 million
    ("seed: 1\nenv: {name: frozenlake, args: {size: " + "[" * 10_000 + "]" * 10_000 + "}}\n", "nested more than"),
    ("seed: 1\n" + "".join("  " * i + f"k{i}:\n" for i in range(2_000)), "nested more than"),
    ("seed: &s [*s]\n", "recursive alias"),
])
def test_yaml_bombs_and_deep_nesting_are_one_short_line(text: str, problem: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--config", str(_yaml(tmp_path, text)), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err) < 500 and err.count("\n") == 1 and problem in err and "not valid YAML" in err, err[:500]
    assert not (tmp_path / "out").exists()
    # anchors, aliases and merge keys within the bounds still load
    text = "base: &b {size: 4, slippery: false}\nenv: {name: frozenlake, args: {<<: *b, size: 5}}\n"
    assert read_yaml(_yaml(tmp_path, text))["env"]["args"] == {"size": 5, "slippery": False}
