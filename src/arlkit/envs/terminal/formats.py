"""Terminal-Bench's and Harbor's task layouts, read as :class:`~arlkit.envs.terminal.tasks.TerminalTask`
(docs/environments.md#terminal says what each becomes and where arlkit departs from the authors' harness).

Terminal-Bench (``task.yaml``, ``solution.sh`` or ``solution.yaml``, ``tests/``, optionally
``run-tests.sh``, a ``Dockerfile``): the task folder holds what the Dockerfile's ``COPY`` and ``ADD``
lines put under ``/app`` (without a Dockerfile, the folder's other files). With no
``run-tests.sh``, or one that only installs a test runner and runs pytest on files of ``tests/``
(:mod:`~arlkit.envs.terminal.testscripts`), the check is arlkit's isolated pytest over those files
(``tests/test_*.py`` by default); any other ``run-tests.sh`` runs as the check, and the task is solved
when it exits 0.

Harbor (``instruction.md``, ``task.toml``, ``environment/Dockerfile``, ``tests/test.sh``,
``solution/solve.sh``; Terminal-Bench 2.0's layout): the task folder holds what the Dockerfile's
``COPY`` and ``ADD`` lines put under ``/app`` from ``environment/``. A ``tests/test.sh`` that only
installs a test runner, runs pytest and writes the reward from its status is replaced by arlkit's
isolated pytest (solved when pytest exits 0, when the script's reward would be 1); any other runs,
and the reward it writes to ``/logs/verifier/reward.json`` or ``reward.txt`` is read as Harbor does.

Either is refused, with a one-line :class:`~arlkit.envs.terminal.tasks.TaskRefused`, when its test
script installs or downloads other than a test runner (the sandbox has no network), when the tests
of a replaced script need packages arlkit's interpreter lacks, when its Dockerfile's image holds what
the sandbox lacks (:func:`_refuse_image`), when it asks for a GPU, a network mode or services beside
its own container, or when it uses a part of the format arlkit does not read.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arlkit.envs.terminal.checker import CheckStep
from arlkit.envs.terminal.dockerfile import app_files, base_image, read_build
from arlkit.envs.terminal.here import (
    SYSTEM_PATH, apt_present, import_name, importable, missing_here, plugin_modules, python_lacks,
)
from arlkit.envs.terminal.testscripts import HELPERS, REPORTING_PLUGINS, read_test_script
from arlkit.envs.terminal.tasks import (
    TaskRefused,
    TerminalTask,
    _instruction,
    _pack_entries,
    _pack_files,
    _positive_seconds,
    _read_text,
    _read_yaml,
)

__all__ = ["import_name", "load_harbor", "load_terminal_bench", "missing_here", "network_uses"]

_TB_META = {"task.yaml", "solution.sh", "solution.yaml", "run-tests.sh", "tests", "Dockerfile",
            "docker-compose.yaml", "docker-compose.yml"}
# Runs in a non-dumpable interpreter with -I (no cwd, user site or PYTHON* variables on its path)
# and -B (no bytecode written); the test sources are deleted once collected, so that a program the
# tests run cannot read what they expect. Written without single quotes: it is passed in them.
# {paths}: what pytest runs (default: tests/test_*.py); {extra}: plugins loaded, /app on the path.
_TB_PYTEST = """
import ctypes, glob, os, sys
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
import pytest
tests = os.environ["TEST_DIR"]
class HideTests:
    def pytest_collection_finish(self, session):
        for folder, _, names in os.walk(tests):
            for name in names:
                if name.endswith((".py", ".pyc")):
                    os.remove(os.path.join(folder, name))
