"""The README runs as written: every ``bash`` and ``python`` block, top to bottom, in one scratch folder
that sees the repository's ``.venv``, configs, examples, scripts and benchmarks, each block in a fresh
shell or interpreter (later blocks use what earlier ones wrote: ``models/``, ``runs/``). A block the
README itself marks, on the line above it, with ``<!-- not run by tests/test_readme.py: REASON -->``
is left out for that stated reason (``make test`` is this suite; the demo, the arena and the benchmarks
take longer than a test should and have tests of their own; a GPU or a user's server); every other
block must succeed. Background processes a block starts (``arlkit serve ... &``) are stopped with it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- not run by tests/test_readme\.py: (.+?) -->")
FENCE = re.compile(r"^```(bash|python)\n(.*?)^```", re.S | re.M)
SHARED = (".venv", "configs", "examples", "scripts", "benchmarks", "src", "tests", "pyproject.toml", "Makefile")


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    code: str
    skip: str | None


def readme_blocks(text: str) -> list[Block]:
    """The README's ``bash`` and ``python`` blocks, with the reason a block is not run (``None``: it runs)."""
    blocks = []
    for found in FENCE.finditer(text):
        line = text.count("\n", 0, found.start()) + 1
        before = text[: found.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        blocks.append(Block(line, found.group(1), found.group(2), mark.group(1) if mark else None))
    return blocks


def _run(block: Block, cwd: Path, deadline_s: float) -> tuple[int, str]:
    """Run one block in its own process group (so a server it left in the background stops with it);
    ``(exit code, output)``, -9 when the deadline killed it."""
    if block.lang == "bash":
        argv = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:
        argv = [str(ROOT / ".venv" / "bin" / "python"), "-c", block.code]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"}
    log = cwd / f".block-{block.line}.log"
    with log.open("w", encoding="utf-8") as sink:  # a file, not a pipe: a background process may keep it open
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            code = -9
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL if code == -9 else signal.SIGTERM)
            except ProcessLookupError:
                pass
            process.wait()
    return code, log.read_text(encoding="utf-8", errors="replace")


def test_every_readme_block_is_run_or_says_why_not() -> None:
    blocks = readme_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) > 10
    skipped = [b for b in blocks if b.skip]
    assert len(skipped) <= len(blocks) // 3, [(b.line, b.skip) for b in skipped]


@pytest.mark.slow
def test_the_readme_runs_as_written(tmp_path: Path) -> None:
    if not (ROOT / ".venv" / "bin" / "arlkit").exists():
        pytest.fail("the README's commands use .venv/bin/arlkit: run `make install` (make test does)")
    for name in SHARED:
        (tmp_path / name).symlink_to(ROOT / name)
    timings = []
    for block in readme_blocks((ROOT / "README.md").read_text(encoding="utf-8")):
        if block.skip:
            continue
        started = time.monotonic()
        code, out = _run(block, tmp_path, deadline_s=1800)  # generous: a loaded 2-core machine ran the sft block past 600 s
        timings.append((block.line, round(time.monotonic() - started, 1)))
        assert code == 0, f"README block at line {block.line} failed ({code}):\n{block.code}\n---\n{out[-4000:]}"
    print("README blocks (line, seconds):", timings, file=sys.stderr)
