"""How a shipped problem is declared before ``build.py`` turns it into ``problems.json``.

A problem gives its statement, a reference solution, the inputs of its public tests, extra hidden
inputs (edge cases) and a generator of random inputs. Expected outputs are never written by hand:
``build.py`` runs the reference in the sandbox, and, when a problem has a ``brute`` solution
(slow but obviously right), checks that both agree on every input small enough for it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Input = Any  # stdin text for stdio problems; the argument list for function problems


@dataclass(frozen=True)
class P:
    """One problem definition.

    Attributes:
        id: stable identifier (kebab case).
        title: short name.
        difficulty: easy, medium or hard.
        statement: the text shown to the agent, without examples (they are added from ``public``).
        reference: a correct, efficient program.
        public: inputs of the public tests (shown as examples in the statement).
        hidden: extra hand-picked inputs of hidden tests (the public ones are hidden tests too).
        gen: ``gen(rng, i)`` returns the input of random hidden test ``i``.
        n_random: how many random hidden tests.
        fn: the function name for function-call problems; empty for stdin/stdout problems.
        brute: an obviously correct (maybe slow) program to cross-check the reference.
        brute_limit: the brute check skips inputs longer than this many characters.
    """

    id: str
    title: str
    difficulty: str
    statement: str
    reference: str
    public: list[Input]
    hidden: list[Input] = field(default_factory=list)
    gen: Callable[[random.Random, int], Input] | None = None
    n_random: int = 6
    fn: str = ""
    brute: str = ""
    brute_limit: int = 2000


def ints(values: list[int]) -> str:
    """A line of space-separated integers."""
    return " ".join(map(str, values))


def rand_list(rng: random.Random, n: int, lo: int, hi: int) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]
