"""The terminal environment: shipped tasks, persistence across turns, the Terminal-Bench loader,
budgets, and hostile commands contained."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arlkit.envs import make
from arlkit.envs.checker import check_env
from arlkit.envs.protocol import Task
from arlkit.envs.terminal import TerminalConfig, TerminalEnv, load_task, load_tasks
from arlkit.envs.terminal.tasks import SHIPPED_DIR, TIERS
from arlkit.envs.terminal.workspace import ROOT
from arlkit.policies.protocol import Reply
from arlkit.rollout import make_jobs, run_rollouts
from arlkit.sandbox import available_levels

pytestmark = pytest.mark.skipif(
    all(available_levels()[lv] is not None for lv in ("unshare", "bwrap")),
    reason="the terminal environment needs a namespaced sandbox level (bwrap, or unshare as root)",
)

TB_SAMPLE = Path(__file__).resolve().parents[1] / "data" / "terminal_bench"
SHIPPED = load_tasks()


@pytest.fixture(scope="module")
def env() -> TerminalEnv:
    return TerminalEnv(TerminalConfig())


def _start(env: TerminalEnv, name: str) -> None:
    spec = next(t for t in env.all_tasks() if t.name == name)
    env.reset(Task(spec.task_id, spec.to_payload()), 0)


def test_at_least_sixty_tasks_in_three_tiers() -> None:
    assert len(SHIPPED) >= 60
    tiers = [t.tier for t in SHIPPED]
    assert set(tiers) == set(TIERS)
    assert all(tiers.count(tier) >= 20 for tier in TIERS)
    for task in SHIPPED:
        assert task.solution and task.check and task.instruction


@pytest.mark.parametrize("name", [t.name for t in SHIPPED])
def test_reference_solution_passes_and_empty_attempt_fails(env: TerminalEnv, name: str) -> None:
    _start(env, name)
    empty = env.check(env.archive)
    assert empty.error is None and not empty.passed, f"{name}: the untouched folder passes its checker"
    env.step("rm -rf /app/* /app/.[!.]*")
    assert not env.check(env.archive).passed, f"{name}: an emptied folder passes its checker"
    _start(env, name)
    spec = next(t for t in env.all_tasks() if t.name == name)
    for command in spec.solution:
        assert env.optimal_actions(env.t_max) == [command]
        result = env.step(command)
        assert result.valid and not result.done, result.observation
    assert env.optimal_actions(env.t_max) == ["submit"]
    final = env.step("submit")
    assert final.done and final.success and final.reward == 1.0, env.last_check


def test_check_env_passes_and_splits_are_seeded_and_disjoint() -> None:
    check_env("terminal")
    a, b = TerminalEnv(TerminalConfig()), TerminalEnv(TerminalConfig(split_seed=1))
    test, train = a.tasks("test", 21), a.tasks("train", 41)
    assert not {t.task_id for t in test} & {t.task_id for t in train}
    assert len(test) + len(train) == len(SHIPPED)
    assert [t.task_id for t in a.tasks("test", 21)] == [t.task_id for t in test]
    assert {t.task_id for t in b.tasks("test", 21)} != {t.task_id for t in test}
    with pytest.raises(ValueError, match="only 21 test tasks"):
        a.tasks("test", 22)


def test_files_and_directory_persist_variables_and_processes_do_not(env: TerminalEnv) -> None:
    _start(env, "files-mkdir-tree")
    assert env.step("mkdir -p a/b && cd a/b && echo hi > f.txt && export SECRET_VAR=1").valid
    key = env.state_key()
    obs = env.step("pwd; cat f.txt; echo \"[${SECRET_VAR:-unset}]\"").observation
    assert f"{ROOT}/a/b" in obs and "hi" in obs and "[unset]" in obs
    assert env.state_key() == key  # reading changes nothing
    obs = env.step("sleep 300 & echo started").observation
    assert "started" in obs and "left running were stopped" in obs
    obs = env.step("ps -e -o comm= | grep -c sleep || true").observation
    assert "stdout:\n0" in obs


def test_snapshot_restore_brings_back_the_folder(env: TerminalEnv) -> None:
    _start(env, "files-mkdir-tree")
    env.step("echo one > x")
    snap = env.snapshot()
    env.step("echo two > x; mkdir y")
    env.restore(snap)
    assert "one" in env.step("cat x; ls").observation and "y" not in env.step("ls").observation.split("stdout:")[-1]


def test_terminal_bench_layout_loads_and_runs_its_pytest_checker() -> None:
    task = load_task(TB_SAMPLE / "count-words")
    assert task.source == "terminal-bench" and task.tier == "file-operations"
    assert task.listing() == ["poem.txt"]  # Dockerfile, solution, tests and task.yaml stay out of /app
    env = TerminalEnv(TerminalConfig(data_dir=str(TB_SAMPLE)))
    assert env.splits == ("test",)
    [t] = env.tasks("test", 1)
    env.reset(t, 0)
    failed = env.check(env.archive)
    assert not failed.passed and "2 failed" in failed.output, failed.output
    env.step(env.optimal_actions(2)[0])
    assert env.step("submit").success and "2 passed" in env.last_check.output


def test_budget_ends_an_episode_that_never_submits() -> None:
    class Lister:
        name = "lister"
        context_length = None

        def generate(self, requests):  # noqa: ANN001, ANN202
            return [Reply("<think>look</think><action>ls -la</action>") for _ in requests]

    env = TerminalEnv(TerminalConfig())
    trajectories = run_rollouts(lambda: TerminalEnv(TerminalConfig()), make_jobs(env.tasks("test", 2), 1, 3, 0), Lister())
    for trajectory in trajectories:
        assert len(trajectory.turns) == 3 and not trajectory.success


# -- hostile commands -------------------------------------------------------------------------
def test_writes_outside_the_task_folder_do_not_persist_or_land(env: TerminalEnv) -> None:
    _start(env, "files-mkdir-tree")
    obs = env.step("touch /etc/pwned /usr/pwned /pwned; echo x > /tmp/carry; ls /tmp/carry").observation
    assert obs.count("Read-only file system") >= 2 or "Permission denied" in obs
    assert "No such file" in env.step("cat /tmp/carry").observation
    assert not os.path.exists("/usr/pwned") and not os.path.exists("/pwned")


def test_cd_out_and_symlinks_out_of_the_folder_are_contained(env: TerminalEnv) -> None:
    _start(env, "files-mkdir-tree")
    obs = env.step("cd / && pwd").observation
    assert f"the next command starts in {ROOT}" in obs
    assert f"stdout:\n{ROOT}" in env.step("pwd").observation
    obs = env.step("ln -s / root && ln -s /etc/hostname h && echo x >> h; echo y > root/usr/z; ls root/").observation
    assert "Read-only" in obs or "Permission denied" in obs
    assert "links kept" in env.step("test -L root && test -L h && echo links kept").observation


def test_removing_the_task_folder_leaves_an_empty_folder(env: TerminalEnv) -> None:
    _start(env, "files-rename-ext")
    env.step("rm -rf /app/* /app/.[!.]* ; rm -rf .")
    assert "(no output)" in env.step("ls -A /app").observation
    assert env.step("submit").success is False


def test_network_fork_bomb_huge_output_and_secrets(env: TerminalEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARLKIT_TEST_SECRET", "hunter2")
    _start(env, "files-mkdir-tree")
    obs = env.step("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)\"").observation
    assert "Exit code: 1" in obs and ("unreachable" in obs or "Errno" in obs)
    obs = env.step("bomb() { bomb | bomb & }; bomb; sleep 1; echo survived").observation
    assert "Exit code" in obs or "failed to run" in obs
    obs = env.step("head -c 3000000 /dev/zero | tr '\\0' a").observation
    assert "output cut: 3000000 bytes" in obs and len(obs) < 3000
    obs = env.step("env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'").observation
    assert "hunter2" not in obs
    assert "Exit code: 0" in env.step("echo still fine").observation


def test_a_command_that_kills_its_shell_or_floods_the_folder_changes_nothing(env: TerminalEnv) -> None:
    _start(env, "files-rename-ext")
    before = env.state_key()
    result = env.step("echo x > new; kill -9 $PPID")
    assert result.valid and "failed to run" in result.observation and env.state_key() == before
    result = env.step(f"head -c {12 << 20} /dev/urandom > big")
    assert "size limit" in result.observation and env.state_key() == before


def test_answers_are_hidden_from_commands(env: TerminalEnv) -> None:
    _start(env, "files-mkdir-tree")
    obs = env.step(f"ls -A {SHIPPED_DIR} | wc -l; cat {SHIPPED_DIR}/files-mkdir-tree/check.yaml").observation
    assert "stdout:\n0" in obs and "project/src" not in obs  # the checker's text never shows


def test_background_jobs_at_submit_do_not_block_the_checker(env: TerminalEnv) -> None:
    _start(env, "files-mkdir-tree")
    for command in ("mkdir -p project/src project/tests project/docs", "touch project/README.md",
                    "(while true; do touch project/README.md; done) & disown; setsid sleep 600 &"):
        env.step(command)
    assert env.step("submit").success


def test_invalid_actions_change_nothing(env: TerminalEnv) -> None:
    _start(env, "files-mkdir-tree")
    key = env.state_key()
    assert env.parse_action("no tags").action is None
    assert env.parse_action("<action>```bash\nls\n```</action>").action == "ls"
    for junk in ("", "   ", "x" * 20_000):
        assert not env.step(junk).valid
    assert env.state_key() == key
    env.step("submit")
    assert not env.step("ls").valid
    assert make("terminal").t_max == 16


def test_arlkit_eval_oracle_solves_the_whole_test_split(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    import csv
    import sys

    done = run_child([sys.executable, "-m", "arlkit", "eval", "--out", str(tmp_path / "ev"), "--env", "terminal",
                      "--policy", "oracle", "--tasks", "21", "--samples", "1", "--budgets", "full"],
                     capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [r for r in csv.DictReader(open(tmp_path / "ev" / "passkt.csv")) if r["policy"] == "oracle"]
    assert rows and all(float(r["pass"]) == 1.0 for r in rows if r["k"] == "1"), rows


def test_binary_output_on_both_streams_still_comes_back(env: TerminalEnv) -> None:
    _start(env, "files-mkdir-tree")
    obs = env.step("head -c 100000 /dev/zero; head -c 100000 /dev/zero >&2; touch made").observation
    assert obs.startswith("Exit code: 0") and obs.count("output cut: 100000 bytes") == 2, obs[:300]
    assert "made" in env.step("ls").observation
