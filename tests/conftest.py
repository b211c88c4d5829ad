"""Fixtures shared by every test folder."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded nano model (``arlkit model init --size nano --seed 0``), built offline once per
    test session (a few seconds). Its weights are random; treat the directory as read-only."""
    from arlkit.policies.tiny import init_tiny_model

    return init_tiny_model("nano", tmp_path_factory.mktemp("tiny-model") / "nano", seed=0)
