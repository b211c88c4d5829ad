"""Counts how many Terminal-Bench and Harbor task folders arlkit loads, how their checks run, and why
the rest are refused; optionally runs the reference solutions of a sample.

    .venv/bin/python scripts/data/terminal_bench_census.py ROOT [ROOT ...] [--untouched] [--oracle N] [--seed S]

Each ROOT is a folder of task folders (Terminal-Bench 1's ``tasks/``, a Harbor dataset such as
Terminal-Bench 2.0). Nothing is fetched: the folders are copied to a temporary folder and read with
:func:`~arlkit.envs.terminal.tasks.load_task_set`, which scans their test scripts (no task runs).
The table counts the folders loaded, by the form of their check (``arlkit-pytest``: arlkit's
isolated pytest, in place of a test script that only installs a test runner and runs pytest;
``script``: the task's own test script), and the folders refused, by kind, with the most common
reasons; for the tasks refused because their Docker image holds what the sandbox lacks (kind
``image``), also the packages, commands and base images named most often.

With ``--untouched``, every loaded task's check runs on its untouched folder: one that passes
cannot tell a solved task from an unsolved one (its tests check what the sandbox has, not what the
agent did). With ``--oracle N``, N loaded tasks of each root, drawn with ``--seed``, run through
:class:`~arlkit.envs.terminal.TerminalEnv` (session ``auto``, persistent for these layouts): the
check on the untouched folder first (a check that passes it cannot tell a solved task from an
unsolved one), then the reference solution and ``submit``. For a failed run, the likely cause read
from the output (the network, a missing Python module or command, a time limit, a missing file) and
the last lines of the check are printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from arlkit.envs.protocol import Task
from arlkit.envs.terminal import TerminalConfig, TerminalEnv
from arlkit.envs.terminal.tasks import (
    KINDS, SkippedTask, TaskRefused, TerminalTask, is_task_folder, load_task, load_task_set,
)

_SANDBOX = dataclasses.replace(TerminalConfig().sandbox, memory_mb=4096)
"""The terminal's own sandbox with 4 GiB of memory per command."""
_SPECIFICS = re.compile(r"\([^()]*\)$")  # a reason's trailing details: grouped apart from the rest
# What a failed oracle run most likely lacked, read from its commands' and check's output, first match.
_CAUSES = (
    ("network", re.compile(r"Could not resolve host|Temporary failure in name resolution|Network is unreachable|"
                           r"Failed to establish a new connection|getaddrinfo failed|Name or service not known")),
    ("python module", re.compile(r"No module named '?([\w.]+)")),
    ("command", re.compile(r"(?:^|[\s:])([\w.+-]+): (?:command )?not found")),
    ("time limit", re.compile(r"timed out|ran past the check's time limit|stopped after \d")),
    ("file", re.compile(r"No such file or directory: '?([^'\s]+)|FileNotFoundError: .*?'([^']+)'")),
)


def check_form(task: TerminalTask) -> str:
    """``arlkit-pytest`` when the check is arlkit's isolated pytest, ``script`` when it runs the task's script."""
    runs = " ".join(step.run for step in task.check)
    return "arlkit-pytest" if len(task.check) == 1 and '"$ARLKIT_PYTHON" -I -B' in runs else "script"


def census(root: Path) -> tuple[list[TerminalTask], dict[str, object]]:
    """The tasks of ``root`` that load (read from a temporary copy) and the counts of the table."""
    with tempfile.TemporaryDirectory(prefix="tb-census-") as tmp:
        copy = Path(tmp) / root.name
        shutil.copytree(root, copy, symlinks=True)
        try:
            tasks, report = load_task_set(copy)
            skipped = report.skipped
        except ValueError as exc:  # nothing loads
            tasks, skipped = [], ()
            print(f"{root}: {str(exc)[:300]}", file=sys.stderr)
            folders = [d for d in copy.iterdir() if d.is_dir() and is_task_folder(d)]
            found = []
            for folder in sorted(folders):
                try:
                    load_task(folder)
                except (ValueError, OSError) as refused:
                    kind = refused.kind if isinstance(refused, TaskRefused) else "unreadable"
                    reason = refused.reason if isinstance(refused, TaskRefused) else str(refused)
                    found.append(SkippedTask(folder.name, reason, kind))
            skipped = tuple(found)
    forms = Counter(check_form(t) for t in tasks)
    kinds = Counter(s.kind for s in skipped)
    reasons = Counter(_SPECIFICS.sub("(...)", s.reason) if s.kind == "network" else _image_reason(s.reason)
                      if s.kind == "image" else s.reason for s in skipped)
    lacking = Counter(item for s in skipped if s.kind == "image" for item in _image_items(s.reason))
    return tasks, {"folders": len(tasks) + len(skipped), "loaded": len(tasks), "forms": forms, "kinds": kinds,
                   "reasons": reasons, "lacking": lacking}


def _image_reason(reason: str) -> str:
    """An image reason without its specifics: ``needs its own Docker image (its Dockerfile runs: ...)``."""
    return re.sub(r"(: |\(FROM ).*\)$", r"\1...)", reason)


def _image_items(reason: str) -> list[str]:
    """What an image reason names: each package missing, each command run, the base image."""
    match = re.search(r"(?:installs what is not here|runs): (.*)\)$", reason)
    if match:
        return [item for item in match.group(1).split(", ") if item != "..."]
    match = re.search(r"\(FROM ([^\s:@)]+)", reason)  # the image without its tag
    return [f"FROM {match.group(1)}"] if match else []


