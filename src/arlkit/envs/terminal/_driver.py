"""Runs one shell command, a task's check, or the check side of a session, on a task folder inside the sandbox (staged as ``main.py``; not imported).

Standard input carries one JSON request: ``nonce``, ``root`` (the task folder, ``/app``), ``cwd``,
``timeout_s``, ``keep_bytes``, ``max_output_bytes``, ``max_archive_bytes`` and, for a check,
``steps`` (each ``{"run": script, "exit": status or null}``). The working directory holds
``workspace.tar`` (the task folder so far), ``command.sh`` (a command) and, for a check,
``support.tar`` (the task's tests, unpacked at ``/tests``, outside the task folder; ``/logs/verifier``
is made empty for a reward file). The driver
reads them into memory, deletes them, makes itself non-dumpable (a program running under the same
uid can then neither read its memory nor write to its stdout through ``/proc``), and unpacks the
task folder.

A command runs with bash in the remembered working directory; the driver keeps the first
``keep_bytes`` of stdout and of stderr, stops every process the command left behind, packs the
task folder again (sorted, times and owners cleared, so equal folders give equal archives) and
prints one line: the nonce, a space, and a JSON object. Anything the command does can only change
that folder or make the line missing, which the parent treats as a failed step.

A check (docs/sandbox.md, "What a checker may assume") first removes every symbolic link whose
target resolves outside the task folder (and again after each step), then runs its steps in order,
each in a fresh bash in the task folder with a clean environment (a new empty ``HOME`` and
``TMPDIR``, no variable a program could have set), stopping at the first step whose exit status is
not the one expected. After each step every other process in the sandbox is killed, so nothing a
step started survives into the next. The line carries each step's exit status and output; the
expected outputs stay in the parent, which compares them.

In session mode (``session`` in the request; docs/sandbox.md, "Persistent sessions") the driver is
the check side of a persistent session: the agent's shell (:mod:`arlkit.envs.terminal._shell`)
runs beside it in namespaces of its own, reached through the pipes in ``$ARLKIT_NEST_FDS``. After
setting the shell up, the driver answers one request per line until its input closes: ``command``
(relayed to the shell; the reply adds the folder's content hash), ``check`` (the steps above, run
on the live folder, with the tests unpacked at ``/tests``) and ``archive`` (the folder as it is).
A command that kills the shell's side is answered ``session_lost`` with the folder, from which the
parent starts a new session.
"""

import base64
import ctypes
import io
import json
import os
import select
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

_CWD_FILE = "/tmp/.arlkit-cwd"
_COMMAND_FILE = "/tmp/.arlkit-command.sh"
_RUNNER = 'trap \'pwd > {cwd_file}\' EXIT\ncd "$ARLKIT_CWD" 2>/dev/null || cd "$ARLKIT_ROOT"\n. {command_file}\n'
_BIN_DIR = "/tmp/.arlkit-bin"
_SUPPORT_DIR = "/tests"  # the task's tests (Terminal-Bench, Harbor), a scratch folder of the check's sandbox
_REWARD_DIR = "/logs/verifier"  # where a Harbor test script writes reward.txt or reward.json


def _non_dumpable():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def _unpack(data, root):
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        archive.extractall(root, filter="tar")


