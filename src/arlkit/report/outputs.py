"""Writing an analysis's files: ``<kind>.csv``, ``<kind>.png``, ``<kind>.md`` and ``<kind>.json``.

Every file is written atomically (:func:`arlkit.rundir.atomic_path`). The JSON file carries
``"arlkit_analysis": <kind>`` plus the headline numbers; ``arlkit report`` finds analyses by it.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arlkit.metrics.bootstrap import Estimate
from arlkit.envs.parsing import valid_utf8
from arlkit.rundir import atomic_path, atomic_write_text

__all__ = ["ANALYSIS_FORMAT", "estimate_dict", "fmt_estimate", "fmt_pct", "save_figure", "write_csv", "write_json", "write_text"]

ANALYSIS_FORMAT = 1
"""Version of the analysis files' layout (recorded in every ``<kind>.json``)."""


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, as valid UTF-8 (model text may hold lone surrogates:
    they become U+FFFD, as in ``trajectories.jsonl``)."""
    atomic_write_text(path, valid_utf8(text)[0])


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A CSV file with ``header``; floats with 6 significant digits, NaN and ``None`` empty."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8", errors="replace") as handle:
        writer = csv.writer(handle)  # errors="replace": model text, see write_text
        writer.writerow(header)
        for row in rows:
            writer.writerow([_cell(v) for v in row])


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_json(path: Path, kind: str, data: Mapping[str, Any]) -> None:
    """``<kind>.json``: ``{"arlkit_analysis": kind, "format": 1, ...data}`` (NaN written as null)."""
    payload = {"arlkit_analysis": kind, "format": ANALYSIS_FORMAT, **_clean(dict(data))}
    write_text(path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def save_figure(fig: Any, path: Path, *, dpi: int = 110) -> None:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi)
    finally:
        plt.close(fig)


def estimate_dict(est: Estimate | None) -> dict[str, float] | None:
    """An :class:`Estimate` as ``{"value", "low", "high"}``."""
    return None if est is None else {"value": est.value, "low": est.low, "high": est.high}


def fmt_estimate(est: Estimate | None, digits: int = 3) -> str:
    """``0.512 [0.401, 0.623]``."""
    if est is None or math.isnan(est.value):
        return "n/a"
    return f"{est.value:.{digits}f} [{est.low:.{digits}f}, {est.high:.{digits}f}]"


def fmt_pct(est: Estimate | None) -> str:
    """``51.2% [40.1, 62.3]``."""
    if est is None or math.isnan(est.value):
        return "n/a"
    return f"{100 * est.value:.1f}% [{100 * est.low:.1f}, {100 * est.high:.1f}]"
