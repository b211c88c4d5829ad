"""Terminal task formats: arlkit's layout, Terminal-Bench's (pytest, run-tests.sh) and Harbor's load as
documented (docs/environments.md#terminal); a folder that cannot load is skipped with its reason and
the set's report counts it; the good tasks' reference solutions pass through the environment and
wrong answers fail; `arlkit eval` prints the report."""

from __future__ import annotations

import dataclasses
import io
import logging
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from arlkit.envs.protocol import Task
from arlkit.envs.terminal import TerminalConfig, TerminalEnv, load_task
from arlkit.envs.terminal.checker import CheckStep
from arlkit.envs.terminal.dockerfile import app_files
from arlkit.envs.terminal.formats import _HARBOR_CHECK, _TB_CHECK, network_uses
from arlkit.envs.terminal.tasks import TaskRefused, TerminalTask, load_task_set
from arlkit.sandbox import available_levels

DATA = Path(__file__).resolve().parents[1] / "data"
MIXED = DATA / "terminal_formats" / "mixed"
BOILERPLATE = DATA / "terminal_formats" / "boilerplate"
GOOD = ["arlkit-serve", "arlkit-sum", "harbor-json", "harbor-txt", "tb-pytest", "tb-run-tests"]
SKIPPED = {
    "bad-gpu": ("gpu", "task.toml asks for 1 GPU ([environment] gpus)"),
    "bad-network-harbor": ("network", "tests/test.sh needs the network (apt-get, curl, uv pip install)"),
    "bad-network-tb": ("network", "run-tests.sh needs the network (pip install, curl)"),
    "bad-no-tests": ("no-tests", "has no tests/ (nor an arlkit check.yaml)"),
    "bad-toml": ("unreadable", "task.toml is not valid TOML (Expected ']' at the end of a table declaration (at line 3, "
                 "column 10))"),
}
HEADLINE = f"6 tasks loaded from {MIXED}, 5 skipped (2 need the network, 1 asks for a GPU, 1 has no tests/, 1 cannot be read)"
needs_sandbox = pytest.mark.skipif(
    all(available_levels()[lv] is not None for lv in ("unshare", "bwrap")),
    reason="the terminal environment needs a namespaced sandbox level (bwrap, or unshare as root)",
)


def _support(task: TerminalTask) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(task.support), mode="r:") as archive:
        return sorted(m.name for m in archive.getmembers())


# -- each layout ------------------------------------------------------------------------------
def test_arlkit_layout_stateless_and_persistent() -> None:
    plain = load_task(MIXED / "arlkit-sum")
    assert (plain.source, plain.session, plain.tier, plain.listing()) == ("arlkit", "stateless", "text", ["nums.txt"])
    assert plain.solution == ("awk '{ s += $1 } END { print s }' nums.txt > total.txt",)
    assert plain.check == (CheckStep("cat total.txt", line="12"),)
    served = load_task(MIXED / "arlkit-serve")
    assert served.session == "persistent" and served.listing() == ["hello.txt"]
    assert "ThreadingHTTPServer(('127.0.0.1', 8765)" in served.solution[0] and served.solution[1] == "echo started > started.txt"
    assert "urlopen('http://127.0.0.1:8765/hello.txt'" in served.check[1].run
    assert served.check[1].line == "hello from the server"
    assert TerminalTask.from_payload(served.to_payload()) == served  # the session travels with the task
    assert served.task_id != dataclasses.replace(served, session="stateless").task_id


def test_terminal_bench_layouts() -> None:
    pytest_only = load_task(MIXED / "tb-pytest")
    assert (pytest_only.source, pytest_only.session, pytest_only.tier) == ("terminal-bench", "persistent", "text-processing")
    assert pytest_only.check == _TB_CHECK and _support(pytest_only) == ["test_outputs.py"]
    assert pytest_only.listing() == ["names.txt"]  # Dockerfile, solution, tests and task.yaml stay out of /app
    assert pytest_only.solution == ("#!/bin/bash\ncd /app\ntr a-z A-Z < names.txt > upper.txt",)
    assert (pytest_only.check_timeout_s, pytest_only.agent_timeout_s) == (60.0, 120.0)
    own = load_task(MIXED / "tb-run-tests")
    [step] = own.check
    assert step.run.endswith("bash /tests/run-tests.sh") and step.exit == 0 and not step.reward
    assert _support(own) == ["run-tests.sh", "test_outputs.py"] and own.listing() == ["greet.sh"]
    assert own.solution == ("printf '#!/bin/bash\\necho \"Hello, $1!\"\\n' > greet.sh", "chmod +x greet.sh")  # solution.yaml
    # a run-tests.sh that only runs pytest on the tests keeps arlkit's isolated pytest
    assert load_task(DATA / "terminal_bench" / "count-words").check == _TB_CHECK


