"""A persistent shell on the task folder, inside the sandbox (not imported: its source runs after _driver.py's, whose helpers it uses).

It runs as the nested program of a session sandbox (:class:`arlkit.sandbox.NestedProgram`), in pid
and mount namespaces of its own: the check side of the session (:mod:`arlkit.envs.terminal._driver`,
session mode) sends it one JSON request per line on standard input and reads one JSON reply per
line on standard output. The first request is the shell's setup (``env``, ``cwd``); each later
one is a command (``command``, ``timeout_s``, ``keep_bytes``, ``max_output_bytes``).

One ``bash`` lives across commands, so variables, functions, the working directory and background
processes carry over, as in a terminal. A command is written to a file and sourced by the shell
with standard input from ``/dev/null``; the shell then writes the command's exit status and working
directory to a pipe of its own (descriptor 3, closed for the command). The reply holds the first
``keep_bytes`` of the standard output and error that arrived while the command ran, how much
arrived in all, the exit status and the working directory. A command that runs past ``timeout_s``
or writes more than ``max_output_bytes`` is stopped with every process of the session (``kill(-1)``
in this pid namespace) and a new shell starts in the same directory (``restarted``); a command that
ends the shell itself (``exit``) gets a new shell too, and what it left running stays.
"""

import json
import os
import select
import subprocess
import sys
import time

_COMMAND_FILE = "/tmp/.arlkit-command.sh"
_RUN = "{ . %s; } </dev/null 3>&-\nbuiltin printf '%%s %%s\\n' \"$?\" \"$PWD\" >&3\n" % _COMMAND_FILE
_DRAIN_S = 0.05  # output already written when the status arrives is read for this long at most


def _as_fd_3(fd):
    os.dup2(fd, 3)
    if fd != 3:
        os.close(fd)


class Shell:
    def __init__(self, env, cwd):
        self.env, self.cwd = env, cwd
        self.proc = None
        self.status_r = -1
        self.start()

    def start(self):
        status_r, status_w = os.pipe()
        cwd = self.cwd if os.path.isdir(self.cwd) else self.env.get("ARLKIT_ROOT", "/")
        self.proc = subprocess.Popen(
            ["/bin/bash", "--noprofile", "--norc", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=self.env, cwd=cwd, pass_fds=(status_w, 3),
            preexec_fn=lambda: _as_fd_3(status_w),
        )
        os.close(status_w)
        self.status_r = status_r
        for fd in (self.proc.stdout.fileno(), self.proc.stderr.fileno(), status_r):
            os.set_blocking(fd, False)

    def stop_all(self):
        """Kill every process of the session (all but this driver and the namespace's init)."""
        _kill_others()  # noqa: F821 - defined by _driver.py's source, which runs first
        self.close_pipes()

    def close_pipes(self):
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        os.close(self.status_r)

    def run(self, request):
        with open(_COMMAND_FILE, "w", encoding="utf-8", errors="replace") as fh:
            fh.write(request["command"])
        keep, limit = int(request["keep_bytes"]), int(request["max_output_bytes"])
        out, err = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        kept = {out: bytearray(), err: bytearray()}
        totals = {out: 0, err: 0}
        status = bytearray()
        reply = {"timed_out": False, "output_limit": False, "restarted": False, "shell_exited": False}
        try:
            self.proc.stdin.write(_RUN.encode())
            self.proc.stdin.flush()
        except OSError:
            pass  # the shell is gone: no status comes, handled below
        deadline = time.monotonic() + float(request["timeout_s"])
        done_at = None
        while True:
            now = time.monotonic()
            if done_at is None and now >= deadline:
                reply["timed_out"] = True
                break
            if done_at is not None and now >= done_at + _DRAIN_S:
                break
            wait = min(deadline, done_at + _DRAIN_S if done_at is not None else deadline) - now
            fds = [out, err] + ([self.status_r] if done_at is None else [])
            ready = select.select(fds, [], [], max(0.0, wait))[0]
            if not ready and done_at is not None:
                break
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if fd == self.status_r:
                    status += chunk
                    if b"\n" in status or not chunk:
                        done_at = time.monotonic()
                    continue
                totals[fd] += len(chunk)
                kept[fd] += chunk[: max(0, keep - len(kept[fd]))]
            if totals[out] + totals[err] > limit:
                reply["output_limit"] = True
                break
        line = bytes(status).split(b"\n", 1)[0].decode("utf-8", "replace")
        code, _, cwd = line.partition(" ")
        if reply["timed_out"] or reply["output_limit"]:
            self.stop_all()
            reply.update(exit_code=124 if reply["timed_out"] else 137, restarted=True)
            self.start()
        elif not code.isdigit():  # the command ended the shell
            self.proc.wait()
            self.close_pipes()
            rc = self.proc.returncode
            reply.update(exit_code=128 - rc if rc < 0 else rc, shell_exited=True)
            self.start()
        else:
            reply["exit_code"] = int(code)
            self.cwd = cwd
        reply.update(
            cwd=self.cwd, stdout=bytes(kept[out]).decode("utf-8", "replace"), stderr=bytes(kept[err]).decode("utf-8", "replace"),
            stdout_bytes=totals[out], stderr_bytes=totals[err],
        )
        return reply


def shell_main():
    setup = json.loads(sys.stdin.readline())
    for path, target in setup.get("links", {}).items():  # this side's /tmp is its own
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.lexists(path):
            os.symlink(target, path)
    shell = Shell(setup["env"], setup["cwd"])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(shell.run(json.loads(line))), flush=True)


if __name__ == "__main__" and sys.argv[1:] == ["shell"]:
    shell_main()
