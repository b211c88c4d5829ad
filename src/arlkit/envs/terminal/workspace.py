"""One shell command on a task folder, in the sandbox: what goes in and what comes back.

The task folder lives in the parent as a tar archive (:func:`pack_folder`: sorted, times and owners
cleared, so equal folders give equal archives and hash to the same state key). Each command (and
each check, :mod:`arlkit.envs.terminal.checker`) is one sandbox run of the driver (:mod:`arlkit.envs.terminal._driver`): it unpacks the archive at
``/app`` (a private tmpfs, :attr:`~arlkit.sandbox.SandboxConfig.scratch_dirs`), runs the command
with bash in the remembered working directory, stops what the command left running, and packs the
folder again. The parent never unpacks an archive: it only stores it, hashes it and hands it to
the next run. Everything that comes back is untrusted and checked here; a result that cannot be
read is a :class:`CommandResult` with ``error`` set, never an exception.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from arlkit.envs.terminal._driver import pack_folder
from arlkit.sandbox import Sandbox

__all__ = [
    "ROOT", "SCRATCH_DIRS", "CommandLimits", "CommandResult", "DRIVER_SOURCE", "archive_digest", "exchange", "pack_folder",
    "parse_command_fields", "run_command",
]

ROOT = "/app"
"""Where the task folder is inside the sandbox (where Terminal-Bench tasks expect it)."""
SCRATCH_DIRS = (ROOT, "/tests", "/logs")
"""The sandbox's private writable folders: the task folder, a check's tests, and Harbor's ``/logs/verifier``."""

DRIVER_SOURCE = Path(__file__).with_name("_driver.py").read_text(encoding="utf-8")
_RESULT_MARGIN_S = 10.0  # unpacking, packing and the interpreter's start, beside the command's own time


@dataclass(frozen=True)
class CommandLimits:
    """Limits of one command.

    Attributes:
        timeout_s: wall-clock limit of the command; it is then killed (exit code 124).
        keep_bytes: bytes of stdout and of stderr kept (each); the rest is counted, not kept.
        max_output_bytes: stdout and stderr together past this stop the command (``output_limit``).
        max_archive_bytes: largest task folder (as a tar archive) a command may leave; a larger
            one is refused and the folder stays as it was (``error == "workspace_limit"``).
    """

    timeout_s: float = 10.0
    keep_bytes: int = 65536
    max_output_bytes: int = 8 * 1024 * 1024
    max_archive_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True)
class CommandResult:
    """What one command did.

    Attributes:
        exit_code: the command's exit status (124 on timeout, 128 + n when killed by signal n).
        stdout: the first ``keep_bytes`` of its standard output (decoded, invalid bytes replaced).
        stderr: the same for standard error.
        stdout_bytes: how many bytes it wrote to stdout in all (likewise ``stderr_bytes``).
        timed_out: it ran past ``timeout_s``.
        output_limit: it wrote more than ``max_output_bytes``.
        background: processes it left running were stopped when it returned.
        cwd: the working directory the next command starts in (inside ``ROOT``).
        left_root: the command ended outside the task folder (the next one starts at ``ROOT``).
        archive: the task folder afterwards; ``None`` when ``error`` is set (the folder is unchanged).
        error: why the result is unusable (``workspace_limit``, a lost result, an unpacking error).
        duration_s: the sandbox run's wall time.
        restarted: (persistent session) the command was stopped with every process of the session
            and a new shell started: variables and background processes are gone, files stay.
        shell_exited: (persistent session) the command ended the shell; a new one started.
        digest: (persistent session) the task folder's content hash afterwards (the folder stays
            in the session: ``archive`` is ``None``).
        over_limit: (persistent session) the task folder is larger than ``max_archive_bytes``.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    timed_out: bool = False
    output_limit: bool = False
    background: bool = False
    cwd: str = ROOT
    left_root: bool = False
    archive: bytes | None = None
    error: str | None = None
    duration_s: float = 0.0
    restarted: bool = False
    shell_exited: bool = False
    digest: str | None = None
    over_limit: bool = False


def archive_digest(archive: bytes) -> str:
    """Short content hash of a task folder's archive (the state key's part)."""
    return hashlib.sha256(archive).hexdigest()[:16]


def exchange(
    sandbox: Sandbox,
    request: dict,
    files: dict[str, str | bytes],
    *,
    timeout_s: float,
    max_output_bytes: int,
) -> tuple[dict | None, str, float]:
    """One sandbox run of the driver: ``(fields, error, duration_s)``, where ``fields`` is the
    driver's JSON object (``None`` with ``error`` saying why when its line is missing or unreadable)."""
    nonce = secrets.token_hex(16)
    run = sandbox.run_python(
        DRIVER_SOURCE,
        stdin=json.dumps({**request, "nonce": nonce, "root": ROOT}) + "\n",
        files=files,
        wall_time_s=timeout_s + _RESULT_MARGIN_S,
        max_output_bytes=max_output_bytes,
    )
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith(nonce + " ")), None)
    if line is None:
        why = {"timeout": "the sandbox's wall clock ran out", "output_limit": "the result was too large"}
        reason = why.get(run.outcome, f"the command stopped the shell that ran it ({run.outcome})")
        return None, f"the command's result was lost: {reason}", run.duration_s
    try:
        fields = json.loads(line[len(nonce) + 1 :])
    except ValueError as exc:
        return None, f"the command's result could not be read: {exc}", run.duration_s
    if not isinstance(fields, dict):
        return None, "the command's result could not be read: not an object", run.duration_s
    return fields, "", run.duration_s


