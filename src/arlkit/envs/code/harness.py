"""The test harness that runs *inside* the sandbox: one launch runs every test of one program.

Standard library only; it never imports arlkit. The parent writes ``program.py`` (untrusted) and
``tests.json`` (test *inputs* only: expected outputs never enter the sandbox, so a program cannot
read them from the harness's memory) and runs this file as the sandbox's ``main.py``. For each
test the harness forks; the child wires the test's input to fd 0 and pipes to fds 1 and 2, runs
the compiled program (a stdin/stdout test runs it as ``__main__``; a function-call test runs it as
a module, then calls the function, or the method of a ``Solution`` class, with the arguments) and
reports a function's return value as JSON on fd 3. The parent enforces a per-test wall clock and
output cap, kills the child's process group, and prints one JSON line per test:

``{"i": 0, "status": "ok"|"error"|"timeout"|"memory"|"killed"|"output_limit"|"not_run",
"stdout": "...", "value": <json>, "error": "..."}``

The harness makes itself non-dumpable first, so that a test child (same uid) can neither ptrace
it nor open ``/proc/<harness>/fd/1`` to forge result lines.
"""

import json
import os
import select
import signal
import sys
import time
import traceback

PR_SET_DUMPABLE = 4
_ERROR_TAIL = 2000


def _non_dumpable():
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except Exception:  # best effort: the sandbox still holds without it
        pass


def _jsonable(value, depth=0):
    """A JSON-friendly copy of a return value (tuples and sets become lists)."""
    if depth > 50:
        raise ValueError("value nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_jsonable(v, depth + 1) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    raise TypeError(f"return value of type {type(value).__name__} is not JSON-serialisable")


def _print_program_traceback():
    """The current exception's traceback without the harness's own frames (those before the
    program's first frame): the agent sees its program's error, not the harness."""
    etype, value, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename != "program.py":
        tb = tb.tb_next
    traceback.print_exception(etype, value, tb)


def _child(code, test, stdin_fd, out_w, err_w, val_w):
    """Runs in the forked child; never returns."""
    status = 0
    try:
        os.setpgid(0, 0)
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(val_w, 3)
        os.closerange(4, 1 << 16)
        namespace = {"__name__": "__main__" if test["kind"] == "stdio" else "solution", "__builtins__": __builtins__}
        try:
            exec(code, namespace)
            if test["kind"] == "call":
                name = test["fn_name"]
                fn = namespace.get(name)
                if fn is None and isinstance(namespace.get("Solution"), type):
                    fn = getattr(namespace["Solution"](), name, None)
                if not callable(fn):
                    raise NameError(f"the program defines no function {name!r}")
                value = _jsonable(fn(*test["args"]))
                payload = json.dumps(value, ensure_ascii=False).encode("utf-8")
                view = memoryview(payload)
                while view:
                    view = view[os.write(3, view):]
        except SystemExit as exc:
            code_ = exc.code
            status = 0 if code_ is None or code_ == 0 else (code_ if isinstance(code_, int) else 1)
            if not isinstance(code_, int) and code_ is not None:
                sys.stderr.write(f"{code_}\n")
        except BaseException:
            _print_program_traceback()
            status = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                status = status or 1
    finally:
        os._exit(status)


def _run_one(code, test, timeout_s, cap):
    # An unnamed file in the working directory (the sandbox's size-capped tmpfs): the sandbox's
    # seccomp filter refuses memfd_create (docs/sandbox.md).
    stdin_fd = os.open(".", os.O_TMPFILE | os.O_RDWR, 0o600)
    os.write(stdin_fd, test.get("input", "").encode("utf-8"))
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    val_r, val_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(code, test, stdin_fd, out_w, err_w, val_w)
    for fd in (stdin_fd, out_w, err_w, val_w):
        os.close(fd)
    buffers = {out_r: bytearray(), err_r: bytearray(), val_r: bytearray()}
    open_fds = set(buffers)
    deadline = time.monotonic() + timeout_s
    exited_at = 0.0
    status = None
    over = False
    timed_out = False
    while not over:
        now = time.monotonic()
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status, exited_at = st, now
        if status is not None and (not open_fds or now >= exited_at + 0.2):
            break  # exited, output drained (or held open by a stray grandchild)
        if status is None and now >= deadline:
            timed_out = True
            break
        limit = deadline if status is None else exited_at + 0.2
        if not open_fds:
            time.sleep(min(limit - now, 0.005))
            continue
        ready, _, _ = select.select(list(open_fds), [], [], min(limit - now, 0.02))
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
                continue
            buffers[fd] += chunk
            if len(buffers[fd]) > cap:
                over = True
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if status is None:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        _, status = os.waitpid(pid, 0)
    for fd in buffers:
        os.close(fd)
    stdout = bytes(buffers[out_r][:cap]).decode("utf-8", "replace")
    stderr = bytes(buffers[err_r]).decode("utf-8", "replace")
    result = {"stdout": stdout, "error": stderr[-_ERROR_TAIL:]}
    if over:
        result["status"] = "output_limit"
    elif timed_out:
        result["status"] = "timeout"
    elif os.WIFSIGNALED(status):
        result["status"] = "timeout" if os.WTERMSIG(status) == signal.SIGXCPU else "killed"
        result["error"] += f"\nkilled by signal {os.WTERMSIG(status)}"
    elif os.WEXITSTATUS(status) != 0:
        result["status"] = "memory" if "MemoryError" in stderr[-_ERROR_TAIL:] else "error"
    else:
        result["status"] = "ok"
        if test["kind"] == "call":
            try:
                result["value"] = json.loads(bytes(buffers[val_r]).decode("utf-8"))
            except ValueError:
                result["status"] = "error"
                result["error"] += "\nthe function returned no value the harness could read"
    return result


def main():
    _non_dumpable()
    with open("tests.json", encoding="utf-8") as fh:
        spec = json.load(fh)
    with open("program.py", encoding="utf-8", errors="replace") as fh:
        source = fh.read()
    emit = sys.stdout.write
    try:
        code = compile(source, "program.py", "exec")
    except (SyntaxError, ValueError) as exc:
        message = "".join(traceback.format_exception_only(type(exc), exc))
        for i in range(len(spec["tests"])):
            emit(json.dumps({"i": i, "status": "error", "stdout": "", "error": message}) + "\n")
        return
    budget_end = time.monotonic() + spec["budget_s"]
    for i, test in enumerate(spec["tests"]):
        remaining = budget_end - time.monotonic()
        if remaining <= 0:
            result = {"status": "not_run", "stdout": "", "error": "not run: the step's time budget was spent"}
        else:
            result = _run_one(code, test, min(spec["timeout_s"], remaining), spec["max_output"])
        result["i"] = i
        emit(json.dumps(result, ensure_ascii=False) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
