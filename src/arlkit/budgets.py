"""The one parser of budget settings: :class:`Budget`, ``full`` (T_max), ``budgetmix`` (BudgetMix's
candidates), a percentage of T_max (``25%``, rounded up in exact arithmetic) or whole turns (``10``).
Configs hold settings as :class:`Budget` values, parsed once when the config is built; everything past
the config works in turns (``Budget.turns(t_max)``), and reports write a budget as T and T / T_max. An
evaluation's budget list takes :data:`EVAL_BUDGETS`, a training or behaviour-cloning run's budget
:data:`TRAIN_BUDGETS`; every caller gets the same errors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from arlkit.config import ConfigError

__all__ = ["EVAL_BUDGETS", "TRAIN_BUDGETS", "Budget", "budget_candidates", "resolve_budgets"]

Form = Literal["full", "budgetmix", "percent", "turns"]

EVAL_BUDGETS: tuple[Form, ...] = ("full", "percent", "turns")  # the forms of an evaluation's budget list
TRAIN_BUDGETS: tuple[Form, ...] = ("full", "budgetmix", "percent", "turns")  # of a training or cloning run's budget
_FORMS = {"full": "full (T_max)", "budgetmix": "budgetmix", "percent": "a percentage of T_max like 25%",
          "turns": "a whole number of turns"}


def budget_candidates(t_max: int) -> list[int]:
    """BudgetMix's candidate budgets for ``t_max``: ``(i*t_max + 9) // 10`` for i = 1..10, distinct,
    ascending (T_max 10 -> 1..10; 24 -> 3,5,8,10,12,15,17,20,22,24; 70 -> 7,14,...,70)."""
    if t_max < 1:
        raise ValueError(f"t_max must be >= 1, got {t_max}")
    return sorted({(i * t_max + 9) // 10 for i in range(1, 11)})


@dataclass(frozen=True)
class Budget:
    """A budget setting: its ``form`` and, for a percentage or turns, its ``number``. ``str(budget)`` is
    the setting as written (what configs and run records hold)."""

    text: str
    form: Form
    number: Fraction | None = None

    @classmethod
    def parse(cls, spec: str | int | Budget, forms: Sequence[Form] = TRAIN_BUDGETS) -> Budget:
        """The setting ``spec``; a form not in ``forms`` (or no form) raises :class:`ConfigError` listing
        those that are."""
        budget = cls.from_setting(spec)
        if budget.form not in forms:
            wanted = [_FORMS[f] for f in _FORMS if f in forms]
            raise ConfigError(f"budget {budget.text!r} is not {', '.join(wanted[:-1])} or {wanted[-1]}")
        return budget

    @classmethod
    def from_setting(cls, spec: str | int | Budget) -> Budget:
        """A config field's value as read (:func:`arlkit.config.build_config`), unchecked: text of no form
        keeps ``form`` empty, and the config's ``__post_init__`` refuses it with :meth:`parse` and the forms
        it takes."""
        if isinstance(spec, Budget):
            return spec
        text = str(spec).strip()
        form, number = text, None
        try:
            if form not in ("full", "budgetmix"):
                form, number = ("percent", Fraction(text[:-1])) if text.endswith("%") else ("turns", Fraction(text))
                if form == "turns" and number.denominator != 1:
                    raise ValueError
        except (ValueError, ZeroDivisionError):
            form, number = "", None
        return cls(text, form, number)  # type: ignore[arg-type]

    def setting(self) -> str:
        """The form configs and run records hold (:func:`arlkit.config.config_to_plain`)."""
        return self.text

    def __str__(self) -> str:
        return self.text

    @property
    def is_budgetmix(self) -> bool:
        return self.form == "budgetmix"

    def turns(self, t_max: int) -> tuple[int, ...]:
        """The budgets in turns for an environment with ``t_max``: ``full`` is T_max, ``budgetmix`` its
        candidates (:func:`budget_candidates`), a percentage p is ``ceil(p * T_max / 100)`` computed exactly
        (30% of 10 is 3, not 4), a number is turns. Each must be in [1, T_max]."""
        if self.form == "full":
            return (t_max,)
        if self.form == "budgetmix":
            return tuple(budget_candidates(t_max))
        assert self.number is not None
        turns = int(-((-self.number * t_max) // 100) if self.form == "percent" else self.number)  # exact ceil
        if not 1 <= turns <= t_max:
            raise ConfigError(f"budget {self.text!r} gives {turns} turns; budgets must be between 1 and T_max = {t_max}")
        return (turns,)


def resolve_budgets(budgets: Sequence[Budget | str | int], t_max: int, forms: Sequence[Form] = EVAL_BUDGETS) -> list[int]:
    """Sorted distinct turn counts of a budget list (``25%, 50%, 10``; :meth:`Budget.turns`)."""
    out = {turns for budget in budgets for turns in Budget.parse(budget, forms).turns(t_max)}
    if not out:
        raise ConfigError("give at least one budget")
    return sorted(out)
