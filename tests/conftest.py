"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

# tests/data holds task fixtures, among them a Terminal-Bench task whose own tests (run inside the
# sandbox by the terminal environment) must not be collected here.
collect_ignore = ["data"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded nano model (``arlkit model init --size nano --seed 0``), built offline once per
    test session (a few seconds). Its weights are random; treat the directory as read-only."""
    from arlkit.rollout.corpus import init_tiny_model

    return init_tiny_model("nano", tmp_path_factory.mktemp("tiny-model") / "nano", seed=0)


@pytest.fixture(scope="session")
def data_script():
    """``data_script("make_sql_tasks")``: a generator script of ``scripts/data`` loaded as a module
    (the generators live outside the package; the tests check the shipped data equals their output)."""
    import importlib.util
    import sys

    scripts = Path(__file__).resolve().parents[1] / "scripts" / "data"

    def load(name: str):  # type: ignore[no-untyped-def]
        spec = importlib.util.spec_from_file_location(f"arlkit_data_script_{name}", scripts / f"{name}.py")
        assert spec is not None and spec.loader is not None, name
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
        return module

    return load


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
APT_LINE = "apt-get install -y --no-install-recommends chromium"


@pytest.fixture(scope="session")
def chromium():  # type: ignore[no-untyped-def]
    """``chromium(page, workdir, *flags)``: the page opened in a real headless Chromium (its exit checked);
    the test is skipped, saying how to install it, on a machine without Chromium."""
    browser = next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)
    if browser is None:
        pytest.skip(f"no Chromium on this machine (looked for {', '.join(CHROMIUM_NAMES)}); install it with: {APT_LINE}")

    def render(page: Path, workdir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
        command = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
            f"--user-data-dir={workdir / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
            "--virtual-time-budget=5000", *flags, page.resolve().as_uri(),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=workdir)
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    return render


@pytest.fixture(scope="session")
def rendered_page(chromium):  # type: ignore[no-untyped-def]
    """``rendered_page(page, workdir) -> (dom, body attributes)``: an arlkit HTML report rendered in headless
    Chromium, checked to have loaded completely: nothing logged to the console, its load handler ran
    (``data-rendered``), no image broken, no section missing and no script or resource error caught."""

    def check(page: Path, workdir: Path) -> tuple[str, dict[str, str]]:
        done = chromium(page, workdir, "--dump-dom")
        dom = done.stdout
        console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
        assert console == [], console
        body = re.search(r"<body([^>]*)>", dom)
        assert body is not None, dom[:500]
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1)))
        assert attrs.get("data-rendered") == "ok"
        assert attrs.get("data-broken-images") == "0" and attrs.get("data-missing-sections") == ""
        html_tag = re.search(r"<html([^>]*)>", dom)
        assert html_tag is not None and "data-errors" not in html_tag.group(1)
        return dom, attrs

    return check


CHILD_DEADLINE_S = float(os.environ.get("ARLKIT_TEST_DEADLINE_S", 45 * 60))
"""How long a test waits for a child process: half of CI's 90-minute limit (``ARLKIT_TEST_DEADLINE_S`` sets
it), so a loaded machine slows a test down without failing it, and a hung child still fails with its output
before CI's limit."""


def _child_failure(command: object, out: object, err: object) -> str:
    text = lambda x: x.decode(errors="replace") if isinstance(x, bytes) else (x or "")  # noqa: E731
    return (f"{command!r} did not finish within {CHILD_DEADLINE_S:.0f} s (ARLKIT_TEST_DEADLINE_S)\n"
            f"--- its stdout (end) ---\n{text(out)[-4000:]}\n--- its stderr (end) ---\n{text(err)[-4000:]}")


@pytest.fixture(scope="session")
def run_child():  # type: ignore[no-untyped-def]
    """``run_child(command, **subprocess_run_kwargs)``: :func:`subprocess.run` under the suite's deadline for child
    processes (:data:`CHILD_DEADLINE_S`); a child still running then fails the test with its output so far."""

    def run(command, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return subprocess.run(command, timeout=CHILD_DEADLINE_S, **kwargs)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(_child_failure(command, exc.stdout, exc.stderr))

    return run


@pytest.fixture(scope="session")
def finish_child():  # type: ignore[no-untyped-def]
    """``finish_child(proc) -> (stdout, stderr)``: ``proc.communicate()`` under the suite's deadline for child
    processes; a child still running then is killed and fails the test with its output so far."""

    def finish(proc):  # type: ignore[no-untyped-def]
        try:
            return proc.communicate(timeout=CHILD_DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(_child_failure(proc.args, out, err))

    return finish


@pytest.fixture(scope="session")
def child_deadline_s() -> float:
    """:data:`CHILD_DEADLINE_S`, for a test that waits for an event of a child process (a line, a file) itself."""
    return CHILD_DEADLINE_S


LONGEST = ("tests/test_readme.py::test_the_readme_runs_as_written",)
"""Tests of several minutes; they start first, with the tests of the quick demo (the ``quick_demo`` fixture)."""


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest tests first (the README run, the quick demo's): with several workers (``make test`` runs ``-n``)
    they overlap the rest of the suite instead of trailing it; the other tests keep their order."""
    items.sort(key=lambda item: 0 if item.nodeid in LONGEST or "quick_demo" in getattr(item, "fixturenames", ()) else 1)
