"""Test scripts that only install a test runner and run pytest, read so that arlkit can run its own
pytest in their place (docs/environments.md#terminal).

Terminal-Bench's ``run-tests.sh`` and Harbor's ``tests/test.sh`` mostly share one shape: install a
test runner (``apt-get install curl``, uv's installer piped to ``sh``, ``uv venv`` or ``uv init``,
``uv add``, ``uv pip install`` or ``pip install`` of pytest and the packages the tests import),
run pytest once on the task's test files, and (``test.sh``) write 1 or 0 to
``/logs/verifier/reward.txt`` from pytest's exit status. Only the installing needs the network.
:func:`read_test_script` recognizes that shape, line by line, and says what pytest runs and what the
script installs; any other line (a download of test data, a build, a check of its own) leaves the
script unrecognized, and the task's script is then judged as it is.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["HELPERS", "REPORTING_PLUGINS", "PytestScript", "read_test_script"]

REPORTING_PLUGINS = frozenset({"pytest-json-ctrf", "pytest-json-report", "pytest-html", "pytest-sugar"})
"""Plugins that only report (a JSON or HTML file, a prettier summary): dropped with their options,
since they do not change which tests pass."""

HELPERS = {
    # What Terminal-Bench's harness puts in $TEST_DIR for a run-tests.sh that names them (read from the
    # task's tests/ when it holds them): install uv and pytest; run pytest on test_outputs.py.
    "setup-uv-pytest.sh": "apt-get update\napt-get install -y curl\n"
                          "curl -LsSf https://astral.sh/uv/install.sh | sh\nsource $HOME/.local/bin/env\n"
                          "uv init\nuv add pytest\n",
    "run-uv-pytest.sh": "uv run pytest $TEST_DIR/test_outputs.py -rA\n",
}


@dataclass(frozen=True)
class PytestScript:
    """What a recognized test script does.

    Attributes:
        paths: what pytest runs, relative to the tests folder (``.``: the folder itself).
        packages: the packages it installs besides pytest and its plugins (pip names).
        plugins: the pytest plugins it installs that can change the verdict (pip names).
        apt: the system packages it installs besides what fetching uv needs (``curl``).
        app_on_path: pytest runs as ``python -m pytest`` in ``/app``, which puts ``/app`` on the
            tests' import path.
        dropped: the reporting options and plugins left out (``--ctrf``, ``pytest-json-ctrf``).
    """

    paths: tuple[str, ...]
    packages: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    apt: tuple[str, ...] = ()
    app_on_path: bool = False
    dropped: tuple[str, ...] = ()


class _Unrecognized(Exception):
    pass


# -- splitting a script into simple commands ---------------------------------------------------------
_REDIRECT = re.compile(r"""(?<![^\s])(\d?)(&>>|&>|>>|>&|>|<)\s*("[^"]*"|'[^']*'|[^\s"'<>]+)""")


@dataclass
class _Command:
    words: list[str]
    redirects: list[tuple[str, str]]  # (operator, target)
    joined_by: str  # the separator before it: "", ";", "&&" or "||"
    in_helper: bool = False  # a line of one of Terminal-Bench's helpers


def _pieces(line: str) -> list[tuple[str, str]]:
    """``(separator before, text)`` of each command of one line: split at ``;``, ``&&`` and ``||``
    outside quotes, a comment dropped."""
    out: list[tuple[str, str]] = []
    start, sep, quote, i = 0, "", "", 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            break
        elif c == ";" or line.startswith(("&&", "||"), i):
            out.append((sep, line[start:i]))
            sep = ";" if c == ";" else line[i:i + 2]
            i += 0 if c == ";" else 1
            start = i + 1
        elif c == "&" and not line.startswith((">", "&>"), i - 1) and line[i + 1:i + 2] != ">":
            raise _Unrecognized("a command sent to the background")
        i += 1
    if quote:
        raise _Unrecognized("a quote left open")
    out.append((sep, line[start:i]))
    return [(s, t) for s, t in out if t.strip()]