def test_harbor_layouts() -> None:
    txt = load_task(MIXED / "harbor-txt")
    assert (txt.source, txt.session, txt.tier) == ("harbor", "persistent", "data-processing")
    assert txt.instruction.startswith("Add up the numbers in the second column of `/app/data.csv`")
    # the last stage's COPY lines into /app (not the earlier stage's), and the folder its RUN mkdir makes
    assert txt.listing() == ["data.csv", "notes/", "notes/README.txt", "out/"]
    # its test.sh runs pytest and writes the reward from its status: arlkit's pytest runs instead
    [step] = txt.check
    assert step.run.startswith("# arlkit's pytest in place of tests/test.sh") and step.exit == 0 and not step.reward
    assert step.run.endswith(_TB_CHECK[0].run)
    assert _support(txt) == ["test.sh", "test_outputs.py"]
    assert txt.solution == ((MIXED / "harbor-txt" / "solution" / "solve.sh").read_text().strip(),)
    assert (txt.check_timeout_s, txt.agent_timeout_s) == (60.0, 120.0)
    as_json = load_task(MIXED / "harbor-json")  # a test.sh of its own: it runs, then its reward is read
    assert as_json.listing() == ["logs/", "logs/a.log", "logs/b.log"] and as_json.check == _HARBOR_CHECK
    run_tests, read_reward = as_json.check
    assert run_tests.run.endswith("bash /tests/test.sh") and run_tests.exit is None and not run_tests.reward
    assert "/logs/verifier/" in read_reward.run and read_reward.reward and read_reward.exit == 0
    assert TerminalTask.from_payload(as_json.to_payload()) == as_json


