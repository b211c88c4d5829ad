"""The package's layers, read from docs/architecture.md: every import (at module level, inside a
function, or a string naming an arlkit module) points down the layers or stays inside its own part,
the doc's layers name exactly the package's parts, and ``cli`` imports only ``recipes``, ``config``
and its own modules."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import arlkit

PACKAGE = Path(arlkit.__file__).resolve().parent
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

_MODULE_PATH = re.compile(r"arlkit(\.[A-Za-z_][A-Za-z0-9_]*)+")


def read_layers(text: str) -> tuple[tuple[str, ...], ...]:
    """The layers of the doc's ```` ```layers ```` block, bottom up. The block lists the top layer
    first, one layer a line; a line's names (packages as ``name/``, modules as ``name``) come before
    its first run of two or more spaces, its description after."""
    block = re.search(r"^```layers\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert block, "docs/architecture.md has no ```layers block"
    layers = []
    for line in block.group(1).splitlines():
        if line.strip():
            names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            layers.append(tuple(name.rstrip("/") for name in names.split()))
    return tuple(reversed(layers))


LAYERS = read_layers(DOC.read_text(encoding="utf-8"))
"""Bottom up; ``arlkit/__init__.py`` (the version only) counts as the bottom layer."""
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def _part(module: str) -> str:
    """The top-level part of ``arlkit.<part>...`` (``arlkit`` itself for the package's root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "arlkit"


def _is_module(name: str) -> bool:
    """Whether ``arlkit....`` ``name`` is a module or package of the source tree."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _string_module(node: ast.AST) -> str | None:
    """The module a string names: a constant that is a whole ``arlkit.a.b`` path of an existing module,
    or the dotted head of an f-string (``f"arlkit.recipes.{name}"`` names ``arlkit.recipes``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        head = str(node.values[0].value)
        text = head.rpartition(".")[0] if head.startswith("arlkit.") else ""
    else:
        return None
    return text if _MODULE_PATH.fullmatch(text) and _is_module(text) else None


def _imports(path: Path, module: str | None = None) -> list[tuple[int, str]]:
    """``(line, imported module)`` of every arlkit import in ``path``: import statements anywhere and
    strings naming an arlkit module (``importlib.import_module``'s argument, a registry's modules to
    load, a ``python -m`` command); ``module`` is its dotted name, by default from its place in the package."""
    module = module or _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            names = [name] if node.module or not node.level else [f"{name}.{a.name}" for a in node.names]
            found += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif (named := _string_module(node)) is not None:
            found.append((getattr(node, "lineno", 0), named))
    return [(line, name) for line, name in found if name == "arlkit" or name.startswith("arlkit.")]


def _files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _parts() -> set[str]:
    return {_part(_module(p)) for p in _files()} - {"arlkit"}


def layer_problems(layers: Iterable[Iterable[str]], parts: set[str]) -> list[str]:
    """How ``layers`` and the package's ``parts`` disagree: parts with no layer, names that are no
    part, names in two layers."""
    listed = [name for names in layers for name in names]
    problems = [f"{part}: a part of the package with no layer in docs/architecture.md"
                for part in sorted(parts - set(listed))]
    problems += [f"{name}: in docs/architecture.md's layers but no part of the package"
                 for name in sorted(set(listed) - parts)]
    problems += [f"{name}: in more than one layer" for name in sorted({n for n in listed if listed.count(n) > 1})]
    return problems


def upward_imports(path: Path, module: str | None = None, rank: dict[str, int] = RANK) -> list[str]:
    """The imports of ``path`` that do not point down the layers (same layer, other part: sideways)."""
    module = module or _module(path)
    source = _part(module)
    found = []
    for line, name in _imports(path, module):
        target = _part(name)
        if target == source or (target == "arlkit" and name == "arlkit"):
            continue
        if source == "arlkit" or rank[target] >= rank[source]:
            found.append(f"{path.name}:{line} ({source}) imports {name} ({target})")
    return found


def cli_imports_beyond_recipes_and_config(files: Iterable[tuple[Path, str]]) -> list[str]:
    """Imports of ``cli`` modules (``(path, dotted name)`` pairs) of anything but ``recipes``,
    ``config``, ``cli`` itself and the package's root: what the rule "cli is argument parsing only"
    refuses (docs/architecture.md)."""
    found = []
    for path, module in files:
        for line, name in _imports(path, module):
            if _part(name) not in ("recipes", "config", "cli", "arlkit"):
                found.append(f"{module}:{line} imports {name}")
    return found


def _cli_files() -> list[tuple[Path, str]]:
    return [(path, _module(path)) for path in _files() if _part(_module(path)) == "cli"]


def test_cli_imports_only_recipes_and_config() -> None:
    found = cli_imports_beyond_recipes_and_config(_cli_files())
    assert not found, "cli imports beyond recipes, config and its own modules:\n" + "\n".join(found)


def test_the_doc_names_every_part_of_the_package_once() -> None:
    problems = layer_problems(LAYERS, _parts())
    assert not problems, "docs/architecture.md's layers and the package disagree:\n" + "\n".join(problems)


def test_imports_point_down_the_layers() -> None:
    upward = [f"{path.relative_to(PACKAGE.parent)}: {found}" for path in _files() for found in upward_imports(path)]
    assert not upward, "imports that do not point down the layers:\n" + "\n".join(upward)


def test_the_check_sees_a_planted_upward_import(tmp_path: Path) -> None:
    # The walker must find imports inside functions and relative ones (else the test above is vacuous).
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from arlkit.recipes.eval import run_eval\n    from ..rollout import engine\n",
                       encoding="utf-8")
    names = [name for _, name in _imports(planted, module="arlkit.envs.planted")]
    assert names == ["arlkit.recipes.eval", "arlkit.rollout"]
    assert len(upward_imports(planted, module="arlkit.envs.planted")) == 2  # both point up from envs


def test_the_check_sees_planted_string_imports(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import importlib, logging\n"
        "MODULES = ('arlkit.envs.frozenlake', 'arlkit.recipes.eval')\n"  # a registry's modules: one stays, one up
        "def f(name):\n"
        "    importlib.import_module('arlkit.policies.hf')\n"  # up from envs
        "    importlib.import_module(f'arlkit.train.{name}')\n"  # an f-string names its head: up
        "    logging.getLogger('arlkit.verl')\n"  # a logger name, no module: not an import
        "    return 'see arlkit.recipes.eval'\n",  # prose, not a whole module path: not an import
        encoding="utf-8")
    names = [name for _, name in _imports(planted, module="arlkit.envs.planted")]
    assert names == ["arlkit.envs.frozenlake", "arlkit.recipes.eval", "arlkit.policies.hf", "arlkit.train"], names
    upward = upward_imports(planted, module="arlkit.envs.planted")
    assert [u.split(" imports ")[1] for u in upward] == [
        "arlkit.recipes.eval (recipes)", "arlkit.policies.hf (policies)", "arlkit.train (train)"], upward


def test_a_sideways_import_counts_as_upward(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from arlkit.algos import agg_loss\n", encoding="utf-8")
    assert upward_imports(planted, module="arlkit.envs.planted")  # envs and algos share a layer


def test_the_layers_come_from_the_doc_and_a_mismatch_fails() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert LAYERS[0] == ("config",) and LAYERS[-1] == ("__main__",) and "budgets" in RANK
    block = text[text.index("```layers"):]
    budgets_line = next(line for line in block.splitlines() if line.split()[:1] == ["budgets"])
    without_budgets = text.replace(budgets_line, budgets_line.replace("budgets ", "        ", 1))
    assert layer_problems(read_layers(without_budgets), _parts()) == [
        "budgets: a part of the package with no layer in docs/architecture.md"]
    with_gym = text.replace("```layers\n", "```layers\n gym            Gymnasium envs\n", 1)
    assert layer_problems(read_layers(with_gym), _parts()) == [
        "gym: in docs/architecture.md's layers but no part of the package"]
    twice = text.replace("```layers\n", "```layers\n envs/          again\n", 1)
    assert layer_problems(read_layers(twice), _parts()) == ["envs: in more than one layer"]


def test_the_cli_check_sees_a_planted_import(tmp_path: Path) -> None:
    assert len(_cli_files()) > 10  # every command module is checked, not none
    planted = tmp_path / "planted.py"
    planted.write_text("from arlkit.recipes import run_eval\nfrom arlkit.config import load\n"
                       "from arlkit.cli.flags import Flag\nfrom arlkit.envs import list_envs\n"
                       "def handle():\n    from arlkit.rundir import hold_run_dir\n", encoding="utf-8")
    assert cli_imports_beyond_recipes_and_config([(planted, "arlkit.cli.planted")]) == [
        "arlkit.cli.planted:4 imports arlkit.envs", "arlkit.cli.planted:6 imports arlkit.rundir"]
