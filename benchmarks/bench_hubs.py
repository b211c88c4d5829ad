"""Each environment hub's adapter under ``arlkit eval``: one multi-turn environment of the hub, its
Pass@(K,T) table and the command that made it, written to ``benchmarks/results/hubs.md``.

- GEM: its own ``game:GuessTheNumber-v0-hard``;
- skyrl-gym: its own ``text2sql`` on a three-question sqlite database built here;
- OpenEnv: arlkit's frozenlake served by arlkit's OpenEnv server (OpenEnv's own server classes), played
  over OpenEnv's WebSocket client with more trajectories than sessions;
- verifiers: ``vf_guess``, a verifiers v1 multi-turn environment (a ``Taskset`` and an ``Env`` whose
  ``run()`` answers higher/lower), as no environment shipped with verifiers 0.4.0 runs offline.

No model is involved: the policies are the test suite's scripted fixtures (``tests/integrations``),
which read the observations (never the answer), so the tables check the bridges (announced budgets,
the success rule, partial rewards, sessions), not a model. Run: ``.venv/bin/python benchmarks/bench_hubs.py``.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "integrations"
ARLKIT = [sys.executable, "-m", "arlkit"]
RESULTS = ROOT / "benchmarks" / "results" / "hubs.md"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}


def _eval(args: list[str], out: Path) -> tuple[list[dict[str, str]], float]:
    start = time.monotonic()
    subprocess.run([*ARLKIT, "eval", *args, "--out", str(out)], check=True, env=_env(), cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    with open(out / "passkt.csv", newline="") as fh:
        return list(csv.DictReader(fh)), time.monotonic() - start


def _table(rows: list[dict[str, str]]) -> str:
    budgets = sorted({int(r["T"]) for r in rows})
    ks = sorted({int(r["k"]) for r in rows})
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    cell = {(r["policy"], int(r["T"]), int(r["k"])): r for r in rows}
    lines = ["| policy | k | " + " | ".join(f"T={t}" for t in budgets) + " |", "|---|---|" + "---|" * len(budgets)]
    for policy in policies:
        for k in (ks[0], ks[-1]):
            values = [cell[(policy, t, k)] for t in budgets]
            lines.append(f"| {policy} | {k} | " + " | ".join(
                f"{100 * float(v['pass']):.1f} [{100 * float(v['ci_low']):.1f}, {100 * float(v['ci_high']):.1f}]"
                for v in values) + " |")
    return "\n".join(lines)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(url: str, deadline_s: float = 120.0) -> None:
    end = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def gem(work: Path) -> tuple[str, list[dict[str, str]], float]:
    args = ["--env", "gem", "--env-arg", "id=game:GuessTheNumber-v0-hard", "--policy", "gem_fixtures:bisect",
            "--tasks", "20", "--samples", "8", "--budgets", "2,4,6,full"]
    return " ".join(args), *_eval(args, work / "gem")


def skyrl(work: Path) -> tuple[str, list[dict[str, str]], float]:
    sys.path.insert(0, str(FIXTURES))
    import arlkit_skyrl_fixtures as fixtures

    fixtures.make_sql_db(work / "sql")
    (work / "sql.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fixtures.sql_rows()), encoding="utf-8")
    args = ["--env", "skyrl-gym", "--env-arg", f"data={work / 'sql.jsonl'}", "--env-arg", "id=text2sql",
            "--env-arg", json.dumps({"db_path": str(work / "sql")}).join(("env_config=", "")),
            "--policy", "arlkit_skyrl_fixtures:sql_policy", "--tasks", "3", "--samples", "8", "--budgets", "1,2,3,5"]
    shown = " ".join(shlex.quote(a) for a in args).replace(str(work), "WORK")  # WORK: where make_sql_db wrote
    return shown, *_eval(args, work / "text2sql")


def openenv(work: Path) -> tuple[str, list[dict[str, str]], float]:
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "arlkit.integrations.openenv.server", "--env", "frozenlake",
                               "--port", str(port), "--max-sessions", "8"], cwd=ROOT, env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(f"http://127.0.0.1:{port}/health")
        args = ["--env", "openenv", "--env-arg", f"url=http://127.0.0.1:{port}", "--policy", "random",
                "--tasks", "20", "--samples", "4", "--budgets", "4,8,16,70"]
        found = _eval(args, work / "openenv")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/arlkit", timeout=10) as answer:
            sessions = json.loads(answer.read())
    finally:
        server.terminate()
        server.wait(timeout=30)
    command = ("python -m arlkit.integrations.openenv.server --env frozenlake --port $PORT --max-sessions 8 &\n"
               f"arlkit eval {' '.join(args).replace(str(port), '$PORT')}\n# the server's GET /arlkit afterwards: "
               + json.dumps({k: sessions[k] for k in ("max_sessions", "sessions_opened", "sessions_closed",
                                                     "sessions_refused", "peak_sessions")}))
    return command, *found


def verifiers(work: Path) -> tuple[str, list[dict[str, str]], float]:
    args = ["--env", "verifiers", "--env-arg", "id=vf_guess", "--policy", "vf_guess:bisect", "--policy",
            "vf_guess:bisect:1", "--tasks", "8", "--samples", "4", "--budgets", "2,3,4,5,6"]
    return " ".join(args), *_eval(args, work / "verifiers")


def main() -> int:
    sections = ["# Environment hubs under `arlkit eval`", "",
                "Written by `benchmarks/bench_hubs.py` (its docstring says what each run is). Pass@k in %, "
                "95% bootstrap CI over tasks; k = 1 and the largest k. The policies are scripted fixtures of "
                "the test suite (`tests/integrations`); commands run from the repository root with "
                "`PYTHONPATH=tests/integrations`.", ""]
    with tempfile.TemporaryDirectory() as tmp:
        for name, run in (("GEM", gem), ("skyrl-gym", skyrl), ("OpenEnv", openenv), ("verifiers", verifiers)):
            command, rows, wall = run(Path(tmp))
            print(f"{name}: {len(rows)} rows in {wall:.1f} s", flush=True)
            sections += [f"## {name}", "", "```bash", command if "\n" in command else f"arlkit eval {command}", "```",
                         "", _table(rows), "", f"({wall:.1f} s wall on this machine.)", ""]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(sections), encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
