"""Runs one shell command on a task folder, inside the sandbox (staged as ``main.py``; not imported).

Standard input carries one JSON request: ``nonce``, ``root`` (the task folder, ``/app``), ``cwd``,
``timeout_s``, ``keep_bytes``, ``max_output_bytes``, ``max_archive_bytes``. The working directory
holds ``workspace.tar`` (the task folder so far), ``command.sh`` (the command) and, for a checker,
``support.tar`` (files unpacked under ``$ARLKIT_SUPPORT``, outside the task folder). The driver reads
them into memory, deletes them, makes itself non-dumpable (a command running under the same uid
can then neither read its memory nor write to its stdout through ``/proc``), unpacks the task
folder, runs the command with bash, keeps the first ``keep_bytes`` of stdout and of stderr,
stops every process the command left behind, packs the task folder again (sorted, times and
owners cleared, so equal folders give equal archives) and prints one line: the nonce, a space,
and a JSON object. Anything the command does can only change that folder or make the line
missing, which the parent treats as a failed step.
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
import time

_CWD_FILE = "/tmp/.arlkit-cwd"
_COMMAND_FILE = "/tmp/.arlkit-command.sh"
_RUNNER = 'trap \'pwd > {cwd_file}\' EXIT\ncd "$ARLKIT_CWD" 2>/dev/null || cd "$ARLKIT_ROOT"\n. {command_file}\n'
_BIN_DIR = "/tmp/.arlkit-bin"
_SUPPORT_DIR = "/tmp/.arlkit-support"  # files a checker needs beside the task folder (Terminal-Bench tests)


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


def _run(request, command_env):
    keep = int(request["keep_bytes"])
    limit = int(request["max_output_bytes"])
    proc = subprocess.Popen(
        ["/bin/bash", "--noprofile", "--norc", "-c", _RUNNER.format(cwd_file=_CWD_FILE, command_file=_COMMAND_FILE)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=command_env,
        cwd=request["root"], start_new_session=True,
    )
    streams = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    totals = dict.fromkeys(streams, 0)
    for fd in streams:
        os.set_blocking(fd, False)
    deadline = time.monotonic() + float(request["timeout_s"])
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


def main():
    request = json.loads(sys.stdin.readline())
    nonce = request["nonce"]
    with open("workspace.tar", "rb") as fh:
        workspace = fh.read()
    with open("command.sh", "rb") as fh:
        command = fh.read()
    support = b""
    if os.path.exists("support.tar"):
        with open("support.tar", "rb") as fh:
            support = fh.read()
    for name in ("workspace.tar", "command.sh", "support.tar", "main.py"):
        if os.path.exists(name):
            os.remove(name)
    _non_dumpable()
    root = request["root"]
    result = {"error": None}
    try:
        _unpack(workspace, root)
        if support:
            _unpack(support, _SUPPORT_DIR)
    except (tarfile.TarError, OSError, ValueError) as exc:
        result["error"] = "the task folder could not be restored: %s" % exc
        print(nonce, json.dumps(result), flush=True)
        return
    with open(_COMMAND_FILE, "wb") as fh:
        fh.write(command)
    os.makedirs(_BIN_DIR, exist_ok=True)
    if not os.path.exists("/usr/bin/python3") and not os.path.exists("/usr/local/bin/python3"):
        os.symlink(sys.executable, os.path.join(_BIN_DIR, "python3"))
    command_env = dict(os.environ)
    command_env.update(PATH=_BIN_DIR + ":" + os.environ.get("PATH", "/usr/bin:/bin"), HOME=root,
                       ARLKIT_ROOT=root, ARLKIT_CWD=request["cwd"], PWD=request["cwd"],
                       ARLKIT_SUPPORT=_SUPPORT_DIR, ARLKIT_PYTHON=sys.executable,
                       # the task folder's mount belongs to root: tell git to trust it (command scope)
                       GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory", GIT_CONFIG_VALUE_0="*")
    result.update(_run(request, command_env))
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
    print(nonce, json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
