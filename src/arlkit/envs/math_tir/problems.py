"""Math problems with exact answers: reasoning-gym's generators and a small shipped set.

Generated problems come from ``reasoning-gym`` (procedural generators with their own answer
scorers; extra ``arlkit[math]``). A difficulty level sets every attribute of the family's
reasoning-gym curriculum to that level (capped at the attribute's last one), so level 0 is the
curriculum's easiest configuration. Each (family, level, split) has its own generator seed; a
question appears in at most one level's test pool, and train problems avoid every test question
of their family, so the splits are disjoint by content. Success is the family's scorer returning 1.0 (partial credit is not success).

Shipped problems (``data/math_tir/problems.json``) are word problems written for arlkit with
integer or fraction answers; they are scored with ``math-verify`` on LaTeX only (its plain-text
path runs sympy's ``parse_expr``, an ``eval``, on the answer, which arlkit never does with model
text).

Every answer is scored in a worker process with a deadline (:class:`~arlkit.sandbox.deadline.DeadlinePool`):
sympy evaluates what the LaTeX says, and ``\\binom{10000000}{5000000}`` or ``\\Gamma(10000000)``
would run for hours in C, where no timeout inside the process reaches. A check that runs past its
deadline is killed and scores 0, as does a scorer that raises.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from arlkit.extras import install_hint
from arlkit.sandbox.deadline import CallFailed, DeadlinePool

__all__ = ["FAMILIES", "GENERATORS", "LEVELS", "SCORE_TIMEOUT_S", "SHIPPED_FILE", "MathProblem", "generated_problems",
           "score_answer", "shipped_problems"]

FAMILIES = (
    "basic_arithmetic", "chain_sum", "products", "gcd", "lcm", "prime_factorization", "fraction_simplification",
    "simple_equations", "count_primes", "count_bits",
)
"""The default reasoning-gym families: arithmetic, number theory, algebra and counting."""
LEVELS = (0, 1, 2)
GENERATORS = ("reasoning-gym",)
"""The distributions generated problems come from. Code blocks run with these masked, along with their
data and what they need beyond the sandbox's tools (:func:`arlkit.envs.answers.generator_packages`):
a program that could import them would rebuild the test pool from its seeds and print the answers."""
SHIPPED_FILE = Path(__file__).resolve().parents[2] / "data" / "math_tir" / "problems.json"
SCORE_TIMEOUT_S = 10.0
"""Default deadline of scoring one answer (a normal check takes milliseconds)."""


@dataclass(frozen=True)
class MathProblem:
    """One problem.

    Attributes:
        question: the problem text shown to the agent.
        answer: the reference answer (the generator's, or the shipped one).
        source: the reasoning-gym family, or ``arlkit`` for a shipped problem.
        level: the difficulty level (shipped problems: their own).
        metadata: what the family's scorer reads besides the answer (JSON-safe).
    """

    question: str
    answer: str
    source: str
    level: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def task_id(self) -> str:
        digest = hashlib.sha256(f"{self.source}\0{self.question}".encode()).hexdigest()[:10]
        return f"{self.source}-L{self.level}-{digest}"

    def to_payload(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer, "source": self.source, "level": self.level,
                "metadata": dict(self.metadata)}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> MathProblem:
        return cls(str(payload["question"]), str(payload["answer"]), str(payload["source"]), int(payload["level"]),
                   dict(payload.get("metadata") or {}))


_NEEDS = {
    "reasoning_gym": f"the math-tir environment's generated problems need reasoning-gym: {install_hint('math')}",
    "math_verify": "the math-tir environment's shipped problems are scored with math-verify: "
                   f"{install_hint('math')}",
}


def _reasoning_gym() -> Any:
    try:
        import reasoning_gym
    except ImportError as exc:
        raise ImportError(_NEEDS["reasoning_gym"]) from exc
    return reasoning_gym


def _seed(base: int, family: str, level: int, split: str) -> int:
    text = f"{base}:{family}:{level}:{split}"
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


@functools.lru_cache(maxsize=256)
def _dataset(family: str, level: int, seed: int, size: int) -> Any:
    rg = _reasoning_gym()
    from reasoning_gym.factory import create_curriculum, has_curriculum

    if family not in rg.factory.DATASETS:
        raise ValueError(f"unknown reasoning-gym family {family!r}; arlkit's defaults: {', '.join(FAMILIES)}")
    if not has_curriculum(family):
        return rg.create_dataset(family, seed=seed, size=size)
    curriculum = create_curriculum(family)
    for name, attribute in curriculum.attributes.items():
        curriculum.set_attr_level(name, min(level, len(attribute.levels) - 1))
    config = curriculum.generate_configuration({"seed": seed, "size": size})
    return rg.create_dataset(family, **{k: getattr(config, k) for k in config.__dataclass_fields__})


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _pool(family: str, level: int, base_seed: int, split: str, n: int, exclude: frozenset[str]) -> list[MathProblem]:
    """The first ``n`` distinct problems of one generator, skipping questions in ``exclude``."""
    size = max(4 * n + 64, 128)
    dataset = _dataset(family, level, _seed(base_seed, family, level, split), size)
    seen: set[str] = set()
    out: list[MathProblem] = []
    for index in range(size):
        entry = dataset[index]
        question = entry["question"]
        if question in seen or question in exclude:
            continue
        seen.add(question)
        out.append(MathProblem(question, str(entry["answer"]), family, level, _json_safe(entry["metadata"])))
        if len(out) == n:
            return out
    raise ValueError(f"{family} level {level} gives only {len(out)} distinct {split} problems (asked for {n})")


@functools.lru_cache(maxsize=64)
def _test_pools(family: str, levels: tuple[int, ...], base_seed: int, test_pool: int) -> dict[int, list[MathProblem]]:
    """Each level's test pool of ``family``; a question already in a lower level's pool is skipped
    (levels of one curriculum overlap: level 1's ranges include level 0's)."""
    pools: dict[int, list[MathProblem]] = {}
    seen: frozenset[str] = frozenset()
    for level in sorted(levels):
        pools[level] = _pool(family, level, base_seed, "test", test_pool, seen)
        seen = seen | {p.question for p in pools[level]}
    return pools


@functools.lru_cache(maxsize=64)
def generated_problems(
    split: str, n: int, families: tuple[str, ...], levels: tuple[int, ...], base_seed: int, test_pool: int
) -> tuple[MathProblem, ...]:
    """The first ``n`` problems of ``split``: families and levels in turn (problem ``i`` comes from
    combination ``i mod (families x levels)``). Each (family, level) has a test pool of
    ``test_pool`` problems, distinct across the family's levels; train problems avoid every test
    question of their family, so the splits are disjoint by content."""
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; valid choices: train, test")
    combos = [(f, lv) for lv in levels for f in families]
    per = -(-n // len(combos)) if n else 0
    if split == "test" and per > test_pool:
        raise ValueError(f"only {test_pool * len(combos)} test problems exist (asked for {n}); raise test_pool")
    columns = []
    for family, level in combos:
        pools = _test_pools(family, tuple(levels), base_seed, test_pool)
        if split == "test":
            columns.append(pools[level][:per])
        else:
            held_out = frozenset(p.question for pool in pools.values() for p in pool)
            columns.append(_pool(family, level, base_seed, "train", per, held_out))
    ordered = [column[i] for i in range(per) for column in columns]
    return tuple(ordered[:n])


def shipped_problems() -> list[MathProblem]:
    """arlkit's own problems (both splits; ``split`` in the file)."""
    raw = json.loads(SHIPPED_FILE.read_text(encoding="utf-8"))
    return [MathProblem(p["question"], str(p["answer"]), "arlkit", int(p.get("level", 0)), {"split": p["split"]})
            for p in raw]


_MAX_FREE_FORM_CHARS = 100
_RATIONAL = re.compile(r"\$?\s*(-?\d+)\s*(?:/\s*(\d+))?\s*\$?")
_LATEX_FRACTION = re.compile(r"\$?\s*(-?)\\[dt]?frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}\s*\$?")


def _rational(text: str) -> Fraction | None:
    """``text`` as an exact rational when it is an integer, ``a/b`` or ``\\frac{a}{b}``."""
    text = text.strip().replace(",", "") if re.fullmatch(r"[-\d,]+", text.strip()) else text.strip()
    match = _RATIONAL.fullmatch(text)
    try:
        if match:
            return Fraction(int(match.group(1)), int(match.group(2) or 1))
        match = _LATEX_FRACTION.fullmatch(text)
        if match:
            sign = -1 if match.group(1) else 1
            return sign * Fraction(int(match.group(2)), int(match.group(3)))
    except ZeroDivisionError:
        return None
    return None


def _verify_latex(answer: str, gold: str) -> bool:
    """Rationals compare exactly; anything else goes to math-verify's LaTeX path, when short and
    free of powers and factorials (the commonest runaways, ``9^{9^{9}}``, refused at once; the
    worker's deadline bounds the others)."""
    exact, expected = _rational(answer), _rational(gold)
    if exact is not None and expected is not None:
        return exact == expected
    if len(answer) > _MAX_FREE_FORM_CHARS or any(ch in answer for ch in "^!"):
        return False
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    try:
        from math_verify import LatexExtractionConfig, parse, verify
    except ImportError as exc:
        raise ImportError(_NEEDS["math_verify"]) from exc
    config = [LatexExtractionConfig(boxed_match_priority=0)]
    try:
        parsed_gold = parse(f"\\boxed{{{gold}}}", extraction_config=config, parsing_timeout=None)
        parsed = parse(f"\\boxed{{{answer}}}", extraction_config=config, parsing_timeout=None)
        return bool(parsed and parsed_gold and verify(parsed_gold, parsed, timeout_seconds=None))
    except Exception:  # noqa: BLE001 - a parser failure on untrusted text is a wrong answer
        return False


def _score_here(problem: MathProblem, answer: str) -> float:
    """The score of ``answer`` computed in this process, without a bound (workers run this)."""
    if problem.source == "arlkit":
        return 1.0 if _verify_latex(answer, problem.answer) else 0.0
    rg = _reasoning_gym()
    entry = {"question": problem.question, "answer": problem.answer, "metadata": dict(problem.metadata)}
    try:
        return float(rg.get_score_answer_fn(problem.source)(answer, entry))
    except Exception:  # noqa: BLE001 - a scorer that chokes on untrusted text scores 0
        return 0.0


def _warm_math_verify() -> None:
    """Load math-verify and its LaTeX grammar in a new worker, before its first deadline."""
    _verify_latex("x + 1", "1 + x")


def _warm_reasoning_gym() -> None:
    """Load reasoning-gym in a new worker, before its first deadline."""
    _reasoning_gym()


_SCORERS = {"math_verify": DeadlinePool(warm=_warm_math_verify),
            "reasoning_gym": DeadlinePool(warm=_warm_reasoning_gym)}
"""The workers of each scorer (shipped problems: math-verify; generated ones: reasoning-gym)."""


def score_answer(problem: MathProblem, answer: str, *, timeout_s: float = SCORE_TIMEOUT_S) -> float:
    """The score of ``answer`` (1.0 is correct): the family's own scorer, or math-verify, run in a
    worker process; a check that runs past ``timeout_s`` seconds is stopped and scores 0."""
    needed = "math_verify" if problem.source == "arlkit" else "reasoning_gym"
    if importlib.util.find_spec(needed) is None:  # said here, not hidden in a score of 0 from the worker
        raise ImportError(_NEEDS[needed])
    try:
        return _SCORERS[needed].call(_score_here, problem, answer, timeout_s=timeout_s)
    except CallFailed:
        return 0.0