def pack_folder(root):
    """The folder ``root`` as a normalised tar archive (also used by the parent for task files)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:", format=tarfile.PAX_FORMAT) as archive:
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(folder, name)
                try:
                    info = archive.gettarinfo(path, os.path.relpath(path, root))
                except OSError:
                    continue
                if info is None or not (info.isreg() or info.isdir() or info.issym() or info.islnk()):
                    continue  # sockets, fifos, devices are not kept
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                info.mode &= 0o777
                info.pax_headers = {}
                if info.isreg():
                    try:
                        with open(path, "rb") as fh:
                            archive.addfile(info, fh)
                    except OSError:
                        continue
                else:
                    archive.addfile(info)
    return buffer.getvalue()


def _run(script, env, request, timeout_s):
    """Run ``script`` with bash in the task folder; its exit status and (kept) output."""
    keep = int(request["keep_bytes"])
    limit = int(request["max_output_bytes"])
    proc = subprocess.Popen(
        ["/bin/bash", "--noprofile", "--norc", "-c", script],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        cwd=request["root"], start_new_session=True,
    )
    streams = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    totals = dict.fromkeys(streams, 0)
    for fd in streams:
        os.set_blocking(fd, False)
    deadline = time.monotonic() + timeout_s
    timed_out = output_limit = False
    open_fds = list(streams)
    while open_fds:
        exited = proc.poll() is not None
        wait = 0.0 if exited else max(0.0, min(0.05, deadline - time.monotonic()))
        ready, _, _ = select.select(open_fds, [], [], wait)
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                open_fds.remove(fd)
                continue
            totals[fd] += len(chunk)
            room = keep - len(streams[fd])
            if room > 0:
                streams[fd] += chunk[:room]
        if sum(totals.values()) > limit:
            output_limit = True
            break
        if exited and not ready:
            break  # the command is over; a background job may hold the pipes open
        if not exited and time.monotonic() >= deadline:
            timed_out = True
            break
    if not (timed_out or output_limit):
        try:  # both pipes closed: the program may still be on its way out (coreutils close them at exit)
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    background = False
    if proc.poll() is not None:  # the shell is over and reaped: whatever is left of its group ran in the background
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            background = True
        except (ProcessLookupError, PermissionError):
            pass
    else:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()
    code = proc.returncode
    out, err = (bytes(streams[fd]) for fd in (proc.stdout.fileno(), proc.stderr.fileno()))
    return {
        "exit_code": 124 if timed_out else (128 - code if code < 0 else code),
        "stdout": out.decode("utf-8", "replace"),
        "stderr": err.decode("utf-8", "replace"),
        "stdout_bytes": totals[proc.stdout.fileno()],
        "stderr_bytes": totals[proc.stderr.fileno()],
        "timed_out": timed_out,
        "output_limit": output_limit,
        "background": background,
    }


def _final_cwd(root):
    """Where the next command starts, and whether the command ended outside the task folder."""
    try:
        with open(_CWD_FILE, encoding="utf-8", errors="replace") as fh:
            cwd = os.path.realpath(fh.read().strip())
    except OSError:
        return root, False
    inside = cwd == root or cwd.startswith(root + "/")
    return (cwd, False) if inside and os.path.isdir(cwd) else (root, True)


def _kill_others():
    """SIGKILL every process this one may signal (``kill(-1)``: all of its pid namespace but
    itself and the init), reaping its own children, until none is left (``True``) or two seconds
    have passed (``False``). Only in a fresh pid namespace: elsewhere it would reach the caller's
    other processes."""
    for _ in range(200):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return True
        except OSError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.01)
    return False


def _sweep():
    """Kill every process of this uid in the sandbox but this one; whether none is left.

    Only in a fresh pid namespace (where this driver has one of the first pids): ``kill(-1)``
    elsewhere would reach the caller's other processes, so there it kills nothing and says no."""
    if os.getpid() > 16:
        return False
    return _kill_others() and not _others_alive(os.getpid())


def _others_alive(me):
    uid = os.getuid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (1, me):
            continue
        try:
            with open("/proc/%s/status" % entry, encoding="ascii", errors="replace") as fh:
                status = dict(line.split(":", 1) for line in fh.read().splitlines() if ":" in line)
        except OSError:
            continue
        if status.get("State", "").strip().startswith("Z"):
            continue  # a zombie runs nothing
        if int(status.get("Uid", "-1").split()[0]) == uid:
            return True
    return False


def _drop_links_out(root):
    """Remove every symbolic link under ``root`` whose target resolves outside it (to ``/dev/stdin``,
    ``/proc``, the checker's own files ...); links inside the folder stay. The number removed."""
    removed = 0
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                continue
            target = os.path.realpath(path)
            if target != root and not target.startswith(root + "/"):
                os.unlink(path)
                removed += 1
    return removed


