"""A stateless calculator (BFCL's ``MathAPI`` tool names). Every result is ``{"result": x}`` with a
finite float, or ``{"error": ...}``; ``precision`` means decimal places of the result."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from arlkit.envs.tools.api_base import tool

__all__ = ["Calculator"]

_MAX_PRECISION = 12


def _result(compute: Callable[[], float], places: int | None = None) -> dict[str, Any]:
    try:
        value = float(compute())
    except Exception as exc:  # every numeric failure (domain, overflow, empty) becomes an error result
        return {"error": str(exc) or type(exc).__name__}
    if not math.isfinite(value):
        return {"error": "the result is not a finite number"}
    if places is not None:
        if not 0 <= places <= _MAX_PRECISION:
            return {"error": f"precision must be between 0 and {_MAX_PRECISION}"}
        value = round(value, places)
    return {"result": value}


def _nonempty(numbers: list[float], what: str) -> list[float]:
    if not numbers:
        raise ValueError(f"{what} needs at least one number")
    return numbers


class Calculator:
    """Arithmetic and simple statistics."""

    api_name = "Calculator"
    bfcl_names = ("MathAPI",)
    description = "Arithmetic and statistics on numbers; stateless."

    def load_state(self, config: dict[str, Any]) -> None:
        """The calculator has no state; ``config`` must be empty."""
        if config:
            raise ValueError("Calculator: takes no initial state")

    @tool
    def absolute_value(self, number: float) -> dict[str, Any]:
        """Absolute value of a number.

        Args:
            number: the number.
        """
        return _result(lambda: abs(number))

    @tool
    def add(self, a: float, b: float) -> dict[str, Any]:
        """Sum of two numbers.

        Args:
            a: first number.
            b: second number.
        """
        return _result(lambda: a + b)

    @tool
    def subtract(self, a: float, b: float) -> dict[str, Any]:
        """Difference a - b.

        Args:
            a: number to subtract from.
            b: number to subtract.
        """
        return _result(lambda: a - b)

    @tool
    def multiply(self, a: float, b: float) -> dict[str, Any]:
        """Product of two numbers.

        Args:
            a: first number.
            b: second number.
        """
        return _result(lambda: a * b)

    @tool
    def divide(self, a: float, b: float) -> dict[str, Any]:
        """Quotient a / b.

        Args:
            a: numerator.
            b: denominator (not zero).
        """
        return _result(lambda: a / b)

    @tool
    def power(self, base: float, exponent: float) -> dict[str, Any]:
        """base raised to exponent.

        Args:
            base: the base.
            exponent: the exponent.
        """
        return _result(lambda: math.pow(base, exponent))

    @tool
    def square_root(self, number: float, precision: int) -> dict[str, Any]:
        """Square root of a non-negative number.

        Args:
            number: the number.
            precision: decimal places of the result.
        """
        return _result(lambda: math.sqrt(number), precision)

    @tool
    def logarithm(self, value: float, base: float, precision: int) -> dict[str, Any]:
        """Logarithm of value to a base.

        Args:
            value: a positive number.
            base: a positive base other than 1.
            precision: decimal places of the result.
        """
        return _result(lambda: math.log(value, base), precision)

    @tool
    def mean(self, numbers: list[float]) -> dict[str, Any]:
        """Arithmetic mean of a list of numbers.

        Args:
            numbers: the numbers (at least one).
        """
        return _result(lambda: statistics.fmean(_nonempty(numbers, "mean")))

    @tool
    def standard_deviation(self, numbers: list[float]) -> dict[str, Any]:
        """Population standard deviation of a list of numbers.

        Args:
            numbers: the numbers (at least one).
        """
        return _result(lambda: statistics.pstdev(_nonempty(numbers, "standard_deviation")))

    @tool
    def min_value(self, numbers: list[float]) -> dict[str, Any]:
        """Smallest number of a list.

        Args:
            numbers: the numbers (at least one).
        """
        return _result(lambda: min(_nonempty(numbers, "min_value")))

    @tool
    def max_value(self, numbers: list[float]) -> dict[str, Any]:
        """Largest number of a list.

        Args:
            numbers: the numbers (at least one).
        """
        return _result(lambda: max(_nonempty(numbers, "max_value")))

    @tool
    def sum_values(self, numbers: list[float]) -> dict[str, Any]:
        """Sum of a list of numbers.

        Args:
            numbers: the numbers.
        """
        return _result(lambda: math.fsum(numbers))

    @tool
    def round_number(self, number: float, decimal_places: int = 0) -> dict[str, Any]:
        """Round a number to a number of decimal places.

        Args:
            number: the number.
            decimal_places: decimal places to keep.
        """
        return _result(lambda: number, decimal_places)

    @tool
    def percentage(self, part: float, whole: float) -> dict[str, Any]:
        """What percentage part is of whole.

        Args:
            part: the part.
            whole: the whole (not zero).
        """
        return _result(lambda: 100.0 * part / whole)
