"""Fixtures shared by every test folder."""

from __future__ import annotations

from pathlib import Path

import pytest

# tests/data holds task fixtures, among them a Terminal-Bench task whose own tests (run inside the
# sandbox by the terminal environment) must not be collected here.
collect_ignore = ["data"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded nano model (``arlkit model init --size nano --seed 0``), built offline once per
    test session (a few seconds). Its weights are random; treat the directory as read-only."""
    from arlkit.rollout.corpus import init_tiny_model

    return init_tiny_model("nano", tmp_path_factory.mktemp("tiny-model") / "nano", seed=0)


@pytest.fixture(scope="session")
def data_script():
    """``data_script("make_sql_tasks")``: a generator script of ``scripts/data`` loaded as a module
    (the generators live outside the package; the tests check the shipped data equals their output)."""
    import importlib.util
    import sys

    scripts = Path(__file__).resolve().parents[1] / "scripts" / "data"

    def load(name: str):  # type: ignore[no-untyped-def]
        spec = importlib.util.spec_from_file_location(f"arlkit_data_script_{name}", scripts / f"{name}.py")
        assert spec is not None and spec.loader is not None, name
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
        return module

    return load
