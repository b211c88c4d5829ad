"""Parsing model-written tool calls with :mod:`ast`: function names and literal arguments only.

Model text is **never** evaluated. It is parsed into a syntax tree and accepted only when every
statement is a call ``name(arg, key=arg, ...)`` (or one list of such calls) whose function is a
bare name and whose arguments are literals built from strings, numbers, ``True``/``False``/``None``,
lists, tuples and dicts with string keys (a leading minus sign on a number is allowed; an integer
has at most :data:`MAX_INT_DIGITS` digits, so it can be written back as text). Attribute
chains (``os.system``), ``*args``/``**kwargs``, a keyword given twice, lambdas, comprehensions,
names, operators, sub-calls, f-strings, sets and bytes are rejected with a message saying what was
found.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

__all__ = ["Call", "CallSyntaxError", "format_call", "parse_calls"]

MAX_DEPTH = 8
MAX_ITEMS = 1000
MAX_INT_DIGITS = 4000  # below Python's own limit on int-to-text conversion (4300 digits)
_INT_BOUND = 10**MAX_INT_DIGITS


class CallSyntaxError(ValueError):
    """The text is not a list of literal function calls; the message says why."""


@dataclass(frozen=True)
class Call:
    """One parsed call.

    Attributes:
        name: the function name.
        args: positional arguments (literal Python values).
        kwargs: keyword arguments as (name, value) pairs, in the order written.
    """

    name: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()


def format_call(name: str, arguments: dict[str, Any]) -> str:
    """Canonical text of a call with keyword arguments: ``cd(folder='docs')``."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


def _describe(node: ast.AST) -> str:
    kinds = {
        ast.Attribute: "an attribute access",
        ast.Lambda: "a lambda",
        ast.ListComp: "a comprehension",
        ast.SetComp: "a comprehension",
        ast.DictComp: "a comprehension",
        ast.GeneratorExp: "a generator expression",
        ast.Name: "a variable name",
        ast.Call: "a nested call",
        ast.BinOp: "an arithmetic expression",
        ast.BoolOp: "a boolean expression",
        ast.Compare: "a comparison",
        ast.JoinedStr: "an f-string",
        ast.Set: "a set",
        ast.Starred: "a starred argument",
        ast.Subscript: "a subscript",
        ast.IfExp: "a conditional expression",
        ast.NamedExpr: "an assignment expression",
        ast.Await: "an await",
    }
    for kind, text in kinds.items():
        if isinstance(node, kind):
            return text
    return type(node).__name__


_JSON_HINT = {"true": "True", "false": "False", "null": "None"}


def _literal(node: ast.AST, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise CallSyntaxError("an argument is nested too deeply")
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _INT_BOUND:
            raise CallSyntaxError(f"an integer literal has more than {MAX_INT_DIGITS} digits")
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise CallSyntaxError(f"unsupported literal {type(value).__name__} {value!r:.40}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = node.operand
        if (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, (int, float))
            and not isinstance(operand.value, bool)
        ):
            number: int | float = operand.value
            return -number if isinstance(node.op, ast.USub) else number
        raise CallSyntaxError("a sign is only allowed in front of a number")
    if isinstance(node, (ast.List, ast.Tuple)):
        if len(node.elts) > MAX_ITEMS:
            raise CallSyntaxError("a list argument is too long")
        return [_literal(e, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        if len(node.keys) > MAX_ITEMS:
            raise CallSyntaxError("a dict argument is too long")
        out: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            if key_node is None:
                raise CallSyntaxError("'**' inside a dict is not allowed")
            key = _literal(key_node, depth + 1)
            if not isinstance(key, str):
                raise CallSyntaxError("dict keys must be strings")
            out[key] = _literal(value_node, depth + 1)
        return out
    if isinstance(node, ast.Name) and node.id in _JSON_HINT:
        raise CallSyntaxError(f"{node.id!r} is not a literal; write {_JSON_HINT[node.id]}")
    raise CallSyntaxError(f"arguments must be literal values, found {_describe(node)}")


def _call(node: ast.AST) -> Call:
    if not isinstance(node, ast.Call):
        raise CallSyntaxError(f"expected a function call, found {_describe(node)}")
    if not isinstance(node.func, ast.Name):
        raise CallSyntaxError(
            f"call functions by their bare name; found {_describe(node.func)} (attribute chains are not allowed)"
        )
    args = []
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            raise CallSyntaxError("starred (*) arguments are not allowed")
        args.append(_literal(arg))
    kwargs = []
    for kw in node.keywords:
        if kw.arg is None:
            raise CallSyntaxError("'**' arguments are not allowed")
        if any(name == kw.arg for name, _ in kwargs):
            # ast.parse accepts f(a=1, a=2); Python's compiler refuses it, and so does arlkit.
            raise CallSyntaxError(f"keyword argument {kw.arg!r} is given twice in {node.func.id}()")
        kwargs.append((kw.arg, _literal(kw.value)))
    return Call(node.func.id, tuple(args), tuple(kwargs))


def parse_calls(text: str, *, max_chars: int = 4000) -> list[Call]:
    """The calls written in ``text``: one per line or separated by ``;``, or one list ``[f(), g()]``.

    A surrounding Markdown code fence is ignored. Raises :class:`CallSyntaxError` for anything
    else; never evaluates anything.
    """
    if not isinstance(text, str):
        raise CallSyntaxError("the action is not text")
    source = text.strip()
    if source.startswith("```") and source.endswith("```") and len(source) >= 6:
        source = source[3:-3]
        first, _, rest = source.partition("\n")
        source = rest if first.strip().isidentifier() or not first.strip() else source
        source = source.strip()
    if len(source) > max_chars:
        raise CallSyntaxError(f"the action is {len(source)} characters long; the limit is {max_chars}")
    if not source:
        raise CallSyntaxError("no function call found")
    try:
        tree = ast.parse(source, mode="exec")
    except SyntaxError as exc:
        raise CallSyntaxError(f"not valid call syntax: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise CallSyntaxError(f"not valid call syntax: {type(exc).__name__}") from None
    calls: list[Call] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            raise CallSyntaxError(f"only function calls are allowed, found a statement of type {type(stmt).__name__}")
        value = stmt.value
        if isinstance(value, (ast.List, ast.Tuple)) and len(tree.body) == 1:
            if not value.elts:
                raise CallSyntaxError("the list of calls is empty")
            calls.extend(_call(e) for e in value.elts)
        else:
            calls.append(_call(value))
    if not calls:
        raise CallSyntaxError("no function call found")
    return calls
