"""Rule-based program mutations for the error-state analysis (docs/metrics.md#error-states; RT App. B.5).

Four single-site rules over the Python AST:

- ``flip_comparison``: negate one comparison operator (``<`` to ``>=``, ``==`` to ``!=``, ``in`` to
  ``not in``, ...);
- ``off_by_one``: add or subtract 1 from one integer constant, or from one ``range(...)`` bound
  that is not a constant;
- ``swap_operands``: swap the sides of one non-commutative binary operation (``-``, ``/``, ``//``,
  ``%``, ``**``, ``<<``, ``>>``) or of one single comparison;
- ``drop_statement``: remove one statement (a body left empty gets ``pass``).

Each mutant is rebuilt with ``ast.unparse`` and compiled before it is returned, so every mutant
parses. Sites are numbered in a fixed traversal order, so the list of mutants of a program is
deterministic. Whether a mutant is a real *error* (fewer tests passed) needs the tests: see
``CodeEnv.error_mutation``.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

__all__ = ["MUTATION_KINDS", "Mutation", "enumerate_mutations", "random_mutation"]

MUTATION_KINDS = ("flip_comparison", "off_by_one", "swap_operands", "drop_statement")

_NEGATED: dict[type, type] = {
    ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip
_MIRRORED: dict[type, type] = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)


@dataclass(frozen=True)
class Mutation:
    """One mutant.

    Attributes:
        kind: one of :data:`MUTATION_KINDS`.
        site: index of the mutated site among the sites of this kind.
        description: what changed, e.g. ``"line 4: < became >="``.
        program: the mutated program (it parses).
    """

    kind: str
    site: int
    description: str
    program: str


class _Mutator(ast.NodeTransformer):
    """Counts the sites of one kind; mutates the ``target``-th (or none when ``target`` is -1)."""

    def __init__(self, kind: str, target: int, delta: int = 1) -> None:
        self.kind, self.target, self.delta = kind, target, delta
        self.count = 0
        self.description = ""

    def _hit(self) -> bool:
        hit = self.count == self.target
        self.count += 1
        return hit

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if self.kind == "flip_comparison":
            for i, op in enumerate(node.ops):
                if type(op) in _NEGATED and self._hit():
                    new = _NEGATED[type(op)]()
                    self.description = f"line {node.lineno}: {_op_text(op)} became {_op_text(new)}"
                    node.ops[i] = new
        elif self.kind == "swap_operands" and len(node.ops) == 1 and type(node.ops[0]) in (*_MIRRORED, ast.Eq, ast.NotEq):
            if self._hit():
                node.left, node.comparators[0] = node.comparators[0], node.left
                self.description = f"line {node.lineno}: swapped the sides of a comparison"
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if self.kind == "swap_operands" and isinstance(node.op, _NON_COMMUTATIVE) and self._hit():
            node.left, node.right = node.right, node.left
            self.description = f"line {node.lineno}: swapped the operands of {_op_text(node.op)}"
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if self.kind == "off_by_one" and type(node.value) is int and self._hit():
            self.description = f"line {node.lineno}: {node.value} became {node.value + self.delta}"
            return ast.copy_location(ast.Constant(node.value + self.delta), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if self.kind == "off_by_one" and isinstance(node.func, ast.Name) and node.func.id == "range":
            for i, arg in enumerate(node.args[:2]):
                if not isinstance(arg, ast.Constant) and self._hit():
                    op = ast.Add() if self.delta > 0 else ast.Sub()
                    node.args[i] = ast.copy_location(ast.BinOp(arg, op, ast.Constant(1)), arg)
                    self.description = f"line {node.lineno}: a range bound moved by {self.delta:+d}"
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if self.kind == "drop_statement":
            for name in ("body", "orelse", "finalbody"):
                stmts = getattr(node, name, None)
                if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                    kept = []
                    for stmt in stmts:
                        if not _is_docstring(stmt) and self._hit():
                            self.description = f"line {stmt.lineno}: dropped `{_first_line(stmt)}`"
                            continue
                        kept.append(stmt)
                    setattr(node, name, kept or ([ast.Pass()] if name != "orelse" and name != "finalbody" else []))
        return super().generic_visit(node)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _first_line(stmt: ast.stmt) -> str:
    text = ast.unparse(stmt).splitlines()[0] if stmt else ""
    return text[:60] + ("..." if len(text) > 60 else "")


def _op_text(op: ast.AST) -> str:
    symbols = {
        ast.Lt: "<", ast.GtE: ">=", ast.Gt: ">", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!=",
        ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Sub: "-",
        ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
    }  # fmt: skip
    return symbols.get(type(op), type(op).__name__)


def _fill_empty_bodies(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        for name in ("body",):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and not stmts and not isinstance(node, (ast.Lambda, ast.IfExp)):
                setattr(node, name, [ast.Pass()])
        if isinstance(node, ast.Try) and not node.handlers and not node.finalbody:
            node.finalbody = [ast.Pass()]


def _apply(program: str, kind: str, site: int, delta: int) -> tuple[str, str] | None:
    mutant = ast.parse(program)  # a fresh tree per mutant (re-parsing is cheaper than deepcopy)
    mutator = _Mutator(kind, site, delta)
    mutant = mutator.visit(mutant)
    if not mutator.description:
        return None
    _fill_empty_bodies(mutant)
    ast.fix_missing_locations(mutant)
    try:
        text = ast.unparse(mutant)
        compile(text, "<mutant>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return None
    return text, mutator.description


def _site_count(program: str, kind: str) -> int:
    counter = _Mutator(kind, -1)
    counter.visit(ast.parse(program))
    return counter.count


def enumerate_mutations(program: str, kinds: tuple[str, ...] = MUTATION_KINDS) -> list[Mutation]:
    """Every single-site mutant of ``program`` (both directions for off-by-one), deduplicated,
    none equal to the original. An unparsable program has no mutants."""
    for kind in kinds:
        if kind not in MUTATION_KINDS:
            raise ValueError(f"unknown mutation kind {kind!r}; valid choices: {', '.join(MUTATION_KINDS)}")
    try:
        original = ast.unparse(ast.parse(program))
    except (SyntaxError, ValueError, RecursionError):
        return []
    seen = {original}
    out = []
    for kind in kinds:
        for site in range(_site_count(program, kind)):
            for delta in (1, -1) if kind == "off_by_one" else (1,):
                made = _apply(program, kind, site, delta)
                if made is not None and made[0] not in seen:
                    seen.add(made[0])
                    out.append(Mutation(kind, site, made[1], made[0]))
    return out


def random_mutation(program: str, rng: random.Random, kinds: tuple[str, ...] = MUTATION_KINDS) -> Mutation | None:
    """One mutant drawn uniformly from :func:`enumerate_mutations` (``None`` when there is none)."""
    mutants = enumerate_mutations(program, kinds)
    return rng.choice(mutants) if mutants else None