args = ["-q", "-p", "no:cacheprovider", "--rootdir", tests, "--confcutdir", tests, "-c", os.devnull]{extra}
sys.exit(pytest.main(args + {paths}, plugins=[HideTests()]))
"""
_ALL_TESTS = "sorted(glob.glob(tests + \"/test_*.py\"))"


def _pytest_check(paths: tuple[str, ...] | None = None, plugins: tuple[str, ...] = (), app_on_path: bool = False,
                  note: str = "") -> tuple[CheckStep, ...]:
    """arlkit's isolated pytest over ``paths`` (relative to the tests folder; ``None``: its
    ``test_*.py``), with ``plugins`` (modules) loaded and, with ``app_on_path``, ``/app`` last on
    the tests' import path (as ``python -m pytest`` run there has it). ``note``: a comment line first."""
    extra = "".join(f"\nargs += [\"-p\", {json.dumps(module)}]" for module in plugins)
    if app_on_path:
        extra += "\nsys.path.append(os.getcwd())"
    listed = _ALL_TESTS if paths is None else (
        "[os.path.join(tests, p) for p in " + json.dumps(list(paths)) + "]")
    program = _TB_PYTEST.format(extra=extra, paths=listed)
    comment = f"# {note}\n" if note else ""
    return (CheckStep(f"{comment}exec \"$ARLKIT_PYTHON\" -I -B -c '{program}'"),)


_TB_CHECK = _pytest_check()

# Before a task's own test script: python3, python and pytest first on the PATH, from the interpreter
# arlkit runs the sandbox with (Terminal-Bench's and Harbor's scripts install pytest themselves; here
# it is provided). The pytest wrapper drops the current folder (/app) from its import path, as the
# pytest command does, so that no module of the task folder stands in for pytest's own.
_WITH_TOOLS = r"""arlkit_bin=$(mktemp -d)
printf '#!/bin/sh\nexec "%s" "$@"\n' "$ARLKIT_PYTHON" > "$arlkit_bin/python3"
cp "$arlkit_bin/python3" "$arlkit_bin/python"
printf '#!/bin/sh\nexec "%s" -c "import sys; sys.path[:] = [p for p in sys.path if p]; from pytest import console_main; sys.exit(console_main())" "$@"\n' "$ARLKIT_PYTHON" > "$arlkit_bin/pytest"
chmod 755 "$arlkit_bin"/*
export PATH="$arlkit_bin:$PATH"
unset arlkit_bin
"""
# Harbor's reward, as its verifier reads it: reward.json when it exists (its numeric "reward", else
# reward.txt's), otherwise reward.txt (the whole file is the number). Printed for a reward step;
# nothing printed is no reward. -I: nothing of /app is imported. Written without single quotes.
_READ_REWARD = """
import json, os
d = "/logs/verifier/"
def text(name):
    with open(d + name, encoding="utf-8", errors="replace") as f:
        return f.read(65536).strip()
if os.path.exists(d + "reward.json"):
    try:
        data = json.loads(text("reward.json"))
    except ValueError:
        data = None
    if isinstance(data, dict):
        value = data.get("reward")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            print(value)
        elif os.path.exists(d + "reward.txt"):
            print(text("reward.txt"))
elif os.path.exists(d + "reward.txt"):
    print(text("reward.txt"))
"""
_HARBOR_CHECK = (
    CheckStep(_WITH_TOOLS + "bash /tests/test.sh", exit=None),
    CheckStep(f"exec \"$ARLKIT_PYTHON\" -I -B -c '{_READ_REWARD}'", reward=True),
)

_INSTALLS = re.compile(r"""\b(?:
      (?:pip3?|uv\s+pip|python3?\s+-m\s+pip)\s+(?:install|download)
    | uv\s+(?:add|sync|tool\s+install|run\s+--with) | uvx
    | apt-get | apt\s+(?:install|update|upgrade) | apk\s+add | (?:yum|dnf|zypper)\s+install | pacman\s+-S
    | git\s+(?:clone|fetch|pull) | npm\s+(?:install|ci|i) | npx | (?:yarn|pnpm)\s+(?:install|add)
    | cargo\s+install | go\s+(?:get|install) | (?:conda|mamba|micromamba)\s+install | gem\s+install
    )\b""", re.X)
_FETCH = re.compile(r"\b(curl|wget)\b")
_URL_HOST = re.compile(r"\b(?:https?|ftp)://(\[[0-9a-fA-F:]+\]|[^/:\s\"'`]+)")
_LOCAL_HOSTS = {"localhost", "0.0.0.0", "[::1]"}


