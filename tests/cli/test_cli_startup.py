"""The command line starts fast: heavy libraries load only inside the commands that need them."""

from __future__ import annotations

import subprocess
import sys


def test_building_the_parser_does_not_import_torch() -> None:
    # every `arlkit` call builds the whole parser; torch (~2 s to import) loads only in commands that use it
    code = "import sys, arlkit.cli; arlkit.cli.build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
