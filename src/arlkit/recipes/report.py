"""``arlkit report``: one self-contained HTML file with every result found under some runs
(:func:`arlkit.report.html.write_html_report`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arlkit.report.html import section_title, write_html_report

__all__ = ["WrittenReport", "write_report"]


@dataclass(frozen=True)
class WrittenReport:
    """What :func:`write_report` wrote.

    Attributes:
        path: the HTML file.
        sections: the titles of its sections, in order.
        missing: the titles of the sections left out for lack of inputs.
    """

    path: Path
    sections: tuple[str, ...]
    missing: tuple[str, ...]


def write_report(paths: Sequence[str | Path], out: str | Path, *, title: str = "arlkit report") -> WrittenReport:
    """Find eval runs, analyses and training runs under ``paths`` (3 levels deep) and write their report to
    ``out``; ``FileNotFoundError`` when there is nothing to report."""
    report = write_html_report(paths, out, title=title)
    return WrittenReport(report.path, tuple(map(section_title, report.sections)),
                         tuple(map(section_title, report.missing)))