def _code_lines(script: str) -> list[str]:
    """The script's lines without comments (whole-line, or after ``<space>#``) and blank lines."""
    lines = []
    for raw in script.splitlines():
        line = re.split(r"\s#", raw.strip(), maxsplit=1)[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def network_uses(script: str) -> list[str]:
    """The commands of a shell ``script`` that need the network (installers, downloads; ``curl`` or
    ``wget`` of a host other than this machine), each named once, in order."""
    found: list[str] = []
    for line in _code_lines(script):
        found += [" ".join(m.group(0).split()) for m in _INSTALLS.finditer(line)]
        fetch = _FETCH.search(line)
        if fetch:
            hosts = [h.lower() for h in _URL_HOST.findall(line)]
            if not hosts or any(h not in _LOCAL_HOSTS and not h.startswith("127.") for h in hosts):
                found.append(fetch.group(1))
    return list(dict.fromkeys(found))


def _require_pytest(folder: Path) -> None:
    """Refuse a Terminal-Bench or Harbor task when the sandbox's interpreter has no pytest (their
    checks run it)."""
    if not importable("pytest"):
        raise TaskRefused(folder, "its check runs pytest, which is not installed here: pip install pytest "
                          "(arlkit's terminal extra)", "unsupported")


def _replaced_check(folder: Path, tests: Path, script: str, where: str, reward: bool) -> tuple[CheckStep, ...] | None:
    """arlkit's isolated pytest in place of a test script that only installs a test runner and runs
    pytest on files of ``tests`` (:mod:`~arlkit.envs.terminal.testscripts`); ``None`` for any other
    script. Refused when what it installs for the tests is not here."""
    helpers = {name: _read_text(tests / name) for name in HELPERS if (tests / name).is_file()}
    run = read_test_script(script, reward=reward, helpers=helpers)
    if run is None or not all((tests / path).exists() for path in run.paths):
        return None
    missing = missing_here(run)
    if missing:
        raise TaskRefused(folder, f"{where}: its tests need packages not installed here: {', '.join(missing)}",
                          "network")
    modules = plugin_modules(run.plugins)
    plugins = tuple(modules[p] for p in run.plugins)
    every = sorted(p.name for p in tests.glob("test_*.py") if p.is_file())
    paths = None if sorted(run.paths) == every else run.paths
    note = (f"arlkit's pytest in place of {where}, which installs a test runner, runs pytest on these tests and "
            "writes the reward from its status") if reward else ""
    return _pytest_check(paths, plugins, run.app_on_path, note)


def _refuse_if_offline(folder: Path, script: str, where: str) -> None:
    """Refuse a task whose test ``script`` needs the network, or runs one of Terminal-Bench's helpers
    that does (``setup-uv-pytest.sh`` installs uv and pytest): the task's own, else the harness's."""
    tests = folder / "tests"
    for name, default in HELPERS.items():
        if re.search(r"(\$\{?TEST_DIR\}?|/tests)/" + re.escape(name), script):
            script += "\n" + (_read_text(tests / name) if (tests / name).is_file() else default)
    needs = network_uses(script)
    if needs:
        raise TaskRefused(folder, f"{where} needs the network ({', '.join(needs[:4])})", "network")


def _refuse_other_services(folder: Path, compose_dir: Path, main: str) -> None:
    """Refuse a task whose docker-compose file starts services besides ``main`` (its own container)."""
    for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        path = compose_dir / name
        if not path.is_file():
            continue
        data = _read_yaml(path)
        services = data.get("services") if isinstance(data, dict) else None
        others = sorted(str(s) for s in services if s != main) if isinstance(services, dict) else []
        if others:
            where = path.relative_to(folder)
            raise TaskRefused(folder, f"{where} starts services beside the task's container ({', '.join(others)})",
                              "services")


def _image_source(folder: Path, compose_dir: Path, main: str) -> tuple[Path, Path]:
    """The build context and Dockerfile of the task's container: what ``main``'s ``build`` in the
    docker-compose file names (a context folder, a Dockerfile), else ``compose_dir`` and its ``Dockerfile``."""
    for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        if not (compose_dir / name).is_file():
            continue
        data = _read_yaml(compose_dir / name)
        service = data.get("services", {}).get(main) if isinstance(data, dict) and isinstance(
            data.get("services"), dict) else None
        build = service.get("build") if isinstance(service, dict) else None
        build = {"context": build} if isinstance(build, str) else build
        if isinstance(build, dict):
            context = (compose_dir / str(build.get("context") or ".")).resolve()
            dockerfile = context / str(build.get("dockerfile") or "Dockerfile")
            if context.is_dir() and (context == folder.resolve() or folder.resolve() in context.parents):
                return context, dockerfile
        break
    return compose_dir, compose_dir / "Dockerfile"


_TERMINAL_TOOLS = {"tmux", "asciinema", "nano", "vim", "vim-tiny", "vim-nox", "neovim", "less", "htop", "screen",
                   "apt-utils", "software-properties-common", "apt-transport-https", "lsb-release", "ca-certificates",
                   "python3-pip", "python3-venv", "python3-setuptools", "python3-wheel"}
"""Packages an image installs for a person at its terminal (Terminal-Bench's harness wants tmux and
asciinema, editors) or for installing (none runs here): not needed by a task's commands."""


def _refuse_image(folder: Path, context: Path, dockerfile: Path) -> None:
    """Refuse a task whose Dockerfile builds an image that holds more than the sandbox has: a base image
    of its own, packages missing here, downloads, builds and programs run, files made in ``/app`` or
    put elsewhere, a program started with the container (:func:`~arlkit.envs.terminal.dockerfile.read_build`)."""
    build = read_build(context, dockerfile)
    if build is None:
        return
    try:
        where = str(dockerfile.resolve().relative_to(folder.resolve()))
    except ValueError:
        where = dockerfile.name
    known, command = base_image(build.base)
    if not known:
        raise TaskRefused(folder, f"needs its own Docker image (FROM {build.base or 'nothing'})", "image")
    if command and shutil.which(command, path=SYSTEM_PATH) is None:
        raise TaskRefused(folder, f"needs its own Docker image (FROM {build.base}: {command} is not installed here)",
                          "image")
    missing = [f"{p} (apt)" for p in build.apt if p not in _TERMINAL_TOOLS and not apt_present(p)]
    pip = [p for p in build.pip if p not in REPORTING_PLUGINS and p not in _TERMINAL_TOOLS]
    tests_only = [p for p in pip if p == "pytest" or p.startswith("pytest-")]
    missing += [f"{p} (pip)" for p in tests_only if not importable(import_name(p))]
    modules = {import_name(p): p for p in pip if p not in tests_only}
    missing += [f"{modules[m]} (pip)" for m in python_lacks(modules)]
    if missing:
        raise TaskRefused(folder, f"needs its own Docker image (its {where} installs what is not here: "
                          f"{', '.join(missing[:6])}{', ...' if len(missing) > 6 else ''})", "image")
    if build.runs:
        raise TaskRefused(folder, f"needs its own Docker image (its {where} runs: {', '.join(build.runs[:4])}"
                          f"{', ...' if len(build.runs) > 4 else ''})", "image")
    if build.app_writes:
        raise TaskRefused(folder, f"needs its own Docker image (its {where} makes files in /app that arlkit cannot make: "
                          f"{'; '.join(build.app_writes[:2])})", "image")
    if app_files(context, dockerfile) is None:
        raise TaskRefused(folder, f"needs its own Docker image (its {where} copies into /app what arlkit cannot follow)",
                          "image")
    if build.elsewhere:
        raise TaskRefused(folder, f"needs its own Docker image (its {where} puts files outside /app: "
                          f"{', '.join(build.elsewhere[:3])})", "image")
    if build.entrypoint:
        raise TaskRefused(folder, f"its {where} starts a program with the container (ENTRYPOINT {build.entrypoint[:80]})",
                          "services")


def _seconds(value: Any, folder: Path, where: str) -> float | None:
    if value is None:
        return None
    if not _positive_seconds(value):
        raise TaskRefused(folder, f"{where} must be a number of seconds > 0; got {value!r}")
    return float(value)


def _tb_solution(folder: Path) -> tuple[str, ...]:
    """Terminal-Bench's reference solution: ``solution.sh`` as one command, or ``solution.yaml``'s
    commands, one per turn."""
    if (folder / "solution.sh").is_file():
        script = _read_text(folder / "solution.sh").strip()
        if not script:
            raise TaskRefused(folder, "solution.sh is empty", "no-solution")
        return (script,)
    if not (folder / "solution.yaml").is_file():
        raise TaskRefused(folder, "has no solution.sh or solution.yaml (the reference solution)", "no-solution")
    entries = _read_yaml(folder / "solution.yaml")
    if not isinstance(entries, list) or not entries:
        raise TaskRefused(folder, "solution.yaml: expected a list of entries with a 'command'")
    commands = []
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("command"), str):
            raise TaskRefused(folder, f"solution.yaml: entry {i} has no 'command'")
        if entry.get("append_enter") is False:
            raise TaskRefused(folder, f"solution.yaml: entry {i} types keystrokes (append_enter: false), which "
                              "arlkit cannot send as a command", "unsupported")
        if entry["command"].strip():
            commands.append(entry["command"].strip())
    if not commands:
        raise TaskRefused(folder, "solution.yaml has no command", "no-solution")
    return tuple(commands)


