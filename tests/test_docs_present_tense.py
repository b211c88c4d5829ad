"""The code and its documents speak of themselves in the present: no file under ``src/``, ``docs/`` or
the README names a development session ("session 12"). What the code is and why belongs in its
docs and comments; how it came to be belongs in ``git log``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SESSION = re.compile(r"[Ss]ession [0-9]")
SKIP_PARTS = {"__pycache__"}


def _text_files() -> list[Path]:
    """The README and every text file under ``src/`` and ``docs/`` (build outputs such as
    ``*.egg-info``, which copy the README, and byte-code are left out)."""
    files = [ROOT / "README.md"]
    for top in ("src", "docs"):
        for path in sorted((ROOT / top).rglob("*")):
            parts = set(path.relative_to(ROOT).parts)
            if not path.is_file() or parts & SKIP_PARTS or any(p.endswith(".egg-info") for p in parts):
                continue
            files.append(path)
    return files


def session_mentions(files: list[Path], root: Path = ROOT) -> list[str]:
    """``path:line: text`` (``path`` relative to ``root``) for every line of ``files`` that matches
    :data:`SESSION`."""
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary data (shipped databases, archives) holds no prose
        for number, line in enumerate(text.splitlines(), 1):
            if SESSION.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()[:120]}")
    return found


def test_the_rule_catches_a_session_mention(tmp_path: Path) -> None:
    sample = tmp_path / "note.md"
    sample.write_text("The sandbox runs each step alone.\nMeasured in session 12 on the fast CPU.\n", encoding="utf-8")
    (tmp_path / "data.bin").write_bytes(b"\xff\xfe session 3")
    found = session_mentions([sample, tmp_path / "data.bin"], root=tmp_path)
    assert found == ["note.md:2: Measured in session 12 on the fast CPU."]


def test_no_file_names_a_development_session() -> None:
    files = _text_files()
    assert len(files) > 100  # the walk found the package and the docs
    offenders = session_mentions(files)
    assert not offenders, "history belongs in git log, not in the tree:\n" + "\n".join(offenders)
