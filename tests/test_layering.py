"""The package's layers (docs/architecture.md): every import, at module level or inside a function,
points down the layers or stays inside its own package."""

from __future__ import annotations

import ast
from pathlib import Path

import arlkit

PACKAGE = Path(arlkit.__file__).resolve().parent

LAYERS: tuple[tuple[str, ...], ...] = (
    ("config",),
    ("budgets", "rundir", "sandbox", "data"),
    ("envs", "algos"),
    ("policies",),
    ("rollout",),
    ("metrics", "train"),
    ("analysis",),
    ("report",),
    ("recipes",),
    ("integrations", "gym"),
    ("cli",),
    ("__main__",),
)
"""Bottom up; ``arlkit/__init__.py`` (the version only) counts as the bottom layer."""
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def _part(module: str) -> str:
    """The top-level part of ``arlkit.<part>...`` (``arlkit`` itself for the package's root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "arlkit"


def _imports(path: Path, module: str | None = None) -> list[tuple[int, str]]:
    """``(line, imported module)`` of every arlkit import in ``path`` (``module``: its dotted name,
    by default from its place in the package)."""
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
    return [(line, name) for line, name in found if name == "arlkit" or name.startswith("arlkit.")]


def _files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {_part(_module(p)) for p in _files()} - {"arlkit"}
    assert parts <= set(RANK), f"parts with no layer in LAYERS: {sorted(parts - set(RANK))}"


def test_imports_point_down_the_layers() -> None:
    upward = []
    for path in _files():
        source = _part(_module(path))
        for line, name in _imports(path):
            target = _part(name)
            if target == source or (target == "arlkit" and name == "arlkit"):
                continue
            if source == "arlkit" or RANK[target] >= RANK[source]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({source}) imports {name} ({target})")
    assert not upward, "imports that do not point down the layers:\n" + "\n".join(upward)


def test_the_check_sees_a_planted_upward_import(tmp_path: Path) -> None:
    # The walker must find imports inside functions and relative ones (else the test above is vacuous).
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from arlkit.recipes.eval import run_eval\n    from ..rollout import engine\n",
                       encoding="utf-8")
    names = [name for _, name in _imports(planted, module="arlkit.envs.planted")]
    assert names == ["arlkit.recipes.eval", "arlkit.rollout"]
    assert all(RANK[_part(name)] > RANK["envs"] for name in names)  # both point up from envs
