"""Re-run the hostile-input and fault probe families against this checkout and count what is contained.

    .venv/bin/python scripts/probe_hardening.py              # every family
    .venv/bin/python scripts/probe_hardening.py sandbox sql  # some of them

Each family tries a list of cases and reports ``tried / contained``; a case that is not contained is
printed with what happened. Exit status 1 when any case escaped. The test suite holds one test per
finding (tests/sandbox, tests/envs, tests/policies, tests/train, tests/cli); this script runs the
families wider and prints the counts quoted in the closing notes of hardening work.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from probes import ROOT, Family  # scripts/ is on sys.path when this runs as a script

SECRET = "arlkit-probe-secret-51c2e0"


# -- sandbox: hostile programs, planted answers, memory ------------------------------------------
HOSTILE = {
    "spin": ("while True:\n    pass\n", {"timeout"}),
    "fork bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", {"timeout", "killed", "error"}),
    "memory bomb": ("chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))\n", {"memory"}),
    "output flood": ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", {"output_limit"}),
    "file flood": ("n = 0\nwhile True:\n    open(f'f{n}', 'w').close()\n    n += 1\n", {"error", "timeout"}),
    "big file": ("with open('big', 'wb') as f:\n    while True:\n        f.write(b'x' * 2**20)\n", {"error", "killed", "timeout"}),
    "deep recursion": ("import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n", {"timeout", "memory", "killed", "error"}),
    "self kill": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", {"killed", "ok"}),
    "orphan": ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\nprint('parent done')\n", {"ok"}),
    "socket out": ("import socket\ns = socket.socket()\ns.settimeout(1)\ns.connect(('127.0.0.1', 22))\n", {"error"}),
    "write outside": ("open('/usr/arlkit-probe', 'w').write('x')\n", {"error"}),
    "rm -rf home": ("import os\nos.system('rm -rf ~ /work /opt 2>/dev/null')\nprint('ran')\n", {"ok", "error"}),
    "new user namespace": ("import os\nos.unshare(os.CLONE_NEWUSER)\nprint('unshared')\n", {"error"}),
    "unshare -U": ("import subprocess\nsubprocess.run(['unshare', '-U', 'true'], check=True)\nprint('unshared')\n", {"error"}),
    "memfd bomb": (
        "import os\n"
        "for _ in range(2):\n"
        "    os.fork()\n"
        "fds = []\n"
        "for _ in range(60):\n"
        "    fd = os.memfd_create('x')\n"
        "    os.write(fd, b'x' * 15_000_000)\n"
        "    fds.append(fd)\n"
        "print('filled', len(fds))\n",
        {"memory", "error", "killed"},
    ),
    "shm fill": ("with open('/dev/shm/x', 'wb') as f:\n    while True:\n        f.write(b'x' * 2**20)\n", {"error", "killed", "timeout"}),
}

READERS = {
    "env secret": "import os\nprint(os.environ.get('ARLKIT_PROBE_SECRET', 'absent'))\n",
    "parent environ": "import os\nfor p in os.listdir('/proc'):\n    try:\n        print(open(f'/proc/{p}/environ', 'rb').read())\n    except Exception:\n        pass\n",
    "host passwd": "print(open('/etc/passwd').read())\n",
    "host mounts": "print(open('/proc/self/mounts').read())\n",
    "host shadow": "print(open('/etc/shadow').read())\n",
}


def _planted_copies(base: Path) -> list[Path]:
    """Copies of an 'answer file' where another checkout or install of arlkit could lie."""
    spots = [
        base / "other-checkout" / "src" / "arlkit" / "data" / "code" / "problems.json",
        base / "home" / "user" / "arlkit" / "data" / "problems.json",
    ]
    # A site-packages install of arlkit in the base interpreter (the venv does not import from there).
    base_site = Path(sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["purelib"])
    if not (base_site / "arlkit").exists():
        spots.append(base_site / "arlkit" / "data" / "code" / "problems.json")
    for path in spots:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"answer": SECRET}))
    for path in [base, *(p for spot in spots for p in spot.parents if base in p.parents)]:
        path.chmod(0o755)  # readable as a real checkout is (a private 0700 folder would hide it anyway)
    for spot in spots:
        spot.chmod(0o644)
    return spots


def probe_sandbox() -> Iterator[Family]:
    from arlkit.sandbox import Sandbox, SandboxConfig, available_levels

    levels = [lv for lv, why in available_levels().items() if why is None and lv != "none"]
    os.environ["ARLKIT_PROBE_SECRET"] = SECRET
    programs, answers, secrets = Family("sandbox: hostile programs"), Family("sandbox: planted answers"), Family("sandbox: host data")
    (ROOT / "runs").mkdir(exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="arlkit-probe-", dir=ROOT / "runs"))  # inside this checkout, outside /tmp
    opt = Path(tempfile.mkdtemp(prefix="arlkit-probe-", dir="/opt")) if os.access("/opt", os.W_OK) else base / "opt"
    planted = _planted_copies(base) + _planted_copies(opt)[:1]
    planted_dirs = {p.parents[1] for p in planted}
    try:
        for level in levels:
            sandbox = Sandbox(SandboxConfig(isolation=level, min_isolation="none", wall_time_s=3, cpu_time_s=3, memory_mb=256))
            for name, (source, expected) in HOSTILE.items():
                result = sandbox.run_python(source)
                ok = result.outcome in expected and SECRET not in result.stdout + result.stderr
                if name in ("new user namespace", "unshare -U", "memfd bomb"):
                    ok = ok and "unshared" not in result.stdout and "filled 60" not in result.stdout
                programs.check(f"{level}/{name}", ok, f"outcome {result.outcome}: {result.stdout[-200:]!r}")
            for path in planted:
                source = f"try:\n    print(open({str(path)!r}).read())\nexcept OSError as e:\n    print('refused', e.errno)\n"
                result = sandbox.run_python(source)
                answers.check(f"{level}/{path}", SECRET not in result.stdout, result.stdout[-200:])
            for path in planted_dirs:
                source = f"import os\nfor d, _, fs in os.walk({str(path)!r}):\n    print(d, fs)\n"
                result = sandbox.run_python(source)
                answers.check(f"{level}/walk {path}", "problems.json" not in result.stdout, result.stdout[-200:])
            passwd = Path("/etc/passwd").read_text()
            mounts = Path("/proc/self/mounts").read_text()
            for name, source in READERS.items():
                out = sandbox.run_python(source).stdout
                leaked = SECRET in out or (name == "host passwd" and passwd.strip() and passwd.strip() in out)
                leaked = leaked or (name == "host mounts" and mounts.strip() in out)
                secrets.check(f"{level}/{name}", not leaked, out[-200:])
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(opt, ignore_errors=True)
        for path in planted:
            if "site-packages" in path.parts:
                shutil.rmtree(path.parents[2], ignore_errors=True)  # the planted site-packages/arlkit
        os.environ.pop("ARLKIT_PROBE_SECRET", None)
    yield from (programs, answers, secrets)


# -- SQL: hostile queries -------------------------------------------------------------------------
QUERIES = [
    "DROP TABLE student", "INSERT INTO student VALUES (1, 'x', 1, 1, 4.0, 'Oslo')", "UPDATE student SET gpa = 4.0",
    "DELETE FROM enrollment", "CREATE TABLE pwned(x)", "CREATE TEMP TABLE t AS SELECT * FROM student",
    "ATTACH DATABASE '/tmp/arlkit_probe.db' AS evil", "PRAGMA writable_schema = ON", "VACUUM INTO '/tmp/arlkit_probe.db'",
    "SELECT load_extension('/lib/x86_64-linux-gnu/libc.so.6')", "SELECT readfile('/etc/passwd')",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r ORDER BY x DESC",
    "WITH RECURSIVE r(x, s) AS (SELECT 1, zeroblob(100000) UNION ALL SELECT x + 1, s FROM r) SELECT count(*) FROM (SELECT * FROM r ORDER BY random())",
    "SELECT count(*) FROM enrollment AS a, enrollment AS b, enrollment AS c",
    "SELECT * FROM enrollment, student, course ORDER BY random()",
    "SELECT randomblob(1000000000)", "SELECT printf('%.*c', 1000000000, 'x')",
    "SELECT 1; DROP TABLE student", "select * from student where name = '\x00'",
]


def probe_sql() -> Iterator[Family]:
    from arlkit.envs import make

    family = Family("sql: hostile queries")
    cache = Path(tempfile.mkdtemp(prefix="arlkit-probe-sql-"))
    try:
        env = make("sql", cache_dir=str(cache), timeout_s=2.0, max_rows=1000)
        task = next(t for t in env.tasks("test", 38) if t.payload["db_id"] == "university")
        db = env.task_set.databases["university"]  # type: ignore[attr-defined]
        before = db.read_bytes()
        for query in QUERIES:
            env.reset(task, 0)
            with _TempSpillWatch() as spill:
                try:
                    result = env.step(query)
                    crashed = ""
                except Exception as exc:  # a probe counts crashes, it does not stop at one
                    result, crashed = None, f"{type(exc).__name__}: {exc}"
            ok = not crashed and db.read_bytes() == before and spill.peak < 16 * 2**20
            family.check(query[:60], ok, crashed or f"temp files peaked at {spill.peak} bytes; {getattr(result, 'observation', '')[:120]!r}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    yield family


class _TempSpillWatch:
    """Peak bytes of SQLite's temporary files open in this process while the block runs. SQLite
    unlinks them as soon as it opens them, so they are found through ``/proc/self/fd``."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            total = 0
            for fd in os.listdir("/proc/self/fd"):
                try:
                    if "etilqs_" in os.readlink(f"/proc/self/fd/{fd}"):
                        total += os.stat(f"/proc/self/fd/{fd}").st_size
                except OSError:
                    continue
            self.peak = max(self.peak, total)
            self._stop.wait(0.005)

    def __enter__(self) -> _TempSpillWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# -- replies: fuzzed model output through every env and the writer --------------------------------