def _tb_folder(folder: Path, context: Path, dockerfile: Path) -> bytes:
    """Terminal-Bench's ``/app``: what the Dockerfile copies there (:func:`_refuse_image` has refused a
    copy that cannot be followed); without a Dockerfile, the folder's other files. Never the task's own
    files (:data:`_TB_META`: its tests, its solution), which a ``COPY . /app`` would take along."""
    files = app_files(context, dockerfile) if dockerfile.is_file() else None
    if files is None:
        return _pack_files(folder, lambda name: name not in _TB_META)
    root = folder.resolve()
    entries: list[tuple[Path | None, str]] = []
    for source, place in files:
        if source is not None and source.resolve() == root:
            entries += [(child, f"{place}/{child.name}" if place else child.name)
                        for child in sorted(folder.iterdir()) if child.name not in _TB_META]
        elif source is None or source.resolve().relative_to(root).parts[0] not in _TB_META:
            entries.append((source, place))
    return _pack_app(entries)


def _pack_app(entries: list[tuple[Path | None, str]]) -> bytes:
    """The archive of :func:`~arlkit.envs.terminal.dockerfile.app_files`' entries (``None``: an empty folder)."""
    with tempfile.TemporaryDirectory(prefix="arlkit-empty-") as empty:
        return _pack_entries([(source or Path(empty), place) for source, place in entries])


