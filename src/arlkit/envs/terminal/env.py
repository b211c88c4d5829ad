"""Terminal tasks in the sandbox (docs/environments.md#terminal; RT App. C.3 uses Terminal-Bench).

Episode semantics:

- The task folder is ``/app`` inside the sandbox; each trajectory works on its own copy (kept by
  the environment as an archive, :mod:`arlkit.envs.terminal.workspace`). Observation 0 lists it.
- Each action is one shell command (bash; a multi-line script counts as one command). Stateless
  (``session``): it runs in a fresh sandbox on the folder as the previous command left it,
  starting in the directory where the previous command ended (when that is inside ``/app``);
  files persist, environment variables, shell functions and processes do not (whatever a command
  leaves running is stopped when it returns; the observation says so). Persistent: one shell lives
  for the whole trajectory (:mod:`arlkit.envs.terminal.session`), so all of them carry over. The observation is the exit code and the first
  ``output_chars`` characters of stdout and of stderr, with how much was cut.
- ``submit`` ends the episode: the task's check runs on a copy of the folder in a sandbox of its
  own (:mod:`arlkit.envs.terminal.checker`; hidden from the agent), or, in a persistent session,
  beside the live shell out of its reach; every step passing is success
  (reward 1). An episode that runs out of turns without ``submit`` scores 0, like one whose check
  fails.
- Invalid actions (no action, an empty or over-long command, anything after the end) change
  nothing. A command whose result cannot be used (the folder grew past ``max_workspace_mb``, or
  the command killed the shell running it) is a valid action that leaves the folder unchanged.

Oracle (docs/algorithms.md#oracles): the reference path. On it (every command so far is the
reference solution's next one), the next reference command, or ``submit`` after the last; the
shortest solution length is the commands left plus one; off the path it is unknown (``None``,
success probability 0 as a lower bound). The reference's length plus one is the structural bound
of docs/metrics.md#expected-optimum.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from arlkit.envs.answers import answer_folders
from arlkit.envs.parsing import parse_tagged_action
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.sandboxed import env_sandbox, refuse_derived
from arlkit.envs.terminal.checker import CheckResult, run_check
from arlkit.envs.terminal.session import ShellSession
from arlkit.envs.terminal.tasks import BENCHMARK_SOURCES, SHIPPED_DIR, TIERS, TaskSetReport, TerminalTask, load_task_set, split_tasks
from arlkit.envs.terminal.workspace import ROOT, SCRATCH_DIRS, CommandLimits, CommandResult, archive_digest, run_command
from arlkit.sandbox import Sandbox, SandboxConfig

__all__ = ["SUBMIT", "TerminalConfig", "TerminalEnv", "format_command_result"]

GAMMA = 0.95
SUBMIT = "submit"
_FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n(.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True)
class TerminalConfig:
    """Configuration of the terminal environment.

    Attributes:
        data_dir: a folder of task folders (arlkit, Terminal-Bench or Harbor layout,
            :mod:`arlkit.envs.terminal.tasks`), or one task folder; empty for arlkit's shipped tasks.
            A folder that cannot load is skipped (:attr:`TerminalEnv.load_report` says why).
        tiers: keep only tasks of these tiers (shipped: files, text, build); empty keeps all.
        split_seed: seeds the train/test split (:func:`~arlkit.envs.terminal.tasks.split_tasks`).
        test_fraction: share of each tier in the test split.
        t_max: the family's full turn budget T_max.
        command_timeout_s: wall-clock limit of one command.
        check_timeout_s: wall-clock limit of the checker (a task's own limit, where it has one, wins).
        output_chars: characters of stdout and of stderr shown per observation (each).
        max_command_chars: longer commands are invalid actions.
        max_workspace_mb: largest task folder (as an archive) a command may leave; the sandbox's
            largest file (twice it) and ``/tmp`` and ``/app`` sizes (four times it) follow it.
        session: ``stateless`` (each command in a fresh sandbox on the folder as the previous one
            left it), ``persistent`` (one shell per trajectory: variables, the working directory and
            background processes carry over; :mod:`arlkit.envs.terminal.session`), or ``auto``
            (what each task declares; Terminal-Bench and Harbor tasks are persistent).
        sandbox: limits and isolation of the sandbox commands and checks run in
            (``sandbox.memory_mb``, 1024 here; ``sandbox.min_isolation``, which must not be ``none``:
            the task folder at ``/app`` needs a namespaced level; 64 processes; 1024 uid slots, as a
            persistent session holds its slot for the whole trajectory). Its ``wall_time_s``,
            ``cpu_time_s``, ``max_output_bytes``, ``max_file_mb`` and ``tmpfs_mb`` follow the
            options above (:mod:`arlkit.envs.sandboxed`).
    """

    data_dir: str = ""
    tiers: tuple[str, ...] = ()
    split_seed: int = 0
    test_fraction: float = 1 / 3
    t_max: int = 16
    command_timeout_s: float = 10.0
    check_timeout_s: float = 30.0
    output_chars: int = 2000
    max_command_chars: int = 16_000
    max_workspace_mb: int = 8
    session: Literal["auto", "stateless", "persistent"] = "auto"
    sandbox: SandboxConfig = field(
        default_factory=lambda: SandboxConfig(memory_mb=1024, max_processes=64, uid_slots=1024)
    )

    def __post_init__(self) -> None:
        if self.session not in ("auto", "stateless", "persistent"):
            raise ValueError(f"unknown session {self.session!r}; valid choices: auto, stateless, persistent")
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction}")
        if not (self.command_timeout_s > 0 and self.check_timeout_s > 0):
            raise ValueError("command_timeout_s and check_timeout_s must be > 0")
        if self.output_chars < 100 or self.max_command_chars < 100 or self.max_workspace_mb < 1:
            raise ValueError("output_chars >= 100, max_command_chars >= 100 and max_workspace_mb >= 1 are required")
        if self.sandbox.min_isolation == "none":
            raise ValueError("the terminal environment needs a namespaced sandbox (sandbox.min_isolation unshare or bwrap)")
        timeouts = "command_timeout_s and check_timeout_s"
        refuse_derived(self.sandbox, {"wall_time_s": timeouts, "cpu_time_s": timeouts,
                                      "max_output_bytes": "output_chars and max_workspace_mb",
                                      "max_file_mb": "max_workspace_mb", "tmpfs_mb": "max_workspace_mb"})
        if not self.data_dir:
            unknown = sorted(set(self.tiers) - set(TIERS))
            if unknown:
                raise ValueError(f"unknown tiers {unknown}; valid choices: {', '.join(TIERS)}")


def _cut(text: str, shown: int, total_bytes: int) -> str:
    if len(text) <= shown and len(text.encode("utf-8", "replace")) >= total_bytes:
        return text
    return f"{text[:shown]}\n[... output cut: {total_bytes} bytes in all, the first {min(shown, len(text))} characters shown ...]"


def format_command_result(result: CommandResult, shown: int, timeout_s: float) -> str:
    """The observation of one command."""
    if result.error == "workspace_limit":
        return "The command's changes were discarded: the task folder grew past its size limit. Nothing changed."
    if result.error:
        return f"The command failed to run: {result.error}. The task folder is unchanged."
    if result.restarted and result.shell_exited:
        return ("The command stopped the shell session. A new session started on the task folder as it is: "
                "variables and background processes are gone, files stay.")
    parts = [f"Exit code: {result.exit_code}"]
    if result.timed_out:
        parts.append(f"(the command ran past its {timeout_s:g} s limit and was stopped)")
    if result.output_limit:
        parts.append("(the command wrote too much output and was stopped)")
    if result.restarted:
        parts.append("(every process of the session was stopped and a new shell started in the same directory: "
                     "variables and background processes are gone, files stay)")
    elif result.shell_exited:
        parts.append("(the command ended the shell; a new shell started in the same directory, and what ran "
                     "in the background still runs)")
    if result.over_limit:
        parts.append("(the task folder is now larger than its size limit: the check will see it as it is)")
    if result.background:
        parts.append("(processes the command left running were stopped)")
    if result.stdout_bytes:
        parts.append("stdout:\n" + _cut(result.stdout, shown, result.stdout_bytes))
    if result.stderr_bytes:
        parts.append("stderr:\n" + _cut(result.stderr, shown, result.stderr_bytes))
    if not result.stdout_bytes and not result.stderr_bytes:
        parts.append("(no output)")
    if result.left_root:
        parts.append(f"(the command ended outside {ROOT}; the next command starts in {ROOT})")
    elif result.cwd != ROOT:
        parts.append(f"Working directory: {result.cwd}")
    return "\n".join(parts)


class TerminalEnv:
    """One shell command per turn on a private copy of the task folder, in the sandbox."""

    name = "terminal"
    blocking_steps = True  # a step is a sandbox run: the engine steps several at once

    def __init__(self, config: TerminalConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        self._tasks: list[TerminalTask] | None = None
        self._report: TaskSetReport | None = None
        self._sandbox: Sandbox | None = None
        self._task: Task | None = None
        self._spec: TerminalTask | None = None
        self._archive = b""
        self._cwd = ROOT
        self._commands: list[str] = []
        self._observation = ""
        self._done = self._solved = False
        self._last_check: CheckResult | None = None
        self._session: ShellSession | None = None
        self._digest: str | None = None

    # -- tasks ---------------------------------------------------------------------------------
    def all_tasks(self) -> list[TerminalTask]:
        """Every task of the configured set and tiers (loaded once; folders that cannot load are
        skipped, :attr:`load_report` lists them)."""
        if self._tasks is None:
            tasks, self._report = load_task_set(self.config.data_dir or None)
            if self.config.tiers:
                tasks = [t for t in tasks if t.tier in self.config.tiers]
            self._tasks = tasks
        return self._tasks

    @property
    def load_report(self) -> TaskSetReport | None:
        """What loading ``data_dir`` did (tasks loaded, folders skipped and why); ``None`` for the
        shipped tasks."""
        self.all_tasks()
        return self._report if self.config.data_dir else None

    def summary_notes(self, tasks: Sequence[Task]) -> list[str]:
        """The task folders of ``data_dir`` that were skipped, for ``summary.md``."""
        report = self.load_report
        if report is None or not report.skipped:
            return []
        return [f"- terminal: {report.headline()}", *(f"  - `{s.name}`: {s.reason}" for s in report.skipped)]

    @property
    def splits(self) -> tuple[str, ...]:
        """A set of Terminal-Bench or Harbor tasks is a benchmark: all of it is the test split."""
        return ("test",) if self._benchmark_only() else ("train", "test")

    def _benchmark_only(self) -> bool:
        return bool(self.config.data_dir) and all(t.source in BENCHMARK_SOURCES for t in self.all_tasks())

    def tasks(self, split: str, n: int) -> list[Task]:
        if self._benchmark_only():
            if split != "test":
                raise ValueError(f"a Terminal-Bench or Harbor task set has only a test split (asked for {split!r})")
            chosen = list(self.all_tasks())
        else:
            chosen = split_tasks(self.all_tasks(), split, self.config.split_seed, self.config.test_fraction)
        if n < 0 or n > len(chosen):
            raise ValueError(f"only {len(chosen)} {split} tasks exist (asked for {n})")
        return [Task(t.task_id, t.to_payload()) for t in chosen[:n]]

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox commands run in (built on first use)."""
        if self._sandbox is None:
            slowest = max(self.config.command_timeout_s, self.config.check_timeout_s)
            hidden = [SHIPPED_DIR] + ([self.config.data_dir] if self.config.data_dir else [])
            self._sandbox = Sandbox(env_sandbox(
                self.config.sandbox,
                wall_time_s=slowest + 15.0, cpu_time_s=int(slowest) + 5,
                max_file_mb=self.config.max_workspace_mb * 2, tmpfs_mb=self.config.max_workspace_mb * 4,
                scratch_dirs=SCRATCH_DIRS, hide_paths=answer_folders(hidden),
            ))
        return self._sandbox

    def _persistent(self) -> bool:
        """Whether the current task runs in a persistent shell session."""
        if self.config.session != "auto":
            return self.config.session == "persistent"
        return self._require().session == "persistent"

    def _live_session(self) -> ShellSession:
        """The trajectory's shell session, started on the task folder at first use."""
        if self._session is None:
            self._session = ShellSession(self.sandbox, self._archive, self._cwd)
        return self._session

    def close(self) -> None:
        """End the trajectory's shell session, if any (every process in it); idempotent."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def _limits(self, timeout_s: float) -> CommandLimits:
        keep = self.config.output_chars * 4 + 16
        return CommandLimits(timeout_s=timeout_s, keep_bytes=keep, max_archive_bytes=self.config.max_workspace_mb << 20)

    # -- episode -------------------------------------------------------------------------------
    def _require(self) -> TerminalTask:
        if self._spec is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._spec

    def reset(self, task: Task, seed: int) -> str:
        self.close()
        self._digest = None
        self._task = task
        self._spec = TerminalTask.from_payload(task.payload)
        self._archive = self._spec.archive
        self._cwd = ROOT
        self._commands = []
        self._done = self._solved = False
        self._last_check = None
        listing = self._spec.listing()
        shown = "\n".join(f"  {name}" for name in listing[:40])
        more = f"\n  ... and {len(listing) - 40} more" if len(listing) > 40 else ""
        contents = f"Its files:\n{shown}{more}" if listing else "It is empty."
        self._observation = f"You are in {ROOT}, the task folder. {contents}"
        return self._observation

    def parse_action(self, reply: str) -> ParsedAction:
        parsed = parse_tagged_action(reply)
        if parsed.action is None:
            return parsed
        fenced = _FENCE.match(parsed.action.strip())
        command = fenced.group(1) if fenced else parsed.action
        if not command.strip():
            return ParsedAction(None, "the command is empty", parsed.strict_format)
        return ParsedAction(command, None, parsed.strict_format)

    def step(self, action: str) -> StepResult:
        spec = self._require()
        if self._done:
            return StepResult("The episode is over.", 0.0, True, False, False)
        command = action.strip() if isinstance(action, str) else ""
        if not command:
            return StepResult("Invalid action: the command is empty.", 0.0, False, False, False)
        if len(command) > self.config.max_command_chars:
            message = f"Invalid action: the command has {len(command)} characters; the limit is {self.config.max_command_chars}."
            return StepResult(message, 0.0, False, False, False)
        if command.lower() == SUBMIT:
            return self._submit(spec)
        limits = self._limits(self.config.command_timeout_s)
        if self._persistent():
            result = self._live_session().run(command, limits)
            if result.error is None:
                self._digest, self._cwd = result.digest, result.cwd
        else:
            result = run_command(self.sandbox, self._archive, command, cwd=self._cwd, limits=limits)
            if result.archive is not None:
                self._archive, self._cwd = result.archive, result.cwd
        self._commands.append(command)
        self._observation = format_command_result(result, self.config.output_chars, self.config.command_timeout_s)
        return StepResult(self._observation, 0.0, False, False, True)

    def _submit(self, spec: TerminalTask) -> StepResult:
        if self._persistent():
            limits = self._limits(spec.check_timeout_s or self.config.check_timeout_s)
            result = self._live_session().check(spec.check, spec.support, limits)
            self.close()
        else:
            result = self.check(self._archive, spec)
        self._last_check = result
        self._done, self._solved = True, result.passed
        verdict = "passed" if self._solved else "failed"
        self._observation = f"Submitted. The task's checker {verdict}."
        return StepResult(self._observation, 1.0 if self._solved else 0.0, True, self._solved, True)

    def check(self, archive: bytes, spec: TerminalTask | None = None) -> CheckResult:
        """The check's verdict on the task folder ``archive`` (default task: the current one), in a
        sandbox of its own: no process of a session is there."""
        spec = spec or self._require()
        limits = self._limits(spec.check_timeout_s or self.config.check_timeout_s)
        return run_check(self.sandbox, archive, spec.check, limits=limits, support=spec.support)

    @property
    def last_check(self) -> CheckResult | None:
        """The check's result after ``submit`` (each step's output, for debugging a task)."""
        return self._last_check

    def render(self) -> str:
        return self._observation or "No task: call reset first."

    def prompt_text(self) -> PromptText:
        spec = self._require()
        limit = f"{self.config.command_timeout_s:g} s"
        if self._persistent():
            carry = ("Your shell session lasts the whole task: files, environment variables, the working directory "
                     "and processes you start in the background (with &) carry over from one command to the next. "
                     f"There is no network, and commands cannot read input. Each command may run {limit}; one that "
                     "runs longer is stopped with every process of the session, and a new shell starts.")
        else:
            carry = ("Files you change stay changed; the next command starts in the directory where the previous one "
                     "ended. Environment variables and background processes do not carry over, there is no network, "
                     f"and commands cannot read input. Each command may run {limit}.")
        instruction = (
            f"You work in a Linux shell inside a sandbox, in the task folder {ROOT}. Each turn you run one shell "
            f"command (bash; a multi-line script counts as one command) and see its exit code and output. {carry} "
            f"When the task is done, send {SUBMIT}: a hidden checker then decides whether it is solved."
            f"\n\nTASK: {spec.instruction}"
        )
        action_format = (
            "Write one shell command inside the action tags, for example <action>ls -la</action>, or "
            f"<action>{SUBMIT}</action> to finish."
        )
        return PromptText(instruction, action_format)

    # -- state ---------------------------------------------------------------------------------
    def state_key(self) -> str:
        """The task, the folder's content and the working directory; in a persistent session also
        the commands so far (they decide which processes and variables are alive)."""
        task_id = self._task.task_id if self._task else "-"
        done = ":done" if self._done else ""
        if self._task is not None and self._persistent() and self._commands:
            history = hashlib.sha256("\0".join(self._commands).encode()).hexdigest()[:16]
            return f"{task_id}@{self._digest}:{self._cwd}:{history}{done}"
        return f"{task_id}@{archive_digest(self._archive)}:{self._cwd}{done}"

    def snapshot(self) -> dict[str, Any]:
        return {"task": self._task, "archive": self._archive, "cwd": self._cwd, "commands": list(self._commands),
                "observation": self._observation, "done": self._done, "solved": self._solved, "digest": self._digest}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Return to ``snapshot``. A persistent session cannot be copied: a new one replays the
        snapshot's commands from the task's start (the processes they started run again)."""
        self.close()
        self._task = snapshot["task"]
        self._spec = TerminalTask.from_payload(self._task.payload) if self._task else None
        self._archive, self._cwd = snapshot["archive"], snapshot["cwd"]
        self._commands = list(snapshot["commands"])
        self._observation = snapshot["observation"]
        self._done, self._solved = bool(snapshot["done"]), bool(snapshot["solved"])
        self._digest = snapshot.get("digest")
        if self._spec is not None and self._persistent() and self._commands and not self._done:
            self._archive, self._cwd = self._spec.archive, ROOT
            limits = self._limits(self.config.command_timeout_s)
            for command in self._commands:
                result = self._live_session().run(command, limits)
                if result.error is None:
                    self._digest, self._cwd = result.digest, result.cwd

    @property
    def archive(self) -> bytes:
        """The task folder as it is now (a tar archive)."""
        if self._session is not None:
            return self._session.archive() or self._archive
        return self._archive

    # -- oracle (the reference path) -----------------------------------------------------------
    def _position(self) -> int | None:
        solution = self._require().solution
        k = len(self._commands)
        return k if k <= len(solution) and tuple(self._commands) == solution[:k] else None

    def shortest_solution_length(self) -> int | None:
        if self._done:
            return 0 if self._solved else None
        k = self._position()
        return None if k is None else len(self._require().solution) - k + 1

    def optimal_actions(self, remaining: int) -> list[str]:
        k = self._position()
        if self._done or k is None:
            return []
        solution = self._require().solution
        return [solution[k] if k < len(solution) else SUBMIT]

    def action_values(self, remaining: int) -> dict[str, float]:
        d = self.shortest_solution_length()
        value = GAMMA ** (d - 1) if d is not None and 1 <= d <= remaining else 0.0
        return {a: value for a in self.optimal_actions(remaining)}

    def success_probability(self, remaining: int) -> float:
        if self._done:
            return 1.0 if self._solved else 0.0
        d = self.shortest_solution_length()
        return 1.0 if d is not None and d <= remaining else 0.0


@register_env("terminal", TerminalConfig)
def _make_terminal(config: TerminalConfig) -> TerminalEnv:
    return TerminalEnv(config)