def _fuzz_replies(rng: random.Random, n: int) -> Iterator[str]:
    pieces = ["<action>", "</action>", "<think>", "</think>", "\ud800", "\udfff", "\x00", "\x1b[2J", "\r\n", "é", "🤖",
              "Left", "up", "SELECT 1", "print(1)", "ls()", "```python\n", "```", "{", "}", "'", '"', "\\", "%s"]
    for _ in range(n):
        size = rng.choice([1, 5, 50, 500, 20000])
        if rng.random() < 0.5:
            yield "".join(rng.choice(pieces) for _ in range(size))
        else:
            yield "".join(chr(rng.randrange(0, 0x110000)) for _ in range(min(size, 2000)))
        yield "<action>" * size + "x" + "</action>" * size


def probe_replies(n: int = 150) -> Iterator[Family]:
    from arlkit.envs import make
    from arlkit.envs.registry import list_envs
    from arlkit.rollout.records import JsonlWriter, Trajectory, TurnRecord, read_trajectories

    family = Family("replies: fuzzed replies through env parse/step and the writer")
    rng = random.Random(0)
    out = Path(tempfile.mkdtemp(prefix="arlkit-probe-replies-"))
    try:
        for name in list_envs():
            env = make(name)
            task = env.tasks("test", 1)[0]
            count = 8 if name == "code" else n
            with JsonlWriter(out / f"{name}.jsonl") as writer:
                for i, reply in enumerate(_fuzz_replies(rng, count)):
                    try:
                        env.reset(task, i)
                        parsed = env.parse_action(reply)
                        if parsed.action is not None:
                            result = env.step(parsed.action)
                            turn = TurnRecord(reply, parsed.action, result.valid, result.reward, result.observation)
                        else:
                            turn = TurnRecord(reply, None, False, 0.0, str(parsed.error))
                        traj = Trajectory(name, "fuzz", task.task_id, i, 1, "announced", 0, 0, reply, [turn])
                        writer.write(traj)
                        family.check(f"{name}#{i}", True)
                    except Exception as exc:  # a probe counts crashes, it does not stop at one
                        family.check(f"{name}#{i}", False, f"{type(exc).__name__}: {exc} on {reply[:60]!r}")
            try:
                read_trajectories(out / f"{name}.jsonl")
            except Exception as exc:  # same
                family.check(f"{name}: read back", False, f"{type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    yield family


# -- CLI: bad input is one line and exit 2 ---------------------------------------------------------
def _cli_cases(work: Path) -> list[tuple[str, list[str], bool]]:
    """``(name, arguments, claims_out)``: each command is valid but for one thing; ``claims_out``
    names commands whose ``--out`` must stay unclaimed after the refusal."""
    bad_utf8 = work / "bad.yaml"
    bad_utf8.write_bytes(b"optim:\n  lr: 1.0e-4 \xff\xfe\n")
    dup = work / "dup.yaml"
    dup.write_text("optim:\n  lr: 1.0e-4\n  lr: 3.0e-4\n")
    out = str(work / "out")
    train = ["train", "--check", "--out", out]
    return [
        ("eval: unknown env", ["eval", "--env", "nope", "--out", out], True),
        ("eval: unknown policy", ["eval", "--policy", "nope", "--out", out], True),
        ("eval: bad budget", ["eval", "--budgets", "x%", "--out", out], True),
        ("eval: zero tasks", ["eval", "--tasks", "0", "--out", out], True),
        ("eval: k above samples", ["eval", "--samples", "2", "--k", "4", "--out", out], True),
        ("eval: bad env arg", ["eval", "--env-arg", "size=abc", "--out", out], True),
        ("eval: missing model", ["eval", "--policy", "hf:" + str(work / "missing-model"), "--out", out], True),
        ("train: lr inf", [*train, "optim.lr=.inf"], True),
        ("train: lr nan", [*train, "optim.lr=.nan"], True),
        ("train: lr negative", [*train, "optim.lr=-1"], True),
        ("train: group size 0", [*train, "group_size=0"], True),
        ("train: unknown key", [*train, "optim.nope=1"], True),
        ("train: config not utf-8", [*train, "--config", str(bad_utf8)], True),
        ("train: duplicate yaml key", [*train, "--config", str(dup)], True),
        ("train: missing model", [*train, "model=" + str(work / "missing-model")], True),
        ("train (no --check): lr nan", ["train", "--out", out, "optim.lr=.nan"], True),
        ("sft: lr nan", ["sft", "--out", out, "optim.lr=.nan"], True),
        ("unknown command", ["nope"], False),
    ]


def probe_cli() -> Iterator[Family]:
    family = Family("cli: bad input gives one line and exit 2")
    arlkit = str(Path(sys.executable).with_name("arlkit"))
    work = Path(tempfile.mkdtemp(prefix="arlkit-probe-cli-"))
    try:
        for name, args, claims_out in _cli_cases(work):
            proc = subprocess.run([arlkit, *args], capture_output=True, text=True, timeout=600, cwd=work, check=False)
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            claimed = claims_out and (work / "out").exists() and any((work / "out").iterdir())
            ok = proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr and not claimed
            family.check(name, ok, f"exit {proc.returncode}, out claimed: {claimed}, stderr {proc.stderr[-300:]!r}")
            shutil.rmtree(work / "out", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    yield family


# -- checkpoints: damaged files on --resume --------------------------------------------------------
def _damage_cases() -> list[tuple[str, Callable[[bytes], bytes]]]:
    def flip(at: float) -> Callable[[bytes], bytes]:
        def damage(data: bytes) -> bytes:
            out = bytearray(data)
            out[int(len(out) * at)] ^= 0x01
            return bytes(out)

        return damage

    cases: list[tuple[str, Callable[[bytes], bytes]]] = [(f"one bit flipped at {at:.0%}", flip(at)) for at in (0.05, 0.3, 0.5, 0.7, 0.99)]
    cases += [(f"truncated to {keep:.0%}", lambda d, keep=keep: d[: int(len(d) * keep)]) for keep in (0.0, 0.1, 0.5, 0.9)]
    cases += [("zero-filled", lambda d: bytes(len(d))), ("an extra byte", lambda d: d + b"x")]
    return cases


def probe_checkpoints() -> Iterator[Family]:
    family = Family("checkpoints: a damaged newest checkpoint on --resume")
    arlkit = str(Path(sys.executable).with_name("arlkit"))
    work = Path(tempfile.mkdtemp(prefix="arlkit-probe-ckpt-"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([arlkit, *args], capture_output=True, text=True, timeout=900, cwd=work, check=False)

    try:
        run("model", "init", "--size", "nano", "--out", str(work / "model"))
        overrides = [f"model={work / 'model'}", "env.args={size: 3, slippery: false, t_max: 6, p_frozen: 0.95}", "train_tasks=4",
                     "steps=3", "tasks_per_step=2", "group_size=2", "prompt.history=1", "algo.step_rows=true", "sampling.max_new_tokens=8", "optim.lr=1e-3",
                     "validation.every=0", "checkpoint_every=1", "keep_checkpoints=3", "progress=false", "tensorboard=false"]
        reference = run("train", "--out", str(work / "reference"), *overrides)
        if reference.returncode != 0:
            family.check("the reference run", False, reference.stderr[-300:])
            yield family
            return
        final = sorted((work / "reference" / "final").rglob("*.safetensors"))
        want = [f.read_bytes() for f in final]
        for name, damage in _damage_cases():
            run_dir = work / "damaged"
            shutil.rmtree(run_dir, ignore_errors=True)
            shutil.copytree(work / "reference", run_dir)
            shutil.rmtree(run_dir / "final")
            newest = sorted((run_dir / "checkpoints").glob("step_*.pt"))[-1]
            newest.write_bytes(damage(newest.read_bytes()))
            proc = run("train", "--resume", "--out", str(run_dir), *overrides)
            named = [ln for ln in proc.stderr.splitlines() if newest.name in ln]
            got = [f.read_bytes() for f in sorted((run_dir / "final").rglob("*.safetensors"))]
            ok = proc.returncode == 0 and len(named) == 1 and "Traceback" not in proc.stderr and got == want
            family.check(name, ok, f"exit {proc.returncode}, same final model: {got == want}, stderr {proc.stderr[-300:]!r}")
        run_dir = work / "damaged"
        for path in (run_dir / "checkpoints").glob("step_*.pt"):
            path.write_bytes(b"")
        proc = run("train", "--resume", "--out", str(run_dir), *overrides)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        ok = proc.returncode == 1 and "Traceback" not in proc.stderr and any("checkpoint" in ln for ln in lines)
        family.check("every checkpoint damaged", ok, f"exit {proc.returncode}, stderr {proc.stderr[-300:]!r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    yield family


FAMILIES: dict[str, Callable[[], Iterator[Family]]] = {
    "sandbox": probe_sandbox,
    "sql": probe_sql,
    "replies": probe_replies,
    "cli": probe_cli,
    "checkpoints": probe_checkpoints,
}
for _module in sorted(p.stem for p in (Path(__file__).parent / "probes").glob("[a-z]*.py")):
    FAMILIES.update(importlib.import_module(f"probes.{_module}").FAMILIES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help=f"families to run: {', '.join(FAMILIES)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.families if name not in FAMILIES]
    if unknown:
        parser.error(f"unknown family {unknown[0]!r}; valid choices: {', '.join(FAMILIES)}")
    escaped = 0
    for name in args.families or list(FAMILIES):
        for family in FAMILIES[name]():
            print(f"{family.name}: {family.contained} / {family.tried} contained", flush=True)
            for line in family.escapes:
                print(f"    NOT CONTAINED {line}", flush=True)
            escaped += len(family.escapes)
    return 1 if escaped else 0


if __name__ == "__main__":
    sys.exit(main())