def run_command(
    sandbox: Sandbox,
    archive: bytes,
    command: str,
    *,
    cwd: str = ROOT,
    limits: CommandLimits = CommandLimits(),
) -> CommandResult:
    """Run ``command`` on the task folder ``archive`` starting in ``cwd``; never raises on any
    command (a sandbox that cannot start at all still raises ``SandboxError``)."""
    request = {
        "cwd": cwd, "timeout_s": limits.timeout_s, "keep_bytes": limits.keep_bytes,
        "max_output_bytes": limits.max_output_bytes, "max_archive_bytes": limits.max_archive_bytes,
    }
    fields, error, duration_s = exchange(
        sandbox, request, {"workspace.tar": archive, "command.sh": command}, timeout_s=limits.timeout_s,
        # base64 of the archive, and each kept stream JSON-escaped (up to 6 characters a byte)
        max_output_bytes=4 * limits.max_archive_bytes // 3 + 12 * limits.keep_bytes + 65536,
    )
    if fields is None:
        return CommandResult(None, "", "", error=error, duration_s=duration_s)
    try:
        return parse_command_fields(fields, duration_s)
    except (ValueError, TypeError, KeyError, binascii.Error) as exc:
        return CommandResult(None, "", "", error=f"the command's result could not be read: {exc}", duration_s=duration_s)


def parse_command_fields(fields: dict, duration_s: float) -> CommandResult:
    """A command's result from the driver's JSON object (``ValueError``, ``TypeError`` or
    ``KeyError`` when it is malformed). A persistent session sends the folder's ``digest``
    instead of the folder."""
    if fields.get("error") and fields["error"] != "workspace_limit" and "exit_code" not in fields:
        return CommandResult(None, "", "", error=str(fields["error"]), duration_s=duration_s)
    archive = fields.get("archive")
    error = fields.get("error")
    digest = fields.get("digest")
    if digest is not None and not isinstance(digest, str):
        raise TypeError("the folder's digest is not text")
    if error is None and digest is None and not isinstance(archive, str):
        raise ValueError("no task folder came back")
    exit_code = fields["exit_code"]
    if not isinstance(exit_code, int):
        raise TypeError("the exit code is not a number")
    cwd = str(fields.get("cwd") or ROOT)
    if not (cwd == ROOT or cwd.startswith(ROOT + "/")):
        cwd = ROOT
    return CommandResult(
        exit_code=exit_code,
        stdout=str(fields.get("stdout", "")),
        stderr=str(fields.get("stderr", "")),
        stdout_bytes=int(fields.get("stdout_bytes", 0)),
        stderr_bytes=int(fields.get("stderr_bytes", 0)),
        timed_out=bool(fields.get("timed_out")),
        output_limit=bool(fields.get("output_limit")),
        background=bool(fields.get("background")),
        cwd=cwd,
        left_root=bool(fields.get("left_root")),
        archive=base64.b64decode(archive, validate=True) if error is None and digest is None else None,
        error=str(error) if error else None,
        duration_s=duration_s,
        restarted=bool(fields.get("restarted")),
        shell_exited=bool(fields.get("shell_exited")),
        digest=digest,
        over_limit=bool(fields.get("over_limit")),
    )