def load_terminal_bench(folder: Path, data: Mapping[str, Any]) -> TerminalTask:
    """The Terminal-Bench task in ``folder`` (``data``: its ``task.yaml``)."""
    instruction = _instruction(data, folder)
    _require_pytest(folder)
    tests = folder / "tests"
    if not tests.is_dir():
        raise TaskRefused(folder, "has no tests/ (nor an arlkit check.yaml)", "no-tests")
    parser = data.get("parser_name", "pytest")
    if parser != "pytest":
        raise TaskRefused(folder, f"task.yaml: parser_name {parser!r}: arlkit reads pytest's verdict only",
                          "unsupported")
    _refuse_other_services(folder, folder, "client")
    solution = _tb_solution(folder)
    check, support = _TB_CHECK, _pack_files(tests)
    run_tests = folder / "run-tests.sh"
    if run_tests.is_file():
        script = _read_text(run_tests)
        replaced = _replaced_check(folder, tests, script, "run-tests.sh", reward=False)
        if replaced is not None:
            check = replaced
        else:
            _refuse_if_offline(folder, script, "run-tests.sh")
            check = (CheckStep(_WITH_TOOLS + "bash /tests/run-tests.sh"),)
            support = _pack_entries([(tests, ""), (run_tests, "run-tests.sh")])
    context, dockerfile = _image_source(folder, folder, "client")
    _refuse_image(folder, context, dockerfile)
    tier = str(data.get("category") or data.get("tier") or "terminal-bench")
    archive = _tb_folder(folder, context, dockerfile)
    return TerminalTask(
        folder.name, tier, instruction, archive, solution, check, support, "terminal-bench", "persistent",
        check_timeout_s=_seconds(data.get("max_test_timeout_sec"), folder, "task.yaml: max_test_timeout_sec"),
        agent_timeout_s=_seconds(data.get("max_agent_timeout_sec"), folder, "task.yaml: max_agent_timeout_sec"),
    )


