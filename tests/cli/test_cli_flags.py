"""``arlkit eval``'s flags are tied to ``EvalConfig``'s fields: every flag sets a field, every field has a
flag, and ``--config FILE.yaml`` takes the same config with the flags overriding its keys."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest

from arlkit.cli import build_parser, main
from arlkit.cli.eval_cmd import EVAL_FLAGS
from arlkit.cli.flags import field_default, field_type
from arlkit.recipes.eval import EvalConfig

NOT_FIELDS = {"--config", "--out", "--help", "--list-envs", "--list-policies"}
"""Options of ``arlkit eval`` that are no config field: the file to read, the run directory, the help and
the listings of what can be evaluated."""

WITHOUT_FLAG: dict[str, str] = {}
"""User-facing EvalConfig fields deliberately without a flag, and why (none today: give them with --config)."""


def _leaves(cls: type, prefix: str = "") -> list[str]:
    """Dotted names of the fields of ``cls``, sections (dataclass fields) expanded; a mapping field is one leaf."""
    out = []
    for f in dataclasses.fields(cls):
        tp = typing.get_type_hints(cls)[f.name]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            out += _leaves(tp, f"{prefix}{f.name}.")
        else:
            out.append(f"{prefix}{f.name}")
    return out


def _eval_parser_options() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["eval"]  # type: ignore[union-attr]
    return {o for a in sub._actions for o in a.option_strings if o.startswith("--") and not o.startswith("--no-")}


def test_every_eval_flag_sets_a_field_and_every_field_has_a_flag() -> None:
    fields = _leaves(EvalConfig)
    for flag in EVAL_FLAGS:
        field_type(EvalConfig, flag.field)  # KeyError: the flag names no field
        assert flag.field in fields, flag
    flagged = {flag.field for flag in EVAL_FLAGS}
    assert len(flagged) == len(EVAL_FLAGS), "two flags set the same field"
    assert set(fields) - flagged == set(WITHOUT_FLAG), "fields without a flag (add one, or explain in WITHOUT_FLAG)"
    # the parser has exactly these flags (plus --config / --out)
    assert _eval_parser_options() == {f.option for f in EVAL_FLAGS} | NOT_FIELDS


def test_choices_and_defaults_come_from_the_fields() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["eval"]  # type: ignore[union-attr]
    actions = {a.option_strings[0]: a for a in sub._actions if a.option_strings}
    assert actions["--budget-mode"].choices == ["announced", "hidden"]
    assert actions["--counters"].choices == ["system", "observation"]
    assert actions["--split"].choices == ["train", "test"]
    assert all(actions[f.option].default is None for f in EVAL_FLAGS)  # not given: the config's value stays
    assert f"(default {field_default(EvalConfig, 'bootstrap')})" in actions["--bootstrap"].help


def _identity(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


def test_eval_config_file_with_flags_overriding_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text("env: {name: frozenlake, args: {size: 4, t_max: 8}}\npolicies: [random]\ntasks: 2\n"
                      "samples: 2\nbudgets: ['50%', full]\nprompt: {budget_mode: hidden, history: 1}\n"
                      "bootstrap: 100\nallow_errors: true\n")
    assert main(["eval", "--config", str(config), "--out", str(tmp_path / "file")]) == 0
    from_file = _identity(tmp_path / "file")
    assert (from_file["env"]["args"]["size"], from_file["tasks"], from_file["prompt"]["budget_mode"],
            from_file["prompt"]["history"]) == (4, 2, "hidden", 1)
    # a flag wins over the file's key; the file's other keys stay
    assert main(["eval", "--config", str(config), "--out", str(tmp_path / "flags"), "--tasks", "3",
                 "--env-arg", "size=5", "--history", "null", "--policy", "oracle", "--no-allow-errors"]) == 0
    flags = _identity(tmp_path / "flags")
    args = flags["env"]["args"]
    assert (args["size"], args["t_max"], flags["tasks"], flags["prompt"]["history"]) == (5, 8, 3, None)
    assert flags["policies"] == ["oracle"] and flags["prompt"]["budget_mode"] == "hidden"
    assert flags["budgets"] == ["50%", "full"]
    # the same run given by flags alone is the same run (resumes)
    capsys.readouterr()
    assert main(["eval", "--out", str(tmp_path / "flags"), "--env-arg", "size=5", "--env-arg", "t_max=8",
                 "--policy", "oracle", "--tasks", "3", "--samples", "2", "--budgets", "50%,full",
                 "--budget-mode", "hidden", "--bootstrap", "100"]) == 0
    assert "resumed: kept" in capsys.readouterr().out
