"""``--help`` of every command and sub-command reads as plain text: the module docstrings it shows lose
their reStructuredText markup (roles, double backquotes)."""

from __future__ import annotations

import argparse
import re

from arlkit.cli import build_parser, plain_text

MARKUP = re.compile(r"``|:(mod|func|class|meth|data|attr|obj|exc):`")


def _parsers(parser: argparse.ArgumentParser, name: str = "arlkit") -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found += _parsers(sub, f"{name} {sub_name}")
    return found


def test_no_help_text_shows_markup() -> None:
    parsers = _parsers(build_parser())
    assert len(parsers) > 20  # every command and the analyze/model/budgetmix sub-commands
    marked = [name for name, parser in parsers if MARKUP.search(parser.format_help())]
    assert not marked, marked


def test_markup_becomes_the_names_it_marks() -> None:
    text = "see :mod:`~arlkit.recipes.demo`, :func:`arlkit.recipes.run_eval` and ``--quick``"
    assert plain_text(text) == "see demo, arlkit.recipes.run_eval and --quick"


def test_ctrl_c_says_how_to_continue_where_a_command_can(monkeypatch, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from arlkit.cli import main, serve_cmd, train_cmd

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(serve_cmd, "_handle", interrupted)
    monkeypatch.setattr(train_cmd, "_handle", interrupted)
    assert main(["serve", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "arlkit serve: stopped\n"  # a server has nothing to resume
    assert main(["train", "--out", str(tmp_path / "run")]) == 130
    assert "re-run it with --resume" in capsys.readouterr().err  # train resumes only when asked to