def _commands(script: str) -> list[_Command]:
    commands = []
    for line in re.sub(r"\\\r?\n", " ", script).splitlines():
        for sep, text in _pieces(line):
            redirects = [(op, target.strip("\"'")) for _, op, target in _REDIRECT.findall(text)]
            try:
                words = shlex.split(_REDIRECT.sub(" ", text))
            except ValueError as exc:
                raise _Unrecognized(str(exc)) from None
            while words and words[0] in ("then", "else", "fi", "do", "done") and len(words) > 1:
                commands.append(_Command([words.pop(0)], [], sep))
                sep = ";"
            if words:
                commands.append(_Command(words, redirects, sep))
    return commands


# -- what the commands are ----------------------------------------------------------------------------
_TEST_DIR = re.compile(r"\$\{?TEST_DIR\}?")
_SAFE_PATH = re.compile(r"^[\w.+/-]+$")
_ENV_PREFIX = re.compile(r"^(DEBIAN_FRONTEND|PYTHONDONTWRITEBYTECODE|PYTHONUNBUFFERED|UV_[A-Z_]+|PIP_[A-Z_]+)=\S*$")
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[\w,.-]+\])?\s*((?:[<>=!~]=?|===)\s*[\w.*+!-]+\s*,?\s*)*$")
_UV_SCRIPT = re.compile(r"^https://(?:astral\.sh/uv(?:/[\w.-]+)?/install\.sh|"
                        r"github\.com/astral-sh/uv/releases/\S+/uv-installer\.sh)$")
_PIP_PREFIXES = (["pip", "install"], ["pip3", "install"], ["uv", "pip", "install"], ["uv", "add"],
                 ["python", "-m", "pip", "install"], ["python3", "-m", "pip", "install"])
_TOOLING = {"pip", "setuptools", "wheel", "uv", "pytest"}
_FETCH_TOOLS = {"curl", "ca-certificates", "wget", "gnupg"}
_INSTALL_FLAGS = {"-q", "-qq", "--quiet", "-U", "--upgrade", "--no-cache-dir", "--no-cache", "--break-system-packages",
                  "--system", "--user", "--pre", "--prefer-binary", "--disable-pip-version-check", "--no-input",
                  "--force-reinstall", "--dev", "--frozen", "--no-sync", "--no-deps", "-y", "--yes"}
_INSTALL_VALUED = {"--index-url", "-i", "--extra-index-url", "--python", "-p", "--find-links", "-f",
                   "--root-user-action", "--default-index", "--index"}
_UV_RUN_VALUED = {"--with": "package", "-w": "package", "--python": "", "-p": "", "--from": "package"}
_UV_RUN_FLAGS = {"--no-project", "--isolated", "--frozen", "--no-sync", "--active", "-q", "--quiet", "--no-cache",
                 "--offline"}
_PYTEST_NEUTRAL = re.compile(r"^(-r\w*|-[vqsxl]+|--exitfirst|--verbose|--quiet|--showlocals|--no-header|"
                             r"--no-summary|--disable-warnings|--disable-pytest-warnings|--full-trace|"
                             r"--tb=\w+|--color=\w+|--capture=\w+|--durations=\d+|--maxfail=\d+|"
                             r"-p\s*no:cacheprovider)$")
_PYTEST_NEUTRAL_VALUED = {"--tb", "--color", "--capture", "--durations", "--maxfail"}
_PYTEST_REPORTING = {"--ctrf", "--junitxml", "--junit-xml", "--json-report-file", "--html"}
_PYTEST_REPORTING_FLAGS = {"--json-report", "--self-contained-html"}


