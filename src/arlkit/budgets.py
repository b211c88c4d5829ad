"""The one parser of budget settings: ``full`` (T_max), ``budgetmix`` (BudgetMix's candidates), a
percentage of T_max (``25%``, rounded up in exact arithmetic) or whole turns (``10``). An evaluation's
budget list takes :data:`EVAL_BUDGETS`, a training or behaviour-cloning run's budget
:data:`TRAIN_BUDGETS`; every caller gets the same errors."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from arlkit.config import ConfigError

__all__ = ["EVAL_BUDGETS", "TRAIN_BUDGETS", "budget_candidates", "check_budget", "resolve_budget", "resolve_budgets"]


EVAL_BUDGETS = ("full", "percent", "turns")  # the forms of an evaluation's budget list (arlkit eval --budgets)
TRAIN_BUDGETS = ("full", "budgetmix", "percent", "turns")  # of a training or behaviour cloning run's budget
_FORMS = {"full": "full (T_max)", "budgetmix": "budgetmix", "percent": "a percentage of T_max like 25%",
          "turns": "a whole number of turns"}


def budget_candidates(t_max: int) -> list[int]:
    """BudgetMix's candidate budgets for ``t_max``: ``(i*t_max + 9) // 10`` for i = 1..10, distinct,
    ascending (T_max 10 -> 1..10; 24 -> 3,5,8,10,12,15,17,20,22,24; 70 -> 7,14,...,70)."""
    if t_max < 1:
        raise ValueError(f"t_max must be >= 1, got {t_max}")
    return sorted({(i * t_max + 9) // 10 for i in range(1, 11)})


def check_budget(spec: str | int, forms: Sequence[str] = TRAIN_BUDGETS) -> tuple[str, Fraction | None]:
    """``(form, number)`` of a budget setting: ``("full", None)``, ``("budgetmix", None)``,
    ``("percent", 25)`` or ``("turns", 10)``; a form not in ``forms`` raises :class:`ConfigError`
    listing those that are."""
    text = str(spec).strip()
    form, number = text, None
    try:
        if form not in ("full", "budgetmix"):
            form, number = ("percent", Fraction(text[:-1])) if text.endswith("%") else ("turns", Fraction(text))
            if form == "turns" and number.denominator != 1:
                raise ValueError
    except (ValueError, ZeroDivisionError):
        form = ""
    if form not in forms:
        wanted = [_FORMS[f] for f in _FORMS if f in forms]
        raise ConfigError(f"budget {text!r} is not {', '.join(wanted[:-1])} or {wanted[-1]}")
    return form, number


def resolve_budget(spec: str | int, t_max: int, forms: Sequence[str] = TRAIN_BUDGETS) -> tuple[int, ...]:
    """The budgets in turns of one setting for an environment with ``t_max``: ``full`` is T_max,
    ``budgetmix`` its candidates (:func:`budget_candidates`), a percentage p is ``ceil(p * T_max / 100)``
    computed exactly (30% of 10 is 3, not 4), a number is turns. Each must be in [1, T_max]."""
    form, number = check_budget(spec, forms)
    if form == "full":
        return (t_max,)
    if form == "budgetmix":
        return tuple(budget_candidates(t_max))
    assert number is not None
    turns = int(-((-number * t_max) // 100) if form == "percent" else number)  # ceil in exact arithmetic
    if not 1 <= turns <= t_max:
        raise ConfigError(f"budget {str(spec).strip()!r} gives {turns} turns; budgets must be between 1 and "
                          f"T_max = {t_max}")
    return (turns,)


def resolve_budgets(specs: Sequence[str | int], t_max: int, forms: Sequence[str] = EVAL_BUDGETS) -> list[int]:
    """Sorted distinct turn counts of a budget list (``["25%", "50%", 10]``; :func:`resolve_budget`)."""
    out = {turns for spec in specs for turns in resolve_budget(spec, t_max, forms)}
    if not out:
        raise ConfigError("give at least one budget")
    return sorted(out)
