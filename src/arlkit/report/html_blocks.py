"""Small pieces of the HTML report: escaping, embedded figures, tables and CSV reading, shared by
:mod:`arlkit.report.html` and :mod:`arlkit.report.eval_sections`."""

from __future__ import annotations

import csv
import html
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arlkit.report import figures

__all__ = ["Raw", "esc", "img", "inline_markdown", "num", "read_csv", "table"]


class Raw(str):
    """Text that :func:`table` puts into a cell as it is (already escaped HTML)."""


def esc(x: object) -> str:
    return html.escape(str(x))


def img(fig: Any, alt: str, **data: object) -> str:
    """The figure as an embedded PNG; ``data`` become ``data-*`` attributes (``pass_t_points=2`` ->
    ``data-pass-t-points="2"``), which say what the figure holds to tests and scripts."""
    attrs = "".join(f' data-{key.replace("_", "-")}="{esc(value)}"' for key, value in data.items())
    return f'<img alt="{esc(alt)}"{attrs} src="data:image/png;base64,{figures.png_base64(fig)}">'


def table(header: Sequence[str], rows: Sequence[Sequence[object]], *, css: str = "") -> str:
    """An HTML table; cells are escaped unless they are :class:`Raw`."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if isinstance(c, Raw) else esc(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    klass = f" class='{esc(css)}'" if css else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def num(x: str | None) -> float:
    """``float(x)``, NaN for an empty or unreadable cell."""
    try:
        return float(x) if x not in (None, "") else math.nan
    except ValueError:
        return math.nan


def inline_markdown(line: str) -> str:
    """One line of markdown as HTML: a leading list marker dropped, ``**bold**`` and `` `code` `` kept,
    everything else escaped."""
    text = esc(re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", line))
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