def _requirement(word: str) -> str:
    """The normalised name of a requirement (``Name[extra]==1.0``); unrecognized for a path, a URL,
    a requirements file."""
    match = _REQUIREMENT.match(word)
    if not match:
        raise _Unrecognized(f"an install of {word!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


class _Reader:
    """Reads the commands in order, keeping what pytest runs and what is installed."""

    def __init__(self, commands: list[_Command], reward: bool, helpers: Mapping[str, str]) -> None:
        self.commands, self.reward, self.helpers = commands, reward, helpers
        self.installed: list[str] = []
        self.apt: list[str] = []
        self.venvs = {".venv"}
        self.cwd_tests = False
        self.pytest: PytestScript | None = None
        self.status_var = ""  # a variable holding pytest's status
        self.reward_vars = {"/logs/verifier/reward.txt"}
        self.rewarded = False  # 1 is written when pytest passed
        self.after_pytest = ""  # the previous command was pytest: how its status reads ("$?", "${PIPESTATUS[0]}")

    # -- one command ----------------------------------------------------------------------------
    def read(self) -> PytestScript:
        i = 0
        while i < len(self.commands):
            command = self.commands[i]
            helper = self._helper(command)
            if helper is not None:  # Terminal-Bench's helpers: read as if their lines stood here
                self.commands[i:i + 1] = helper
                continue
            if command.words[0] == "if":
                i = self._block(i)
                continue
            if command.joined_by == "||" and self.after_pytest:
                raise _Unrecognized("a command run when pytest fails")  # $? would be its status
            if command.joined_by == "||" and command.words not in (["true"], [":"]):
                self._no_writes(command)
                if not self._installer(command.words):  # only another way to install
                    raise _Unrecognized("a command run when another fails")
            elif command.joined_by != "||":
                self._command(command, i == len(self.commands) - 1)
            i += 1
        if self.pytest is None:
            raise _Unrecognized("no pytest run")
        if self.reward and not self.rewarded:
            raise _Unrecognized("no reward written from pytest's status")
        return self.pytest

    def _helper(self, command: _Command) -> list[_Command] | None:
        """The lines of the Terminal-Bench helper ``command`` runs (``None``: it runs none)."""
        words = command.words
        name = _TEST_DIR.sub("/tests", words[-1]).removeprefix("/tests/")
        if len(words) != 2 or words[0] not in ("source", ".", "bash", "sh") or name not in HELPERS or name == words[-1]:
            return None
        if command.in_helper:
            raise _Unrecognized("a helper that runs a helper")
        commands = _commands(self.helpers.get(name, HELPERS[name]))
        if name.startswith("run") and commands and commands[-1].words[0] == "exit":
            commands.pop()  # run with bash: its exit ends that shell only
        for line in commands:
            line.in_helper = True
        return commands

    def _command(self, command: _Command, last: bool) -> None:
        words = list(command.words)
        was_after = self.after_pytest
        self.after_pytest = ""
        while words and _ENV_PREFIX.match(words[0]) and len(words) > 1:
            words.pop(0)
        head = words[0]
        status = self._pytest(words, command.redirects)
        if status:
            self.after_pytest = status
            return
        if len(words) == 1 and _ENV_PREFIX.match(head):
            return
        if len(words) == 1 and "=" in head and not head.startswith("="):
            return self._assignment(head, was_after)
        self._no_writes(command)
        if self._installer(words):
            if self.pytest is not None:
                raise _Unrecognized("an install after the tests ran")
            return
        if head == "exit" and len(words) <= 2 and last:
            return
        if head in ("set", "echo", "printf", "true", ":", "mkdir", "cd", "export", "rm"):
            return self._harmless(words)
        raise _Unrecognized(f"the command {head!r}")

    def _no_writes(self, command: _Command) -> None:
        """Refuse a write other than to /dev/null or a log under /logs; a reward of 0 written before
        the tests run is allowed (the reward stays 0 unless they pass)."""
        for op, target in command.redirects:
            if target in self.reward_vars or "reward" in target:
                zero = command.words[0] in ("echo", "printf") and command.words[-1] in ("0", "0.0")
                if not (op in (">", ">>") and zero and self.pytest is None and target in self.reward_vars):
                    raise _Unrecognized("a reward written outside the test of pytest's status")
            elif op == "<" or not (target in ("/dev/null", "1", "2") or target.startswith("/logs/")):
                raise _Unrecognized(f"a write to {target}")

    def _assignment(self, word: str, after_pytest: str) -> None:
        name, _, value = word.partition("=")
        if after_pytest and value == after_pytest:
            self.status_var = name
        elif value.startswith("/logs/verifier/reward."):
            self.reward_vars.add(f"${name}")
            self.reward_vars.add(f"${{{name}}}")
        elif not value.startswith("/logs/"):
            raise _Unrecognized(f"the variable {name}")

    def _harmless(self, words: list[str]) -> None:
        head, args = words[0], words[1:]
        if head == "set" and all(re.match(r"^([-+][Eeuxo]+|pipefail|errexit|nounset|xtrace)$", a) for a in args):
            return
        if head == "mkdir" and all(a == "-p" or a.startswith("/logs/") for a in args):
            return
        if head == "rm" and args and all(a.startswith("-") or a.startswith("/var/lib/apt/lists") for a in args):
            return
        if head == "cd" and len(args) == 1:
            place = _TEST_DIR.sub("/tests", args[0]).rstrip("/")
            if place in ("/app", "/tests"):
                self.cwd_tests = place == "/tests"
                return
        if head == "export" and all(_ENV_PREFIX.match(a) for a in args):
            return
        if head in ("echo", "printf", "true", ":"):
            return
        raise _Unrecognized(f"the command {' '.join(words)[:60]!r}")

    # -- installers ---------------------------------------------------------------------------------
    def _installer(self, words: list[str]) -> bool:
        head, args = words[0], words[1:]
        if "|" in words:
            return self._fetch_installer(words)
        if head in ("apt-get", "apt") and args:
            verb = [a for a in args if not a.startswith("-")]
            if verb and verb[0] in ("update", "clean", "autoremove"):
                return True
            if verb and verb[0] == "install":
                self.apt += [p.split("=")[0] for p in verb[1:] if p.split("=")[0] not in _FETCH_TOOLS]
                return True
            return False
        if head == "export" and len(args) == 1 and re.match(r"^PATH=.*(\.local/bin|\.cargo/bin)", args[0]):
            return True  # where uv's installer puts uv
        if head in ("source", ".") and len(args) == 1:
            target = args[0].replace("${HOME}", "$HOME").replace("/root", "$HOME")
            if target in ("$HOME/.local/bin/env", "$HOME/.cargo/env"):
                return True
            venv = re.sub(r"^\./", "", args[0]).removesuffix("/bin/activate")
            if args[0].endswith("/bin/activate") and venv in self.venvs:
                return True
            raise _Unrecognized(f"sourcing {args[0]}")
        prefix = next((p for p in _PIP_PREFIXES if words[:len(p)] == p), None)
        if prefix is not None:
            self._install(words[len(prefix):])
            return True
        if head == "uv" and args[:1] == ["venv"] or head in ("python", "python3") and args[:2] == ["-m", "venv"]:
            rest = args[1:] if head == "uv" else args[2:]
            places = [a for j, a in enumerate(rest) if not a.startswith("-") and
                      not (j and rest[j - 1] in ("-p", "--python", "--prompt"))]
            self.venvs.add(re.sub(r"^\./", "", places[0]) if places else ".venv")
            return True
        if head == "uv" and (args[:1] == ["init"] or args[:2] in (["python", "pin"], ["python", "install"])):
            return True
        return False

    def _fetch_installer(self, words: list[str]) -> bool:
        """``curl ... https://astral.sh/uv/.../install.sh | sh``: uv's installer."""
        left, _, right = " ".join(words).partition("|")
        fetch, run = left.split(), right.split()
        urls = [w for w in fetch if "://" in w]
        if (fetch and fetch[0] in ("curl", "wget") and len(urls) == 1 and _UV_SCRIPT.match(urls[0])
                and run and run[0] in ("sh", "bash") and all(a.startswith("-") or a == "--" for a in run[1:])):
            return True
        raise _Unrecognized("a download")

    def _install(self, args: list[str]) -> None:
        j = 0
        while j < len(args):
            word = args[j]
            if word.startswith("-"):
                name = word.split("=", 1)[0]
                if name in _INSTALL_VALUED:
                    j += 1 if "=" in word else 2
                    continue
                if word not in _INSTALL_FLAGS:
                    raise _Unrecognized(f"the install option {word}")
            else:
                self.installed.append(_requirement(word))
            j += 1

    # -- pytest ---------------------------------------------------------------------------------------
    def _pytest(self, words: list[str], redirects: list[tuple[str, str]]) -> str:
        """Whether ``words`` run pytest: if so, how its status reads next (``$?``; ``${PIPESTATUS[0]}``
        when its output goes through ``tee`` to a log), and what it runs is kept (once only)."""
        status = "$?"
        if "|" in words:
            at = words.index("|")
            tee = words[at + 1:]
            if not (tee[:1] == ["tee"] and len(tee) in (2, 3) and tee[-1].startswith("/logs/") and
                    tee[1:-1] in ([], ["-a"])):
                return ""
            words, status = words[:at], "${PIPESTATUS[0]}"
        module = False
        rest = words
        if rest[:2] in (["uv", "run"],) or rest[:1] == ["uvx"] or rest[:3] == ["uv", "tool", "run"]:
            rest = rest[3 if rest[1:2] == ["tool"] else (1 if rest[0] == "uvx" else 2):]
            while rest and rest[0].startswith("-"):
                option, _, value = rest[0].partition("=")
                if option in _UV_RUN_VALUED:
                    taken = value or (rest[1] if len(rest) > 1 else "")
                    if _UV_RUN_VALUED[option]:
                        self.installed.append(_requirement(taken))
                    rest = rest[1:] if value else rest[2:]
                elif option in _UV_RUN_FLAGS:
                    rest = rest[1:]
                else:
                    return ""
        if rest[:3] in (["python", "-m", "pytest"], ["python3", "-m", "pytest"]):
            module, rest = True, ["pytest", *rest[3:]]
        if not rest or rest[0] not in ("pytest", "py.test"):
            return ""
        if self.pytest is not None:
            raise _Unrecognized("a second pytest run")
        for op, target in redirects:
            if op == "<" or not (target in ("/dev/null", "1", "2") or target.startswith("/logs/")):
                raise _Unrecognized(f"pytest's output sent to {target}")
        paths, dropped = self._pytest_args(rest[1:])
        if not paths:
            raise _Unrecognized("pytest run on no test file")
        packages = [p for p in dict.fromkeys(self.installed) if p not in _TOOLING]
        plugins = [p for p in packages if p.startswith("pytest-")]
        dropped += [p for p in plugins if p in REPORTING_PLUGINS]
        self.pytest = PytestScript(
            paths=tuple(paths), packages=tuple(p for p in packages if not p.startswith("pytest-")),
            plugins=tuple(p for p in plugins if p not in REPORTING_PLUGINS), apt=tuple(dict.fromkeys(self.apt)),
            app_on_path=module and not self.cwd_tests, dropped=tuple(dict.fromkeys(dropped)))
        return status

    def _pytest_args(self, args: list[str]) -> tuple[list[str], list[str]]:
        paths: list[str] = []
        dropped: list[str] = []
        j = 0
        while j < len(args):
            word = args[j]
            option = word.split("=", 1)[0]
            if _PYTEST_NEUTRAL.match(word):
                j += 1
                continue
            if (word == "-p" and args[j + 1:j + 2] == ["no:cacheprovider"]) or option in _PYTEST_NEUTRAL_VALUED:
                j += 2  # an option and its value
                continue
            if option in _PYTEST_REPORTING or word in _PYTEST_REPORTING_FLAGS:
                dropped.append(option)
                j += 1 if "=" in word or word in _PYTEST_REPORTING_FLAGS else 2
                continue
            if word.startswith("-"):
                raise _Unrecognized(f"the pytest option {word}")
            paths.append(self._test_path(word))
            j += 1
        return paths, dropped

    def _test_path(self, word: str) -> str:
        path = _TEST_DIR.sub("/tests", word)
        if not path.startswith("/") and self.cwd_tests:
            path = "/tests/" + path
        path = re.sub(r"/+\.?$", "", path) or "/"
        if path == "/tests":
            return "."
        rel = path.removeprefix("/tests/")
        if rel == path or not _SAFE_PATH.match(rel) or ".." in rel.split("/"):
            raise _Unrecognized(f"pytest run on {word}")
        return rel

    # -- if blocks -------------------------------------------------------------------------------------
    def _block(self, i: int) -> int:
        """Read the ``if`` block starting at command ``i``; the index after its ``fi``."""
        cond = self.commands[i].words[1:]
        ends = [k for k in range(i + 1, len(self.commands)) if self.commands[k].words == ["fi"]]
        end = ends[0] if ends else len(self.commands)
        body = self.commands[i + 1:end]
        if end == len(self.commands) or not body or body[0].words != ["then"] or any(c.words[0] == "if" for c in body):
            raise _Unrecognized("an if block")
        split = next((k for k, c in enumerate(body) if c.words == ["else"]), len(body))
        then, other = body[1:split], body[split + 1:]
        was_after = self.after_pytest
        self.after_pytest = ""
        passed_first = self._status_test(cond, was_after)
        if passed_first is not None:
            self._reward_branch(then, passed_first)
            self._reward_branch(other, not passed_first)
        elif cond in (["[", "$PWD", "=", "/", "]"], ["[", "$PWD", "==", "/", "]"], ["[[", "$PWD", "==", "/", "]]"]):
            if other or not all(c.words[0] == "echo" or c.words[:2] == ["exit", "1"] for c in then):
                raise _Unrecognized("an if block")
        elif cond[:3] == ["!", "command", "-v"] and len(cond) == 4 and cond[3] in ("uv", "uvx", "curl", "pytest"):
            if other:
                raise _Unrecognized("an if block")
            for command in then:  # installs only when the runner is missing
                self._no_writes(command)
                if not self._installer(command.words):
                    raise _Unrecognized("an if block")
        else:
            raise _Unrecognized(f"the test {' '.join(cond)[:60]!r}")
        return end + 1

    def _status_test(self, cond: list[str], after_pytest: str) -> bool | None:
        """For a test of pytest's status (``[ $? -eq 0 ]``): whether its ``then`` branch is the one
        taken when pytest passed; ``None`` for another test."""
        if cond[:1] == ["test"]:
            cond = ["[", *cond[1:], "]"]
        if len(cond) != 5 or (cond[0], cond[4]) not in (("[", "]"), ("[[", "]]")) or cond[3] not in ("0", "0.0"):
            return None
        operand = cond[1]
        if not ((after_pytest and operand == after_pytest) or (self.status_var and operand in (
                f"${self.status_var}", f"${{{self.status_var}}}"))):
            return None
        return {"-eq": True, "==": True, "=": True, "-ne": False, "!=": False}.get(cond[2])

    def _reward_branch(self, commands: list[_Command], passed: bool) -> None:
        if not self.reward:
            raise _Unrecognized("a reward written by a Terminal-Bench script")
        for command in commands:
            words, targets = command.words, [t for op, t in command.redirects if op in (">", ">>")]
            if words[0] in ("echo", "printf") and all(t in ("/dev/null", "1", "2") for t in targets):
                continue  # a message
            value = words[-1] if len(words) >= 2 and words[0] in ("echo", "printf") else None
            if len(targets) != 1 or targets[0] not in self.reward_vars or value is None:
                raise _Unrecognized("a reward branch")
            number = {"1": 1, "1.0": 1, "0": 0, "0.0": 0}.get(value)
            if number is None or number != (1 if passed else 0):
                raise _Unrecognized(f"the reward {value!r}")
            self.rewarded = self.rewarded or number == 1


def read_test_script(script: str, *, reward: bool, helpers: Mapping[str, str] | None = None) -> PytestScript | None:
    """What ``script`` runs, when all it does is install a test runner, run pytest once on files of
    the tests folder (``$TEST_DIR``, ``/tests``) and, with ``reward`` (Harbor's ``test.sh``), write
    the reward from pytest's status (1 when it passed, 0 or nothing when it failed); ``None`` for
    any other script. ``helpers``: the task's own ``setup-uv-pytest.sh`` and ``run-uv-pytest.sh``
    (:data:`HELPERS` otherwise)."""
    try:
        return _Reader(_commands(script), reward, helpers or {}).read()
    except _Unrecognized:
        return None

