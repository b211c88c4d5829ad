"""A persistent shell session on a task folder: one sandbox for a whole trajectory.

A session is one sandbox started with :meth:`arlkit.sandbox.Sandbox.start` and left running. Inside
it, two programs run side by side, each in pid and mount namespaces of its own
(:class:`arlkit.sandbox.NestedProgram`): the agent's side, one long-lived ``bash``
(:mod:`arlkit.envs.terminal._shell`), and the check side, the driver in session mode
(:mod:`arlkit.envs.terminal._driver`), which this class talks to. Both see the task folder
(``/app``) and share the network namespace, so a server the agent started answers the check on
``127.0.0.1``; neither sees the other's processes or private folders (``/tmp``, ``/tests``,
``/logs``). So nothing the agent leaves running can see, signal or rewrite the check, its tests
or its reward file; it can only serve (or change) what the check reads from the folder and the
network, which is the work being checked (docs/sandbox.md, "Persistent sessions").

Every method returns a result, never raises on anything the agent did: a session whose shell
driver a command killed is rebuilt from the folder as it is (``restarted``), and a session that
cannot answer at all ends with ``error`` set. :meth:`close` ends everything; so does the
sandbox's parent-death signal when the calling process dies.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
import select
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arlkit.envs.terminal.checker import CheckResult, CheckStep, check_request, judge_check
from arlkit.envs.terminal.workspace import DRIVER_SOURCE, ROOT, CommandLimits, CommandResult, parse_command_fields
from arlkit.sandbox import NestedProgram, Sandbox, SandboxError, SandboxProcess

__all__ = ["SHELL_SOURCE", "ShellSession"]

SHELL_SOURCE = DRIVER_SOURCE + "\n" + Path(__file__).with_name("_shell.py").read_text(encoding="utf-8")
"""The shell's program: the driver's source (its helpers), then the shell's; run with the argument ``shell``."""
_MARGIN_S = 15.0  # the sandbox's start, packing the folder, and the relay, beside a command's own time
_START_S = 60.0


class ShellSession:
    """One persistent shell on the task folder ``archive`` (started in ``cwd``)."""

    def __init__(self, sandbox: Sandbox, archive: bytes, cwd: str = ROOT) -> None:
        self._sandbox = sandbox
        self._process: SandboxProcess | None = None
        self._nonce = ""
        self._buffer = b""
        self.error = ""
        self._open(archive, cwd)

    def _open(self, archive: bytes, cwd: str) -> None:
        python = self._sandbox.config.python or sys.executable
        self._nonce = secrets.token_hex(16)
        self._buffer = b""
        nested = NestedProgram((python, "-I", "-c", SHELL_SOURCE, "shell"), {"PATH": "/usr/bin:/bin"}, ("/tests", "/logs"),
                               (ROOT,))
        try:
            self._process = self._sandbox.start(
                [python, "-s", "main.py"], files={"main.py": DRIVER_SOURCE, "workspace.tar": archive}, nested=nested
            )
        except (SandboxError, OSError) as exc:
            self.error = f"the session could not start: {exc}"
            return
        request = {"nonce": self._nonce, "root": ROOT, "cwd": cwd, "session": True}
        reply = self._exchange(request, _START_S)
        if reply is None or not reply.get("ready"):
            self._fail("the session's shell did not start")

    def _fail(self, why: str) -> None:
        detail = self._process.failure() if self._process is not None else ""
        self.error = f"{why}: {detail}" if detail else why
        self.close()

    def _exchange(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send one request line; the reply (the line after the nonce), or ``None`` when the
        session is gone or silent past ``timeout_s``."""
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            return None
        try:
            process.stdin.write((json.dumps(message) + "\n").encode())
            process.stdin.flush()
        except OSError:
            return None
        deadline = time.monotonic() + timeout_s
        prefix = self._nonce.encode() + b" "
        fd = process.stdout.fileno()
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                if line.startswith(prefix):
                    try:
                        reply = json.loads(line[len(prefix):])
                    except ValueError:
                        return None
                    return reply if isinstance(reply, dict) else None
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buffer += chunk

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.alive()

    def run(self, command: str, limits: CommandLimits) -> CommandResult:
        """Run ``command`` in the session's shell."""
        if not self.alive:
            return CommandResult(None, "", "", error=f"the shell session is not running ({self.error or 'closed'})")
        ask = {
            "op": "command", "command": command, "timeout_s": limits.timeout_s, "keep_bytes": limits.keep_bytes,
            "max_output_bytes": limits.max_output_bytes, "max_archive_bytes": limits.max_archive_bytes,
        }
        start = time.monotonic()
        reply = self._exchange(ask, limits.timeout_s + _MARGIN_S)
        duration = time.monotonic() - start
        if reply is None:
            self._fail("the shell session stopped answering")
            return CommandResult(None, "", "", error=self.error, duration_s=duration)
        if reply.get("error") == "session_lost":
            return self._rebuild(reply, duration)
        try:
            return parse_command_fields(reply, duration)
        except (ValueError, TypeError, KeyError) as exc:
            return CommandResult(None, "", "", error=f"the command's result could not be read: {exc}", duration_s=duration)

    def _rebuild(self, reply: dict[str, Any], duration: float) -> CommandResult:
        """The command killed the shell's driver: start a new session on the folder as it is."""
        try:
            archive = base64.b64decode(str(reply.get("archive", "")), validate=True)
        except (binascii.Error, ValueError):
            archive = b""
        self.close()
        self.error = ""
        self._open(archive, ROOT)
        if self.error:
            return CommandResult(None, "", "", error=self.error, duration_s=duration)
        return CommandResult(137, "", "", restarted=True, shell_exited=True, duration_s=duration)

    def check(self, steps: Sequence[CheckStep], support: bytes, limits: CommandLimits) -> CheckResult:
        """Run the check ``steps`` beside the live shell (with ``support`` unpacked at ``/tests``)."""
        if not self.alive:
            return CheckResult(False, error=f"the shell session is not running ({self.error or 'closed'})")
        ask = {**check_request(steps, limits), "op": "check", "support": base64.b64encode(support).decode("ascii")}
        keep = ask["keep_bytes"]
        start = time.monotonic()
        reply = self._exchange(ask, limits.timeout_s + _MARGIN_S)
        duration = time.monotonic() - start
        if reply is None:
            return CheckResult(False, error="the check's result was lost", duration_s=duration)
        return judge_check(steps, reply, keep, duration)

    def archive(self) -> bytes | None:
        """The task folder as it is now (a tar archive), or ``None`` when the session cannot say."""
        reply = self._exchange({"op": "archive"}, _START_S) if self.alive else None
        try:
            return base64.b64decode(str(reply["archive"]), validate=True) if reply else None
        except (binascii.Error, ValueError, KeyError):
            return None

    def close(self) -> None:
        """End the session: every process in it, its uid slot and its folder (idempotent)."""
        if self._process is not None:
            self._process.close()
            self._process = None

    def __enter__(self) -> ShellSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