def _read_toml(folder: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise TaskRefused(folder, "reading task.toml needs Python 3.11 or the tomli package",
                              "unsupported") from None
    try:
        return tomllib.loads(_read_text(folder / "task.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskRefused(folder, f"task.toml is not valid TOML ({exc})") from None


def _table(config: Mapping[str, Any], name: str, folder: Path) -> Mapping[str, Any]:
    table = config.get(name, {})
    if not isinstance(table, Mapping):
        raise TaskRefused(folder, f"task.toml: [{name}] must be a table")
    return table


def _refuse_harbor_needs(folder: Path, config: Mapping[str, Any]) -> None:
    """Refuse what task.toml asks for that the sandbox does not offer."""
    environment = _table(config, "environment", folder)
    gpus = environment.get("gpus", 0)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        raise TaskRefused(folder, f"task.toml: [environment] gpus must be a whole number; got {gpus!r}")
    if gpus:
        raise TaskRefused(folder, f"task.toml asks for {gpus} GPU{'s' if gpus > 1 else ''} ([environment] gpus)", "gpu")
    # allow_internet = true is Harbor's default, and Harbor writes it out in every task.toml it saves
    # (Terminal-Bench 2.0's included): it says nothing of what the task needs, so it is not read.
    for section in ("environment", "agent", "verifier"):
        table = _table(config, section, folder)
        if table.get("network_mode") in ("public", "allowlist") or table.get("allowed_hosts"):
            raise TaskRefused(folder, f"task.toml asks for the network ([{section}] network_mode = "
                              f"{table.get('network_mode', 'allowlist')!r})", "network")
    for key in ("mcp_servers", "healthcheck"):
        if environment.get(key):
            raise TaskRefused(folder, f"task.toml needs a service started with its container ([environment] {key})",
                              "services")
    if config.get("steps"):
        raise TaskRefused(folder, "task.toml has [[steps]] (a task in several steps, each with its own check), "
                          "which arlkit does not read", "unsupported")
    if _table(config, "verifier", folder).get("env"):
        raise TaskRefused(folder, "task.toml: its verifier takes variables from the host ([verifier] env), which "
                          "the sandbox does not pass", "unsupported")


def load_harbor(folder: Path) -> TerminalTask:
    """The Harbor task in ``folder`` (the Terminal-Bench 2.0 layout)."""
    config = _read_toml(folder)
    _require_pytest(folder)
    if not (folder / "instruction.md").is_file() or not _read_text(folder / "instruction.md").strip():
        raise TaskRefused(folder, "has no instruction.md (the task's instruction)")
    instruction = _read_text(folder / "instruction.md").strip()
    _refuse_harbor_needs(folder, config)
    _refuse_other_services(folder, folder / "environment", "main")
    tests = folder / "tests"
    if not tests.is_dir():
        raise TaskRefused(folder, "has no tests/", "no-tests")
    if not (tests / "test.sh").is_file():
        raise TaskRefused(folder, "has no tests/test.sh (the verifier's script)", "no-tests")
    script = _read_text(tests / "test.sh")
    check = _replaced_check(folder, tests, script, "tests/test.sh", reward=True)
    if check is None:
        _refuse_if_offline(folder, script, "tests/test.sh")
        check = _HARBOR_CHECK
    solve = folder / "solution" / "solve.sh"
    if not solve.is_file() or not _read_text(solve).strip():
        raise TaskRefused(folder, "has no solution/solve.sh (the reference solution)", "no-solution")
    context, dockerfile = _image_source(folder, folder / "environment", "main")
    _refuse_image(folder, context, dockerfile)
    archive = _pack_app(app_files(context, dockerfile) or [])  # [] without a Dockerfile: /app starts empty
    metadata = _table(config, "metadata", folder)
    return TerminalTask(
        folder.name, str(metadata.get("category") or "harbor"), instruction, archive, (_read_text(solve).strip(),),
        check, _pack_files(tests), "harbor", "persistent",
        check_timeout_s=_seconds(_table(config, "verifier", folder).get("timeout_sec"), folder,
                                 "task.toml: [verifier] timeout_sec"),
        agent_timeout_s=_seconds(_table(config, "agent", folder).get("timeout_sec"), folder,
                                 "task.toml: [agent] timeout_sec"),
    )
