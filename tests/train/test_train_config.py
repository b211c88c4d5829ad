"""Training configs: YAML is a serialisation of the dataclasses; bad input is one clear message, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from arlkit.cli import main
from arlkit.algos import get_preset
from arlkit.config import ConfigError, EnvSpec, config_diff, config_to_plain, load_config
from arlkit.recipes.eval import EvalConfig
from arlkit.train import SFTConfig, TrainConfig, check_train_config


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_nested_sections_merge_onto_field_defaults(tmp_path: Path) -> None:
    path = _yaml(tmp_path, "algo:\n  preset: rloo\noptim:\n  lr: 3.0e-4\nsampling:\n  temperature: 0.9\n"
                           "validation:\n  dynamics:\n    states: 16\nenv:\n  args:\n    size: 5\n")
    config = load_config(TrainConfig, path, {"algo.kl_coef": "0.05", "group_size": "4", "prompt.history": "null"})
    assert config.optim.lr == 3e-4 and config.optim.grad_clip == 1.0
    # a partial section keeps the field's own default (max_new_tokens 32, not SamplingConfig's 256)
    assert config.sampling.temperature == 0.9 and config.sampling.max_new_tokens == 32
    assert config.validation.dynamics.states == 16 and config.validation.dynamics.actions == 8
    assert config.algo == get_preset("rloo", kl_coef=0.05) and config.group_size == 4 and config.prompt.history is None
    assert config.env == EnvSpec("frozenlake", {"size": 5})
    again = load_config(TrainConfig, None, {})
    assert config_diff(config_to_plain(again), config_to_plain(again)) == []
    assert "optim.lr: 1e-06 -> 0.0003" in config_diff(config_to_plain(again), config_to_plain(config))


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"learning_rate": "1"}, "learning_rate"),
        ({"optim.lrr": "1"}, "lrr"),
        ({"steps": "many"}, "steps"),
        ({"optim.lr": "fast"}, "lr"),
        ({"budget": "sometimes"}, "budget"),
        ({"sampling.temperature": "0"}, "sampling.temperature"),
        ({"budget": "budgetmix", "prompt.budget_mode": "hidden"}, "prompt.budget_mode"),
        ({"prompt.counters": "middle"}, "prompt: counters"),
        ({"env.args": "5"}, "env.args"),
        ({"model.precision": "fp8"}, "model: precision"),
    ],
)
def test_bad_values_name_the_field(overrides: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        load_config(TrainConfig, None, overrides)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"group_size": "1"}, "group_size"),
        ({"budget": "40", "env": {"args": {"size": 4, "t_max": 24}}}, "budget '40' gives 40 turns"),
        ({"algo": {"preset": "ppo", "step_rows": True}, "prompt": {"history": 1}}, "algo.step_rows: the PPO critic"),
        ({"algo": {"adv_estimator": "gae", "step_rows": True}, "prompt": {"history": 1}}, "algo.step_rows: the PPO"),
        ({"algo": {"preset": "gigpo", "step_rows": False}}, "algo: step_rows"),
        ({"prompt": {"history": 2}}, "prompt.history"),
        ({"algo": {"preset": "nope"}}, "algo: unknown preset 'nope'; valid choices: cispo, dapo"),
        ({"env": "nowhere"}, "env.name: unknown environment 'nowhere'"),
        ({"algo": {"kl_coeff": 0.1}}, "kl_coeff"),
    ],
)
def test_impossible_combinations_name_the_field(overrides: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        check_train_config(load_config(TrainConfig, None, overrides))


def test_budget_settings_resolve() -> None:
    base = {"env.args": "{size: 4, t_max: 24}"}
    assert check_train_config(load_config(TrainConfig, None, base)).budgets == (24,)
    mix = check_train_config(load_config(TrainConfig, None, {**base, "budget": "budgetmix"}))
    assert mix.budgets == (3, 5, 8, 10, 12, 15, 17, 20, 22, 24)
    assert check_train_config(load_config(TrainConfig, None, {**base, "budget": "6"})).budgets == (6,)
    assert check_train_config(load_config(TrainConfig, None, {**base, "budget": "25%"})).budgets == (6,)
    assert check_train_config(load_config(TrainConfig, None, {"algo.preset": "ppo"})).algo.needs_critic


def test_cli_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        ["train", "--out", str(tmp_path / "a"), "group_size=1"],
        ["train", "--out", str(tmp_path / "b"), "bogus=1"],
        ["train", "--out", str(tmp_path / "c"), "--config", str(_yaml(tmp_path, "steps: [1, 2]\n"))],
        ["train", "--out", str(tmp_path / "d"), "algo.preset=ppo", "algo.step_rows=true"],
        ["train", "--out", str(tmp_path / "e"), "budget=99"],
        ["train", "--out", str(tmp_path / "f"), "--config", str(tmp_path / "missing.yaml")],
        ["sft", "--out", str(tmp_path / "g"), "steps=0"],
        ["sft", "--out", str(tmp_path / "h"), "expertise=1"],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "error:" in err, err
    assert main(["train", "--out", str(tmp_path / "ok"), "--check", "algo.preset=gigpo", "budget=budgetmix"]) == 0
    assert '"step_rows": true' in capsys.readouterr().out
    assert not (tmp_path / "ok").exists()


def test_sft_config_defaults_and_yaml(tmp_path: Path) -> None:
    config = load_config(SFTConfig, _yaml(tmp_path, "expert: oracle\nsteps: 5\n"), {"keep": "success"})
    assert config.expert == "oracle" and config.steps == 5 and config.keep == "success" and config.relabel
    with pytest.raises(ConfigError, match="keep"):
        load_config(SFTConfig, None, {"keep": "some"})


def test_shipped_example_configs_validate() -> None:
    folder = Path(__file__).resolve().parents[2] / "configs"
    files = sorted(folder.glob("*.yaml"))
    assert files
    for path in files:
        if path.name.startswith("sft"):
            load_config(SFTConfig, path)
        elif path.name.startswith("eval"):
            load_config(EvalConfig, path)
        else:
            check_train_config(load_config(TrainConfig, path))