def _read_inputs():
    """The request and the staged files, read into memory and deleted from the disk."""
    request = json.loads(sys.stdin.readline())
    staged = {}
    for name in ("workspace.tar", "command.sh", "support.tar"):
        if os.path.exists(name):
            with open(name, "rb") as fh:
                staged[name] = fh.read()
    for name in ("workspace.tar", "command.sh", "support.tar", "main.py"):
        if os.path.exists(name):
            os.remove(name)
    return request, staged


def _base_env(root, bin_dir):
    """The launcher's minimal environment (nothing a program set) with ``python3`` on the path."""
    os.makedirs(bin_dir, exist_ok=True)
    for name in ("python3", "python"):  # the sandbox's interpreter, where the system has none by that name
        if not any(os.path.exists(os.path.join(d, name)) for d in ("/usr/bin", "/usr/local/bin", "/bin")):
            os.symlink(sys.executable, os.path.join(bin_dir, name))
    env = dict(os.environ)
    env.update(PATH=bin_dir + ":" + os.environ.get("PATH", "/usr/bin:/bin"), ARLKIT_ROOT=root,
               ARLKIT_PYTHON=sys.executable,
               # the task folder's mount belongs to root: tell git to trust it (command scope)
               GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory", GIT_CONFIG_VALUE_0="*")
    return env


def _command(request, staged, root):
    with open(_COMMAND_FILE, "wb") as fh:
        fh.write(staged.get("command.sh", b""))
    env = _base_env(root, _BIN_DIR)
    env.update(HOME=root, ARLKIT_CWD=request["cwd"], PWD=request["cwd"])
    result = _run(_RUNNER.format(cwd_file=_CWD_FILE, command_file=_COMMAND_FILE), env, request, float(request["timeout_s"]))
    if _others_alive(os.getpid()):  # left the command's process group (setsid, a double fork): stopped before the
        _sweep()                    # folder is saved, so nothing writes to it while it is packed
        result["background"] = True
    cwd, moved_out = _final_cwd(root)
    result["cwd"], result["left_root"] = cwd, moved_out
    if not os.path.isdir(root):
        os.makedirs(root, exist_ok=True)  # the command removed the task folder itself
    try:
        archive = pack_folder(root)
    except (tarfile.TarError, OSError) as exc:
        result["error"] = "the task folder could not be saved: %s" % exc
        archive = b""
    if len(archive) > int(request["max_archive_bytes"]):
        result["error"] = "workspace_limit"
        archive = b""
    result["archive"] = base64.b64encode(archive).decode("ascii") if archive else None
    return result


def _check(request, root):
    links_out = _drop_links_out(root)
    deadline = time.monotonic() + float(request["timeout_s"])
    steps = []
    for step in request["steps"]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            steps.append({"exit_code": 124, "timed_out": True, "stdout": "", "stderr": "", "stdout_bytes": 0,
                          "stderr_bytes": 0})
            break
        # made after the sweep, so no program of an earlier step can have planted anything in them
        env = _base_env(root, tempfile.mkdtemp(prefix="bin-", dir="/tmp"))
        for name in ("BASH_ENV", "ENV", "CDPATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONHOME"):
            env.pop(name, None)
        env.update(HOME=tempfile.mkdtemp(prefix="home-", dir="/tmp"), TMPDIR=tempfile.mkdtemp(prefix="tmp-", dir="/tmp"),
                   PWD=root, PYTHONNOUSERSITE="1", TEST_DIR=_SUPPORT_DIR,
                   GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
        outcome = _run(step["run"], env, request, remaining)
        if not _sweep():  # a survivor could change what the next steps see: no verdict
            return {"error": "a process the check started could not be stopped"}
        links_out += _drop_links_out(root)  # nor may a link a step's program made lead the next ones out
        steps.append(outcome)
        if outcome["timed_out"] or (step.get("exit") is not None and outcome["exit_code"] != int(step["exit"])):
            break
    return {"steps": steps, "links_out": links_out}


def _digest(root, max_archive_bytes):
    """The task folder's content hash (the parent's state key) and whether it is past its limit."""
    import hashlib

    archive = pack_folder(root)
    return {"digest": hashlib.sha256(archive).hexdigest()[:16], "over_limit": len(archive) > max_archive_bytes}


class _ShellLink:
    """The session's shell (:mod:`arlkit.envs.terminal._shell`), reached through the launcher's pipes."""

    def __init__(self):
        to_shell, from_shell = (int(fd) for fd in os.environ.pop("ARLKIT_NEST_FDS").split(","))
        self.write_fd, self.read_fd = to_shell, from_shell
        self.buffer = b""

    def ask(self, message, timeout_s):
        """Send one request; its reply, or ``None`` when the shell is gone or silent past ``timeout_s``."""
        try:
            os.write(self.write_fd, (json.dumps(message) + "\n").encode())
        except OSError:
            return None
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.read_fd], [], [], remaining)[0]:
                return None
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            return None
        return reply if isinstance(reply, dict) else None