def test_dockerfile_copies_that_cannot_be_followed_leave_the_folder_unknown(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    def files(text: str) -> list[tuple[Path, str]] | None:
        (tmp_path / "Dockerfile").write_text(text)
        return app_files(tmp_path)

    assert files("FROM x\nWORKDIR /app/sub\nCOPY a.txt .\nCOPY a.txt b.txt /app/\n") is None  # b.txt is missing
    assert files("FROM x\nWORKDIR /app/sub\nCOPY --chown=1:1 a.txt \\\n  ./c.txt\n") == [(tmp_path / "a.txt", "sub/c.txt")]
    assert files("FROM x\nCOPY a.txt /srv/\nRUN echo hi > /app/x\n") == []  # outside /app; RUN is not followed
    for line in ("COPY --from=build /out /app/", "ADD https://example.com/x.tar.gz /app/", "ADD a.tar.gz /app/",
                 "COPY a.txt $DEST", "COPY <<EOF /app/x\nhi\nEOF", "COPY ../outside.txt /app/"):
        assert files(f"FROM x\nWORKDIR /app\n{line}\n") is None, line
    assert app_files(tmp_path / "missing") == []


def test_network_uses_names_installs_and_downloads_only() -> None:
    assert network_uses("# pip install x\necho 'no network here'\ncurl -s http://127.0.0.1:8000/ http://localhost/x\n") == []
    assert network_uses("python3 -m pip install numpy  # deps\nwget -q https://example.com/f\n") == ["python3 -m pip install", "wget"]
    assert network_uses("uv add pytest\ngit clone repo\nnpm ci\ncurl -LsSf \"$URL\"\n") == ["uv add", "git clone", "npm ci", "curl"]


# -- test scripts that only install a test runner and run pytest ------------------------------------
def test_installer_boilerplate_is_replaced_by_arlkits_pytest() -> None:
    tasks, report = load_task_set(BOILERPLATE)
    assert [t.name for t in tasks] == ["harbor-uvx", "tb-pip-module", "tb-uv-yaml"]
    assert {s.name: (s.kind, s.reason) for s in report.skipped} == {
        "harbor-downloads": ("network", "tests/test.sh needs the network (apt-get, curl, wget, uvx)"),  # test data
        "tb-missing-package": ("network", "run-tests.sh: its tests need packages not installed here: "
                                          "arlkit-no-such-package"),  # pyyaml is here
    }
    harbor, module, uv = tasks
    assert uv.check == _TB_CHECK and _support(uv) == ["test_outputs.py"] and uv.listing() == ["ports.txt"]
    [step] = module.check  # python -m pytest in /app: the tests import /app's modules
    assert "sys.path.append(os.getcwd())" in step.run and step.run != _TB_CHECK[0].run
    [step] = harbor.check  # allow_internet = true (Harbor's default) is not read as a request
    assert step.run.startswith("# arlkit's pytest in place of tests/test.sh")
    assert step.run.endswith(_TB_CHECK[0].run)
    assert harbor.listing() == ["words.txt"] and _support(harbor) == ["test.sh", "test_outputs.py"]


def test_a_script_that_does_more_is_judged_as_it_is(tmp_path: Path) -> None:
    task = tmp_path / "tb"
    shutil.copytree(BOILERPLATE / "tb-uv-yaml", task)
    # Terminal-Bench's helper installs uv and pytest: a script that runs it and builds is refused
    helpers = "source $TEST_DIR/setup-uv-pytest.sh\nmake -C /app\nbash $TEST_DIR/run-uv-pytest.sh\n"
    (task / "run-tests.sh").write_text(helpers)
    with pytest.raises(TaskRefused, match=r"run-tests.sh needs the network \(apt-get, curl, uv add\)$"):
        load_task(task)
    (task / "run-tests.sh").write_text("test -s /app/ports.yaml\npytest $TEST_DIR/test_outputs.py -rA\n")  # offline
    [step] = load_task(task).check
    assert step.run.endswith("bash /tests/run-tests.sh")


def test_harbor_steps_are_refused(tmp_path: Path) -> None:
    shutil.copytree(BOILERPLATE / "harbor-uvx", tmp_path / "steps")
    with (tmp_path / "steps" / "task.toml").open("a") as toml:
        toml.write('\n[[steps]]\nname = "one"\n\n[[steps]]\nname = "two"\n')
    with pytest.raises(TaskRefused, match=r"task.toml has \[\[steps\]\] \(a task in several steps") as caught:
        load_task(tmp_path / "steps")
    assert caught.value.kind == "unsupported"


@pytest.fixture(scope="module")
def boilerplate() -> TerminalEnv:
    return TerminalEnv(TerminalConfig(data_dir=str(BOILERPLATE)))


@needs_sandbox
@pytest.mark.parametrize(("name", "wrong"), [
    ("tb-uv-yaml", "printf 'web: \"8080\"\\ndb: 5432\\ncache: 6379\\n' > ports.yaml"),  # a port as text
    ("tb-pip-module", "printf 'def count(text):\\n    return len(text.split(\" \"))\\n' > wordcount.py"),
    ("harbor-uvx", "uniq words.txt > unique.txt"),  # not sorted, not distinct
])
def test_replaced_checks_pass_the_reference_and_fail_wrong_answers(boilerplate: TerminalEnv, name: str,
                                                                   wrong: str) -> None:
    spec = _start(boilerplate, name)
    untouched = boilerplate.check(boilerplate.archive)
    assert untouched.error is None and not untouched.passed, untouched.output[-2000:]
    boilerplate.step(wrong)
    failed = boilerplate.check(boilerplate.archive)
    assert failed.error is None and not failed.passed and "1 failed" in failed.output, failed.output[-2000:]
    _start(boilerplate, name)
    for command in spec.solution:
        assert boilerplate.step(command).valid
    final = boilerplate.step("submit")
    assert final.done and final.success and final.reward == 1.0, boilerplate.last_check.output[-3000:]


# -- a mixed folder -----------------------------------------------------------------------------
def test_a_mixed_folder_loads_its_good_tasks_and_reports_each_bad_one(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="arlkit.envs.terminal.tasks"):
        tasks, report = load_task_set(MIXED)
    assert [t.name for t in tasks] == GOOD and report.loaded == 6
    assert {s.name: (s.kind, s.reason) for s in report.skipped} == SKIPPED  # shared-notes/ is not a task folder
    assert report.counts() == [("network", 2), ("gpu", 1), ("no-tests", 1), ("unreadable", 1)]
    assert report.headline() == HEADLINE
    assert len(caplog.records) == 5 and all(r.levelno == logging.WARNING for r in caplog.records)
    assert report.lines(limit=2)[1:] == ["  skipped bad-gpu: task.toml asks for 1 GPU ([environment] gpus)",
                                         "  skipped bad-network-harbor: " + SKIPPED["bad-network-harbor"][1],
                                         "  ... and 3 more"]
    env = TerminalEnv(TerminalConfig(data_dir=str(MIXED)))
    assert env.load_report == report and env.splits == ("train", "test")  # arlkit tasks among them: not a benchmark
    notes = env.summary_notes([])
    assert notes[0] == f"- terminal: {HEADLINE}" and len(notes) == 6 and "  - `bad-toml`: task.toml is not valid" in notes[5]
    assert TerminalEnv(TerminalConfig()).load_report is None  # the shipped tasks


def test_a_set_where_nothing_loads_is_one_error_naming_the_first_reasons(tmp_path: Path) -> None:
    for name in ("bad-gpu", "bad-toml"):
        shutil.copytree(MIXED / name, tmp_path / name)
    with pytest.raises(ValueError) as caught:
        load_task_set(tmp_path)
    assert str(caught.value) == (f"none of the 2 task folders under {tmp_path} can be loaded (bad-gpu: task.toml asks for 1 "
                                 f"GPU ([environment] gpus); bad-toml: {SKIPPED['bad-toml'][1]})")
    with pytest.raises(TaskRefused, match=r"bad-network-tb: run-tests.sh needs the network \(pip install, curl\)$"):
        load_task_set(MIXED / "bad-network-tb")  # one task folder: its refusal is the error


def test_session_and_timeouts_are_validated(tmp_path: Path) -> None:
    shutil.copytree(MIXED / "arlkit-sum", tmp_path / "odd")
    (tmp_path / "odd" / "task.yaml").write_text("instruction: Sum.\nsession: sometimes\n")
    shutil.copytree(MIXED / "tb-pytest", tmp_path / "slow")
    (tmp_path / "slow" / "task.yaml").write_text("instruction: Upper.\nmax_test_timeout_sec: -5\n")
    shutil.copytree(MIXED / "arlkit-sum", tmp_path / "ok")
    tasks, report = load_task_set(tmp_path)
    assert [t.name for t in tasks] == ["ok"]
    assert dict((s.name, s.reason) for s in report.skipped) == {
        "odd": "task.yaml: session must be one of stateless, persistent; got 'sometimes'",
        "slow": "task.yaml: max_test_timeout_sec must be a number of seconds > 0; got -5",
    }
    with pytest.raises(ValueError, match="session must be one of stateless, persistent; got 'shared'"):
        dataclasses.replace(tasks[0], session="shared")


# -- the oracles, and wrong answers ---------------------------------------------------------------
@pytest.fixture(scope="module")
def mixed() -> TerminalEnv:
    return TerminalEnv(TerminalConfig(data_dir=str(MIXED)))


def _start(env: TerminalEnv, name: str) -> TerminalTask:
    spec = next(t for t in env.all_tasks() if t.name == name)
    env.reset(Task(spec.task_id, spec.to_payload()), 0)
    return spec


@needs_sandbox
@pytest.mark.parametrize("name", [n for n in GOOD if n != "arlkit-serve"])  # its server needs the persistent session
def test_reference_solution_passes_and_the_untouched_folder_fails(mixed: TerminalEnv, name: str) -> None:
    spec = _start(mixed, name)
    untouched = mixed.check(mixed.archive)
    assert untouched.error is None and not untouched.passed, untouched.output[-2000:]
    for command in spec.solution:
        assert mixed.optimal_actions(mixed.t_max) == [command]
        assert mixed.step(command).valid
    final = mixed.step("submit")
    assert final.done and final.success and final.reward == 1.0, mixed.last_check.output[-3000:]


@needs_sandbox
def test_wrong_answers_fail(mixed: TerminalEnv) -> None:
    _start(mixed, "harbor-json")  # its test.sh also writes reward.txt = 1: reward.json comes first
    mixed.step("mv logs/a.log logs/a.txt")
    half = mixed.check(mixed.archive)
    assert not half.passed and half.steps[-1].why == "the reward is 0.5, below 1", half.output[-2000:]
    _start(mixed, "tb-run-tests")
    mixed.step("chmod +x greet.sh")  # executable, but it still says Hi
    wrong = mixed.check(mixed.archive)
    assert not wrong.passed and "1 failed" in wrong.output and wrong.steps[0].why == "exit status 1, expected 0"
    _start(mixed, "harbor-txt")
    mixed.step("echo 59 > total.txt")
    assert not mixed.check(mixed.archive).passed


# -- arlkit eval ------------------------------------------------------------------------------------
@needs_sandbox
def test_eval_prints_what_loaded_and_what_was_skipped(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run"
    proc = run_child(
        [sys.executable, "-m", "arlkit", "eval", "--env", "terminal", "--env-arg", f"data_dir={MIXED}", "--policy",
         "oracle", "--split", "train", "--tasks", "1", "--samples", "1", "--budgets", "1", "--out", str(out)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == f"terminal: {HEADLINE}"
    assert lines[1:6] == [f"terminal:   skipped {name}: {reason}" for name, (_, reason) in sorted(SKIPPED.items())]
    assert f"- terminal: {HEADLINE}" in (out / "summary.md").read_text()
