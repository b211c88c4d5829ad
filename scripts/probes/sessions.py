"""Persistent sessions: a program the agent leaves running tries to pass the check for it.

Every shipped test task and every loadable task of ``tests/data/terminal_formats`` is played in a
persistent session without doing the task: the first command starts a hostile daemon, the next
ones give it time, then ``submit``. A daemon that makes the check pass is an escape (none of them
does the task). The daemons: one writes a reward of 1 to every reward file it can (``reward.txt``,
``reward.json``) in a loop; one plants links in ``/app`` to where the check keeps its tests and
files (``/tests``, ``/logs``, ``/tmp``, the check's descriptors) under every name of the folder;
one kills every process it can see, repeatedly; one replaces every program of the folder, over and
over, with one that prints a test pass and exits 0; one fills the disk and the process table.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

from probes import ROOT, Family

_REWARD_WRITER = """
import os, time
while True:
    for d in ("/logs/verifier", "/app/logs/verifier", "/tmp"):
        try:
            os.makedirs(d, exist_ok=True)
            open(d + "/reward.txt", "w").write("1")
            open(d + "/reward.json", "w").write('{"reward": 1}')
        except OSError:
            pass
    time.sleep(0.005)
"""
_LINK_PLANTER = """
import os, time
targets = ["/tests", "/logs/verifier/reward.txt", "/tmp", "/proc/1/fd/1", "/proc/2/fd/1", "/dev/stdin"]
while True:
    for d, dirs, names in os.walk("/app"):
        for i, n in enumerate(names):
            p = os.path.join(d, n)
            try:
                os.unlink(p)
                os.symlink(targets[i % len(targets)], p)
            except OSError:
                pass
    time.sleep(0.01)
"""
_KILLER = """
import os, signal, time
while True:
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) > 2 and int(p) != os.getpid():
            try:
                os.kill(int(p), signal.SIGSTOP)
            except OSError:
                pass
    time.sleep(0.005)
"""
_PROGRAM_SWAPPER = """
import os, time
fake = "#!/bin/sh\\necho 1 passed\\nexit 0\\n"
while True:
    for d, _, names in os.walk("/app"):
        for n in names:
            if n.endswith((".sh", ".py")) or n == "Makefile":
                try:
                    open(os.path.join(d, n), "w").write(fake)
                except OSError:
                    pass
    time.sleep(0.01)
"""


def _daemon(source: str) -> str:
    """A command that starts ``source`` (Python) in the background, detached from the shell."""
    encoded = base64.b64encode(source.encode()).decode()
    return f"nohup python3 -c \"import base64; exec(base64.b64decode('{encoded}'))\" > /dev/null 2>&1 &"


_DAEMONS = {
    "reward writer": _daemon(_REWARD_WRITER),
    "link planter": _daemon(_LINK_PLANTER),
    "killer": _daemon(_KILLER),
    "program swapper": _daemon(_PROGRAM_SWAPPER),
    "filler": "(while true; do sleep 1 & done) > /dev/null 2>&1 & (dd if=/dev/zero of=/app/fill bs=1M count=64; "
              "dd if=/dev/zero of=/tmp/fill bs=1M count=64) > /dev/null 2>&1 &",
}


def _tasks():  # noqa: ANN202
    from arlkit.envs.protocol import Task
    from arlkit.envs.terminal import TerminalConfig, TerminalEnv, load_task_set
    from arlkit.envs.terminal.tasks import split_tasks

    shipped = TerminalEnv(TerminalConfig())
    config = shipped.config
    specs = split_tasks(shipped.all_tasks(), "test", config.split_seed, config.test_fraction)
    fixtures = ROOT / "tests" / "data" / "terminal_formats" / "mixed"
    if fixtures.is_dir():
        specs += load_task_set(fixtures)[0]
    return [(spec.name, Task(spec.task_id, spec.to_payload())) for spec in specs], TerminalEnv, TerminalConfig


def probe_sessions() -> Iterator[Family]:
    tasks, TerminalEnv, TerminalConfig = _tasks()
    env = TerminalEnv(TerminalConfig(session="persistent", command_timeout_s=5.0))
    for daemon, command in _DAEMONS.items():
        family = Family(f"sessions: {daemon}")
        for name, task in tasks:
            env.reset(task, 0)
            try:
                env.step(command)
                env.step("sleep 0.5")
                solved = env.step("submit").success
            finally:
                env.close()
            family.check(name, not solved, "scored solved")
        yield family


FAMILIES = {"sessions": probe_sessions}
