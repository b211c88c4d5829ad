"""The wheel carries the README's starter files: ``configs/`` and ``examples/`` go into the package as
``arlkit/data/starter`` (``arlkit init`` writes them into a folder); an editable install reads them from
the checkout instead. Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

STARTER = ("configs", "examples")


class BuildWithStarter(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "arlkit" / "data" / "starter"
        for name in STARTER:
            if (Path(name)).is_dir():
                shutil.copytree(name, target / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithStarter})
