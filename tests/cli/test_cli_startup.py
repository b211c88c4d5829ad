"""The command line starts fast: heavy libraries load only inside the commands that need them."""

from __future__ import annotations

import subprocess
import sys


def test_building_the_parser_does_not_import_torch() -> None:
    # every `arlkit` call builds the whole parser; torch (~2 s to import) loads only in commands that use it
    code = "import sys, arlkit.cli; arlkit.cli.build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


_ARLKIT = [sys.executable, "-c", "import sys; from arlkit.cli import main; sys.exit(main(sys.argv[1:]))"]


def test_version_names_the_installed_distribution() -> None:
    from importlib.metadata import version

    out = subprocess.run([*_ARLKIT, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"arlkit {version('arlkit')}"


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path, finish_child) -> None:  # type: ignore[no-untyped-def]
    # `arlkit eval ... | head -1`: the pipe closes after one line; no BrokenPipeError traceback, exit 0
    command = [*_ARLKIT, "eval", "--env", "frozenlake", "--tasks", "2", "--samples", "2",
               "--budgets", "full", "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline()
    proc.stdout.close()
    _, err = finish_child(proc)
    assert proc.returncode == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