def _session(request, root):
    """Session mode: the check side of a persistent session. Sets up the shell, then answers one
    request per line (``command``, ``check``, ``archive``) until standard input closes."""
    link = _ShellLink()
    env = _base_env(root, _BIN_DIR)
    env.update(HOME=root, PWD=request["cwd"])
    links = {os.path.join(_BIN_DIR, n): sys.executable for n in ("python3", "python") if os.path.lexists(os.path.join(_BIN_DIR, n))}
    yield {"ready": link.ask({"env": env, "cwd": request["cwd"], "links": links}, 30.0) is not None}
    for line in sys.stdin:
        ask = {**json.loads(line), "root": root}
        try:
            yield _answer(link, ask, root)
        except (OSError, ValueError, KeyError, tarfile.TarError) as exc:
            yield {"error": "the session could not answer: %s" % exc}


def _answer(link, ask, root):
    if ask["op"] == "command":
        relay = {k: ask[k] for k in ("command", "timeout_s", "keep_bytes", "max_output_bytes")}
        reply = link.ask(relay, float(ask["timeout_s"]) + 10.0)
        if reply is None:  # a command killed the shell's driver: the parent starts a new session
            return {"error": "session_lost", "archive": base64.b64encode(pack_folder(root)).decode("ascii")}
        reply.update(_digest(root, int(ask["max_archive_bytes"])))
        return reply
    if ask["op"] == "check":
        if ask.get("support"):
            _unpack(base64.b64decode(ask["support"]), _SUPPORT_DIR)
        os.makedirs(_REWARD_DIR, exist_ok=True)
        return _check(ask, root)
    return {"archive": base64.b64encode(pack_folder(root)).decode("ascii")}


def main():
    request, staged = _read_inputs()
    nonce = request["nonce"]
    _non_dumpable()
    root = request["root"]
    result = {"error": None}
    try:
        _unpack(staged.get("workspace.tar", b""), root)
        if staged.get("support.tar"):
            _unpack(staged["support.tar"], _SUPPORT_DIR)
        if "steps" in request and os.path.isdir(os.path.dirname(_REWARD_DIR)):
            os.makedirs(_REWARD_DIR, exist_ok=True)
    except (tarfile.TarError, OSError, ValueError) as exc:
        result["error"] = "the task folder could not be restored: %s" % exc
        print(nonce, json.dumps(result), flush=True)
        return
    if request.get("session"):
        for reply in _session(request, root):
            print(nonce, json.dumps(reply), flush=True)
        return
    result.update(_check(request, root) if "steps" in request else _command(request, staged, root))
    print(nonce, json.dumps(result), flush=True)


if __name__ == "__main__" and sys.argv[1:] != ["shell"]:  # "shell": _shell.py's source follows this one
    main()