def print_table(rows: list[tuple[str, dict[str, object]]]) -> None:
    kinds = [k for k in KINDS if any(row["kinds"][k] for _, row in rows)]  # type: ignore[index]
    head = ["root", "folders", "loaded", "arlkit-pytest", "script", *(f"refused: {k}" for k in kinds)]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    total = Counter()
    for name, row in rows:
        cells = [row["folders"], row["loaded"], row["forms"]["arlkit-pytest"], row["forms"]["script"],  # type: ignore[index]
                 *(row["kinds"][k] for k in kinds)]  # type: ignore[index]
        total.update(dict(zip(head[1:], cells, strict=True)))
        print(f"| {name} | " + " | ".join(str(c) for c in cells) + " |")
    if len(rows) > 1:
        print("| all | " + " | ".join(str(total[h]) for h in head[1:]) + " |")
    for name, row in rows:
        reasons = row["reasons"]
        if reasons:
            print(f"\n{name}: most common reasons to refuse")
            for reason, n in reasons.most_common(8):  # type: ignore[attr-defined]
                print(f"  {n:5d}  {reason[:160]}")
        lacking = row["lacking"]
        if lacking:
            print(f"{name}: what the images of the refused tasks have that the sandbox lacks, most common first")
            print("  " + ", ".join(f"{item} ({n})" for item, n in lacking.most_common(12)))  # type: ignore[attr-defined]


def likely_cause(text: str) -> str:
    """What a failed run most likely lacked (``network``, ``python module: cv2``, ``command: rustc``,
    ...), from its output; ``?`` when nothing says."""
    for cause, pattern in _CAUSES:
        match = pattern.search(text)
        if match:
            detail = next((g for g in match.groups() if g), "") if match.groups() else ""
            return f"{cause}: {detail}" if detail else cause
    return "?"


def run_oracle(root: Path, tasks: list[TerminalTask], n: int, seed: int) -> list[tuple[str, ...]]:
    """``(root, task, check form, untouched verdict, oracle verdict, likely cause, why)`` for ``n``
    tasks drawn from ``tasks`` (none when none loaded)."""
    if not tasks:
        return []
    chosen = random.Random(seed).sample(tasks, min(n, len(tasks)))
    env = TerminalEnv(TerminalConfig(data_dir=str(root), command_timeout_s=300.0, check_timeout_s=600.0,
                                     max_workspace_mb=256, sandbox=_SANDBOX, t_max=64))
    by_name = {t.name: t for t in env.all_tasks()}
    rows = []
    for picked in sorted(chosen, key=lambda t: t.name):
        spec = by_name[picked.name]
        env.reset(Task(spec.task_id, spec.to_payload()), 0)
        untouched = env.check(env.archive)
        seen = [env.step(command).observation for command in spec.solution]
        final = env.step("submit")
        why = cause = ""
        if not final.success:
            result = env.last_check
            text = result.output if result is not None else "no check result"
            why = " / ".join(line.strip() for line in text.strip().splitlines()[-4:])[:300]
            cause = likely_cause("\n".join([*seen, text]))
        rows.append((root.name, spec.name, check_form(spec), "passes" if untouched.passed else "fails",
                     "passes" if final.success else "fails", cause, why))
        print(f"  oracle {root.name}/{spec.name}: {rows[-1][4]} (untouched folder: {rows[-1][3]})", file=sys.stderr)
    env.close()
    return rows


def untouched_passing(root: Path, tasks: list[TerminalTask]) -> list[str]:
    """The tasks whose check passes on the untouched folder (nothing done): checks that cannot tell."""
    if not tasks:
        return []
    env = TerminalEnv(TerminalConfig(data_dir=str(root), check_timeout_s=600.0, sandbox=_SANDBOX))
    passing = []
    for spec in env.all_tasks():
        env.reset(Task(spec.task_id, spec.to_payload()), 0)
        if env.check(env.archive).passed:
            passing.append(spec.name)
    env.close()
    return passing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", type=Path, help="folders of task folders")
    parser.add_argument("--oracle", type=int, default=0, help="run the reference solution of N loaded tasks per root")
    parser.add_argument("--seed", type=int, default=0, help="seeds the oracle's sample")
    parser.add_argument("--untouched", action="store_true",
                        help="run every loaded task's check on its untouched folder; list those that pass")
    args = parser.parse_args(argv)
    missing = [str(r) for r in args.roots if not r.is_dir()]
    if missing:
        parser.error(f"not a folder: {', '.join(missing)}")
    rows, loaded = [], {}
    for root in args.roots:
        tasks, row = census(root)
        rows.append((root.name, row))
        loaded[root] = tasks
    print_table(rows)
    if args.untouched:
        for root in args.roots:
            passing = untouched_passing(root, loaded[root])
            print(f"\n{root.name}: {len(passing)} of {len(loaded[root])} checks pass on the untouched folder"
                  + (f": {', '.join(passing)}" if passing else ""))
    if args.oracle > 0:
        results = []
        for root in args.roots:
            results += run_oracle(root, loaded[root], args.oracle, args.seed)
        print("\n| root | task | check | untouched folder | oracle | likely cause | last lines of the failed check |")
        print("|---|---|---|---|---|---|---|")
        for row in results:
            print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
        passed = sum(row[4] == "passes" for row in results)
        print(f"\noracle: {passed} of {len(results)} pass; untouched folders passing: "
              f"{sum(row[3] == 'passes' for row in results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
