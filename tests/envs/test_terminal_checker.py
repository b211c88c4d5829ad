"""The terminal environment's checks: out of the policy's reach (docs/sandbox.md, "What a checker may
assume"). Every shipped task is attacked with folders that do not do the task -- links to the
checker's own input, modules and configurations planted for it to import or read, programs that
rewrite the checker's memory -- and none may be scored solved; what a check expects never enters
the sandbox; and the steps run as documented."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from arlkit.envs.protocol import Task
from arlkit.envs.terminal import TerminalConfig, TerminalEnv, load_tasks
from arlkit.envs.terminal.checker import CheckResult, CheckStep, parse_steps, run_check
from arlkit.envs.terminal.tasks import TerminalTask, _pack_files
from arlkit.envs.terminal.workspace import CommandLimits
from arlkit.sandbox import Sandbox, available_levels

from . import terminal_attacks

pytestmark = pytest.mark.skipif(
    all(available_levels()[lv] is not None for lv in ("unshare", "bwrap")),
    reason="the terminal environment needs a namespaced sandbox level (bwrap, or unshare as root)",
)

SHIPPED = load_tasks()


@pytest.fixture(scope="module")
def env() -> TerminalEnv:
    return TerminalEnv(TerminalConfig())


def _solved(env: TerminalEnv, spec: TerminalTask) -> bytes:
    env.reset(Task(spec.task_id, spec.to_payload()), 0)
    for command in spec.solution:
        env.step(command)
    return env.archive


def _submit(env: TerminalEnv, spec: TerminalTask, archive: bytes) -> bool:
    env.reset(Task(spec.task_id, spec.to_payload()), 0)
    env.restore({**env.snapshot(), "archive": archive})
    return env.step("submit").success


@pytest.mark.parametrize("name", [t.name for t in SHIPPED])
def test_no_attack_solves_a_shipped_task(env: TerminalEnv, name: str) -> None:
    spec = next(t for t in SHIPPED if t.name == name)
    solved = _solved(env, spec)
    hostile = {attack: build(spec.archive, solved) for attack, build in terminal_attacks.ATTACKS.items()}
    fooled = [attack for attack, archive in hostile.items() if archive is not None and _submit(env, spec, archive)]
    assert not fooled, f"{name} scored solved by: {fooled}; {env.last_check.output[-1500:] if env.last_check else ''}"
    assert _submit(env, spec, solved)  # the attacks were built around a real solution


def test_what_a_check_expects_never_enters_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real = Sandbox.run_python

    def spy(self: Sandbox, source: str, stdin: str = "", files: dict | None = None, **kwargs: object):  # noqa: ANN202
        seen.append(stdin + "".join(v if isinstance(v, str) else v.decode("latin-1") for v in (files or {}).values()))
        return real(self, source, stdin=stdin, files=files, **kwargs)

    monkeypatch.setattr(Sandbox, "run_python", spy)
    env = TerminalEnv(TerminalConfig())
    expected_somewhere = 0
    for spec in SHIPPED:
        seen.clear()
        env.reset(Task(spec.task_id, spec.to_payload()), 0)
        env.check(env.archive)
        sent = "\n".join(seen)
        for step in spec.check:
            for value in (step.stdout, step.line):
                if value and len(value.strip()) >= 3 and value not in spec.archive.decode("latin-1"):
                    expected_somewhere += 1
                    assert value not in sent, f"{spec.name}: {value!r} was sent into the sandbox"
    assert expected_somewhere >= 40  # most tasks expect text of their own


def _check(sandbox: Sandbox, steps: list[dict], files: dict[str, str] | None = None) -> CheckResult:
    with tempfile.TemporaryDirectory() as folder:
        for name, text in (files or {}).items():
            (Path(folder) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(folder) / name).write_text(text)
        archive = _pack_files(Path(folder))
    return run_check(sandbox, archive, parse_steps(steps, "test"), limits=CommandLimits(timeout_s=20))


def test_steps_compare_exit_status_exact_output_and_lines(env: TerminalEnv) -> None:
    ok = _check(env.sandbox, [{"run": "printf 'a\\nb\\n'", "stdout": "a\nb\n"}, {"run": "echo x; echo; echo", "line": "x"},
                              {"run": "exit 3", "exit": 3}])
    assert ok.passed and [s.passed for s in ok.steps] == [True, True, True]
    exact = _check(env.sandbox, [{"run": "printf 'a\\nb'", "stdout": "a\nb\n"}])
    assert not exact.passed and "output differs" in exact.steps[0].why
    stops = _check(env.sandbox, [{"run": "false"}, {"run": "echo never"}])
    assert not stops.passed and len(stops.steps) == 1 and "exit status 1" in stops.steps[0].why
    with pytest.raises(ValueError, match="unknown keys"):
        parse_steps([{"run": "true", "expect": "x"}], "check.yaml")
    with pytest.raises(ValueError, match="needs a 'run'"):
        parse_steps([{"line": "x"}], "check.yaml")


def test_each_step_starts_clean(env: TerminalEnv) -> None:
    """Nothing a step started survives into the next; each step has a new HOME and TMPDIR; links
    that leave the folder are gone before the first step and after each one, links inside it stay."""
    result = _check(env.sandbox, [
        {"run": "(setsid sleep 300 &) ; nohup sleep 300 >/dev/null 2>&1 & echo $HOME > /app/home; touch \"$HOME/.planted\""},
        {"run": "ps -e -o comm= | grep -c sleep", "exit": 1},
        {"run": "[ \"$HOME\" != \"$(cat /app/home)\" ] && ls -A \"$HOME\"", "stdout": ""},
        {"run": "ln -s /dev/stdin /app/late && ln -s home /app/kept"},
        {"run": "test ! -L /app/late && test -L /app/kept"},
    ])
    assert result.steps and all(s.passed for s in result.steps), result.output
    assert result.passed and result.links_out == 1
    # links are made by a command, as a policy would make them
    env.reset(Task(SHIPPED[0].task_id, SHIPPED[0].to_payload()), 0)
    env.step("ln -s /dev/stdin out; ln -s data.txt in; ln -s ../app/data.txt in2; ln -s / root")
    archive = env.archive
    check = run_check(env.sandbox, archive, (CheckStep("ls -A"),), limits=CommandLimits(timeout_s=20))
    assert check.links_out == 2 and "in2" in check.steps[0].stdout and "root" not in check.steps[0].stdout


def test_a_terminal_bench_check_cannot_be_shadowed(tmp_path: Path) -> None:
    """pytest, its configuration and the modules the tests import come from the interpreter, not
    from /app."""
    sample = Path(__file__).resolve().parents[1] / "data" / "terminal_bench" / "count-words"
    task = tmp_path / "count-words"
    shutil.copytree(sample, task)
    for name, text in terminal_attacks.SHADOWS.items():
        (task / name).parent.mkdir(parents=True, exist_ok=True)
        (task / name).write_text(text)
    env = TerminalEnv(TerminalConfig(data_dir=str(task)))
    [t] = env.tasks("test", 1)
    env.reset(t, 0)
    result = env.check(env.archive)
    assert not result.passed and "2 failed" in result.output, result.output[-2000:]


def test_programs_a_terminal_bench_test_runs_cannot_read_the_tests(tmp_path: Path) -> None:
    task = tmp_path / "peek"
    (task / "tests").mkdir(parents=True)
    (task / "task.yaml").write_text("instruction: Print the tests.\n")
    (task / "solution.sh").write_text("true\n")
    (task / "peek.py").write_text(
        "import os\nfor d, _, names in os.walk(os.environ['TEST_DIR']):\n"
        "    for n in names:\n        print(open(os.path.join(d, n), errors='replace').read())\n")
    (task / "tests" / "test_outputs.py").write_text(
        "import subprocess\n\ndef test_peek():\n"
        "    out = subprocess.run(['python3', '/app/peek.py'], capture_output=True, text=True).stdout\n"
        "    assert 'EXPECTED-' + 'ANSWER' not in out  # EXPECTED-ANSWER\n")
    env = TerminalEnv(TerminalConfig(data_dir=str(task)))
    [t] = env.tasks("test", 1)
    env.reset(t, 0)
    result = env.check(env.archive)
    assert result.passed, result.output[-2000:]


@pytest.mark.skipif(not terminal_attacks.can_write_memory_here(), reason="the memory-writing program is x86_64 machine code")
def test_a_command_cannot_rewrite_its_own_shell(env: TerminalEnv) -> None:
    """The primitive behind a rewritten checker, tried on a command's own shell: its exit status stays 3."""
    env.reset(Task(SHIPPED[0].task_id, SHIPPED[0].to_payload()), 0)
    obs = env.step(f"python3 -I -c '{terminal_attacks.MEM_WRITE}'; exit 3").observation
    assert obs.startswith("Exit code: 3"), obs
