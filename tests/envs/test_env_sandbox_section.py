"""The ``sandbox`` section of the code, math-tir and terminal configs: ``sandbox.memory_mb`` reaches the
sandbox each environment builds, the section is set from Python, ``--env-arg`` and YAML, and a wrong key
is one line naming the valid ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arlkit.cli import main
from arlkit.config import ConfigError, load_config
from arlkit.envs import env_config, make
from arlkit.envs.code.data import CodeProblem, CodeTest
from arlkit.envs.code.env import CodeEnv
from arlkit.envs.protocol import Task
from arlkit.sandbox import SandboxConfig, available_levels
from arlkit.train import TrainConfig

namespaced = pytest.mark.skipif(
    all(available_levels()[lv] is not None for lv in ("unshare", "bwrap")),
    reason="these environments need a namespaced sandbox level (bwrap, or unshare as root)",
)
SANDBOXED_ENVS = ("code", "math-tir", "terminal")
ALLOCATE_300_MB = "block = bytearray(300 * 2**20)\n"


def _one_line(text: str) -> str:
    text = text.strip()
    assert text.count("\n") == 0 and "Traceback" not in text, text
    return text


# -- the section reaches the sandbox -----------------------------------------------------------------


@namespaced
def test_code_programs_run_under_the_sections_memory_limit() -> None:
    problem = CodeProblem(
        problem_id="double", title="Double it", difficulty="easy", statement="Read n and print 2n.",
        public_tests=(CodeTest("stdio", input="2\n", output="4\n"),),
        hidden_tests=tuple(CodeTest("stdio", input=f"{k}\n", output=f"{2 * k}\n") for k in (2, 5, -3)),
        reference="print(2 * int(input()))\n",
    )  # fmt: skip
    program = ALLOCATE_300_MB + "print(2 * int(input()))\n"
    rates = {}
    for memory_mb in (128, 1024):
        env = make("code", test_timeout_s=2.0, step_budget_s=6.0, sandbox={"memory_mb": memory_mb})
        assert isinstance(env, CodeEnv)
        env.reset(CodeEnv.task_from_problem(problem), seed=0)
        assert env.sandbox.config.memory_mb == memory_mb
        rates[memory_mb] = env.pass_rate(program)
    assert rates == {128: 0.0, 1024: 1.0}


@namespaced
def test_math_code_blocks_run_under_the_sections_memory_limit() -> None:
    pytest.importorskip("reasoning_gym", reason="the math-tir environment needs the math extra")
    seen = {}
    for memory_mb in (128, 1024):
        env = make("math-tir", task_set="shipped", sandbox={"memory_mb": memory_mb})
        env.reset(env.tasks("test", 1)[0], 0)
        seen[memory_mb] = env.step(f"```python\n{ALLOCATE_300_MB}print('allocated')\n```").observation
    assert "ran out of memory" in seen[128] and "allocated" not in seen[128]
    assert seen[1024] == "Code execution result: allocated"


@namespaced
def test_terminal_commands_run_under_the_sections_memory_limit() -> None:
    seen = {}
    for memory_mb in (256, 1024):
        env = make("terminal", session="stateless", sandbox={"memory_mb": memory_mb})
        spec = env.all_tasks()[0]  # type: ignore[attr-defined]
        env.reset(Task(spec.task_id, spec.to_payload()), 0)
        seen[memory_mb] = env.step(f"python3 -c \"{ALLOCATE_300_MB.strip()}; print('allocated')\"").observation
        env.close()  # type: ignore[attr-defined]
    assert seen[256].startswith("Exit code: 1") and "MemoryError" in seen[256]
    assert seen[1024].startswith("Exit code: 0") and "allocated" in seen[1024]


def test_the_environment_fills_in_what_follows_its_own_options() -> None:
    terminal = make("terminal", max_workspace_mb=4, sandbox={"memory_mb": 2048, "hide_paths": ["/opt"]})
    built = terminal.sandbox.config  # type: ignore[attr-defined]
    assert (built.memory_mb, built.max_processes, built.uid_slots) == (2048, 64, 1024)  # the terminal's own defaults stay
    assert (built.max_file_mb, built.tmpfs_mb, built.wall_time_s, built.cpu_time_s) == (8, 16, 45.0, 35)
    assert "/app" in built.scratch_dirs and built.hide_paths[0] == "/opt" and len(built.hide_paths) > 1
    code = make("code", step_budget_s=8.0).sandbox.config  # type: ignore[attr-defined]
    assert (code.wall_time_s, code.cpu_time_s, code.memory_mb, code.min_isolation) == (18.0, 13, 512, "unshare")


# -- the section from Python, --env-arg and YAML ------------------------------------------------------


@pytest.mark.parametrize("name", SANDBOXED_ENVS)
def test_nested_dotted_and_typed_forms_agree(name: str) -> None:
    nested = env_config(name, {"sandbox": {"memory_mb": "2048", "min_isolation": "bwrap"}})
    dotted = env_config(name, {"sandbox.memory_mb": "2048", "sandbox.min_isolation": "bwrap"})
    typed = env_config(name, {"sandbox": {**vars(env_config(name).sandbox), "memory_mb": 2048, "min_isolation": "bwrap"}})
    assert nested == dotted == typed
    assert nested.sandbox.memory_mb == 2048 and nested.sandbox.min_isolation == "bwrap"
    assert env_config(name, {"sandbox": SandboxConfig(memory_mb=300)}).sandbox.memory_mb == 300


@pytest.mark.parametrize("name", SANDBOXED_ENVS)
def test_a_wrong_key_is_one_line_naming_the_valid_ones(name: str) -> None:
    with pytest.raises(ConfigError) as typo:
        env_config(name, {"sandbox.memry_mb": "2048"})
    text = _one_line(str(typo.value))
    assert "memry_mb" in text and "valid keys" in text and "memory_mb" in text and "min_isolation" in text
    with pytest.raises(ConfigError) as flat:  # the section is the only place these fields live
        env_config(name, {"memory_mb": "2048"})
    text = _one_line(str(flat.value))
    assert "unknown key 'memory_mb'" in text and "sandbox" in text


@pytest.mark.parametrize(("name", "field", "owner"), [
    ("code", "wall_time_s", "step_budget_s"), ("math-tir", "max_output_bytes", "output_chars"),
    ("terminal", "tmpfs_mb", "max_workspace_mb"), ("terminal", "cpu_time_s", "command_timeout_s"),
])  # fmt: skip
def test_a_field_the_environment_sets_is_refused_naming_its_option(name: str, field: str, owner: str) -> None:
    with pytest.raises(ConfigError) as refused:
        env_config(name, {f"sandbox.{field}": "3333"})
    text = _one_line(str(refused.value))
    assert f"sandbox.{field}" in text and owner in text


def test_each_environments_own_checks_hold() -> None:
    with pytest.raises(ConfigError, match="namespaced sandbox"):
        env_config("terminal", {"sandbox.min_isolation": "none"})
    assert env_config("code", {"sandbox.min_isolation": "none"}).sandbox.min_isolation == "none"
    with pytest.raises(ConfigError, match="sandbox.memory_mb must be >= 64"):
        env_config("code", {"sandbox.memory_mb": "32"})


def test_yaml_nests_the_section(tmp_path: Path) -> None:
    path = tmp_path / "train.yaml"
    path.write_text("env: {name: code, args: {step_budget_s: 8, sandbox: {memory_mb: 2048}}}\n")
    config = load_config(TrainConfig, path)
    typed = env_config(config.env.name, config.env.args)
    assert typed.sandbox.memory_mb == 2048 and typed.step_budget_s == 8.0
    override = load_config(TrainConfig, path, {"env.args.sandbox.min_isolation": "bwrap"})
    typed = env_config(override.env.name, override.env.args)
    assert (typed.sandbox.memory_mb, typed.sandbox.min_isolation) == (2048, "bwrap")


def test_train_check_refuses_a_typo_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["train", "--out", str(out), "--check", "env.name=code", "env.args.sandbox.memry_mb=2048"]) == 2
    text = _one_line(capsys.readouterr().err)
    assert "memry_mb" in text and "valid keys" in text and "memory_mb" in text
    assert not out.exists()


def test_eval_env_arg_refuses_a_typo_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["eval", "--env", "code", "--env-arg", "sandbox.memry_mb=2048", "--policy", "oracle",
                 "--tasks", "1", "--out", str(out)]) == 2  # fmt: skip
    text = _one_line(capsys.readouterr().err)
    assert "memry_mb" in text and "valid keys" in text and "memory_mb" in text
    assert not out.exists()


@namespaced
def test_eval_env_arg_and_yaml_reach_the_run(tmp_path: Path) -> None:
    common = ["--policy", "oracle", "--tasks", "1", "--samples", "1", "--budgets", "full"]
    assert main(["eval", "--env", "code", "--env-arg", "sandbox.memory_mb=700", *common, "--out", str(tmp_path / "a")]) == 0
    config = tmp_path / "eval.yaml"
    config.write_text("env: {name: code, args: {sandbox: {memory_mb: 700}}}\n")
    assert main(["eval", "--config", str(config), *common, "--out", str(tmp_path / "b")]) == 0
    for run in ("a", "b"):
        identity = json.loads((tmp_path / run / "run.json").read_text())
        assert identity["env"]["args"]["sandbox"]["memory_mb"] == 700, identity
