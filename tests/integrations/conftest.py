"""Fixtures of the integration tests; verl and its fakes are imported only by the tests that ask for them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir: Path) -> Any:
    """The nano model's tokenizer (ChatML; a Qwen2 model type, so verl picks its Qwen token builder)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def verl_fakes() -> ModuleType:
    """``tests/integrations/verl_fakes.py``: the fake server manager, the agent loop and the engine replay."""
    pytest.importorskip("verl", reason="verl is installed by `make test` (Makefile: VERL_PIN)")
    name = "arlkit_test_verl_fakes"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("verl_fakes.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
