"""Every reference from the README, ``docs/*.md`` and the code's comments to a Markdown document
resolves: the file exists and, where a ``#anchor`` is given, the document has a heading whose GitHub
slug is that anchor, or an explicit ``<a id="anchor"></a>``.

Two kinds of reference are checked: Markdown links (``[text](metrics.md#bootstrap)``, relative to the
linking file; ``(#anchor)`` within it) in the README and the docs, and the repository paths written in
prose, code spans and comments (``docs/metrics.md#matched-states``, relative to the repository root)
there and in ``src/`` and ``tests/``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOC_PATH = re.compile(r"(?<![\w/.-])(docs/[\w.-]+\.md)(#[\w-]+)?")
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation (anything but letters, digits, spaces,
    hyphens and underscores) dropped, each space a hyphen."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown document: its headings' (outside code fences; a repeated slug gets
    ``-1``, ``-2``, ... as on GitHub) and its explicit ``<a id="...">``."""
    found: set[str] = set(EXPLICIT.findall(text))
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        heading = None if fenced else HEADING.match(line)
        if heading:
            slug = github_slug(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _prose(text: str) -> str:
    """``text`` with its fenced code blocks blanked (their lines kept, so line numbers still hold)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced else line)
    return "\n".join(lines)


def broken_references(files: list[Path], root: Path = ROOT) -> list[str]:
    """``file:line: target (why)`` for every reference in ``files`` that does not resolve."""
    cache: dict[Path, set[str]] = {}

    def check(source: Path, number: int, target: Path, anchor: str, shown: str) -> str | None:
        if not target.is_file():
            return f"{source.relative_to(root)}:{number}: {shown} (no such file)"
        if anchor:
            if target not in cache:
                cache[target] = anchors(target.read_text(encoding="utf-8"))
            if anchor not in cache[target]:
                return f"{source.relative_to(root)}:{number}: {shown} (no heading with the anchor #{anchor})"
        return None

    problems = []
    for source in files:
        text = source.read_text(encoding="utf-8")
        markdown = source.suffix == ".md"
        for number, line in enumerate((_prose(text) if markdown else text).splitlines(), 1):
            for link in LINK.findall(line) if markdown else ():
                if re.match(r"[a-z][a-z0-9+.-]*:", link):
                    continue  # https:, mailto:, ...
                path, _, anchor = link.partition("#")
                if path and not path.endswith(".md"):
                    continue  # a link to code or data, not to a document
                target = (source.parent / path).resolve() if path else source
                problems.append(check(source, number, target, anchor, link))
            for path, anchor in DOC_PATH.findall(LINK.sub("", line) if markdown else line):
                problems.append(check(source, number, root / path, anchor.lstrip("#"), path + anchor))
    return [p for p in problems if p]


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _code() -> list[Path]:
    here = Path(__file__).resolve()
    return [p for top in ("src", "tests") for p in sorted((ROOT / top).rglob("*.py")) if p.resolve() != here]


def test_github_slugs() -> None:
    assert github_slug("Pass@(K,T) and `passkt.csv`") == "passkt-and-passktcsv"
    assert github_slug("5. Safe to stop (`arlkit/train/checkpoint.py`)") == "5-safe-to-stop-arlkittraincheckpointpy"
    assert github_slug("BudgetMix - Full, T_max") == "budgetmix---full-t_max"
    assert anchors("# A\n## Notes\n```\n# not a heading\n```\n## Notes\n") == {"a", "notes", "notes-1"}


def test_broken_references_are_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n## Known heading\n<a id=\"explicit\"></a>\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/a.md#known-heading) and `docs/a.md#known-heading`\n"
        "[gone](docs/b.md) and docs/a.md#unknown\n"
        "[self](#a-heading-nowhere) [site](https://example.com/x.md) [code](src/x.py)\n"
        "```\n[in a fence](docs/c.md)\n```\n",
        encoding="utf-8",
    )
    code = tmp_path / "mod.py"
    code.write_text('"""See docs/a.md#explicit and docs/a.md#known-heading, not docs/a.md#nowhere."""\n', encoding="utf-8")
    assert broken_references([readme], root=tmp_path) == [
        "README.md:2: docs/b.md (no such file)",
        "README.md:2: docs/a.md#unknown (no heading with the anchor #unknown)",
        "README.md:3: #a-heading-nowhere (no heading with the anchor #a-heading-nowhere)",
    ]
    assert broken_references([code], root=tmp_path) == ["mod.py:1: docs/a.md#nowhere (no heading with the anchor #nowhere)"]


def test_every_document_reference_resolves() -> None:
    documents = _documents()
    assert len(documents) > 10
    problems = broken_references(documents)
    assert not problems, "\n".join(problems)


def test_every_document_reference_in_the_code_resolves() -> None:
    code = _code()
    assert len(code) > 100
    problems = broken_references(code)
    assert not problems, "\n".join(problems)
