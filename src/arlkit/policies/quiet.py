"""Silence transformers' progress bars around loads and saves (no torch import here: the CLI imports this)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["quiet_progress"]


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """Silence transformers' progress bars (one line of noise per save) for the block."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()
