"""Install hints name a command that works where arlkit is installed: the checkout of an editable
install, the wheel otherwise (arlkit is not on a package index)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arlkit import extras


def test_an_editable_install_is_told_its_checkout() -> None:
    root = Path(__file__).resolve().parents[1]
    assert extras.install_hint("gem") == f"pip install -e '{root}[gem]'"
    assert extras.install_hint("alfworld", make_target="install-extras").endswith("or `make install-extras` there")


def test_a_wheel_install_is_told_to_reinstall_the_wheel_with_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extras, "checkout", lambda: None)
    hint = extras.install_hint("webshop", make_target="install")
    assert hint.startswith("pip install 'PATH/arlkit-") and hint.count("-py3-none-any.whl[webshop]'") == 1
    assert "make" not in hint and "pip install 'arlkit[" not in hint
