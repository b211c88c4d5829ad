"""Terminal checks: folders that do not do the task, submitted to every shipped task (the attacks of
``tests/envs/terminal_attacks.py``), and programs run by a check that look for what it expects."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from probes import ROOT, Family

sys.path.insert(0, str(ROOT / "tests" / "envs"))
import terminal_attacks  # noqa: E402 - the attacks live beside the tests that use them

# A program the check runs (every .py and shell script of the folder is replaced by it) that reads
# whatever it can of the checker -- files under /tmp, other processes' command lines, environments
# and open files -- and prints it, hoping the expected output is among it.
_READER_PY = (
    "import os, sys\n"
    "print = lambda text: (sys.stdout.write(text + chr(10)), sys.stderr.write(text + chr(10)))\n"
    "for folder in ('/tmp', '/var/tmp', '/dev/shm', '/app'):\n"
    "    for d, _, names in os.walk(folder):\n"
    "        for n in names:\n"
    "            try:\n"
    "                print(open(os.path.join(d, n), errors='replace').read())\n"
    "            except OSError:\n"
    "                pass\n"
    "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
    "    for part in ('cmdline', 'environ'):\n"
    "        try:\n"
    "            print(open('/proc/%s/%s' % (pid, part), errors='replace').read().replace(chr(0), ' '))\n"
    "        except OSError:\n"
    "            pass\n"
    "    try:\n"
    "        for fd in os.listdir('/proc/%s/fd' % pid):\n"
    "            print(open('/proc/%s/fd/%s' % (pid, fd), errors='replace').read(100000))\n"
    "    except OSError:\n"
    "        pass\n"
)


def _env_and_tasks():  # noqa: ANN202 - the probe runs against older checkouts too
    from arlkit.envs.protocol import Task
    from arlkit.envs.terminal import TerminalConfig, TerminalEnv, load_tasks

    env = TerminalEnv(TerminalConfig())
    return env, Task, load_tasks()


def _submit(env, task, archive: bytes) -> bool:  # noqa: ANN001
    env.reset(task, 0)
    env.restore({**env.snapshot(), "archive": archive})
    return bool(env.step("submit").success)


def _expected(spec) -> list[str]:  # noqa: ANN001
    """The distinctive texts a task's check expects (this checkout's checks, or a script's printf)."""
    check = spec.check
    if isinstance(check, str):
        import re

        return re.findall(r"printf '([^']{8,})' \| cmp", check)  # as the script's text holds them
    return [v for s in check for v in (s.stdout, s.line) if v and len(v) >= 8]


def probe_terminal() -> Iterator[Family]:
    env, Task, tasks = _env_and_tasks()
    attacks = terminal_attacks.ATTACKS | terminal_attacks.MORE_ATTACKS
    families = {name: Family(f"terminal: {name}") for name in attacks}
    readers = Family("terminal: programs the check runs read what it expects")
    for spec in tasks:
        task = Task(spec.task_id, spec.to_payload())
        env.reset(task, 0)
        for command in spec.solution:
            env.step(command)
        solved = env.archive
        for name, build in attacks.items():
            hostile = build(spec.archive, solved)
            if hostile is not None:
                families[name].check(spec.name, not _submit(env, task, hostile), "scored solved")
        wanted = _expected(spec)
        members = terminal_attacks.read(solved)
        scripts = [info.name for info, data in members if info.isreg() and (info.name.endswith(".py") or (data or b"").startswith(b"#!"))]
        if not wanted or not scripts:
            continue
        planted = [(info, _READER_PY.encode() if info.name in scripts and info.name.endswith(".py")
                    else (b"#!/bin/sh\npython3 -I -c \"$(cat <<'EOF'\n" + _READER_PY.encode() + b"EOF\n)\"\n") if info.name in scripts
                    else data) for info, data in members]
        env.reset(task, 0)
        result = env.check(terminal_attacks.write(planted))
        seen = getattr(result, "output", None) or (result.stdout + result.stderr)
        leaked = [w for w in wanted if w in seen and w not in spec.archive.decode("latin-1")]
        readers.check(spec.name, not leaked, f"read {leaked[:1]!r}")
    yield from families.values()
    yield readers


FAMILIES = {"terminal": probe_terminal}
