"""A travel booking service: a route catalogue, payment cards, bookings, insurance and a budget.

Fares are fixed per route and class; money is kept in cents and shown with 2 decimals.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any, Literal

from arlkit.envs.tools.api_base import tool

__all__ = ["TravelAgency"]

CLASS_FACTOR = {"economy": 100, "business": 250, "first": 400}  # percent of the economy fare
INSURANCE_CENTS = {"basic": 3000, "premium": 7500}
RATES_PER_EUR = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "CHF": 0.95, "JPY": 160.0, "NOK": 11.5}
MAX_BOOKINGS = 200


def _cents(amount: float) -> int:
    return round(amount * 100)


def _money(cents: int) -> float:
    return round(cents / 100, 2)


class TravelAgency:
    """Price, book and cancel flights paid with stored cards."""

    api_name = "TravelAgency"
    bfcl_names: tuple[str, ...] = ()
    description = "Flight booking: fares, bookings paid by card, travel insurance, a budget limit, currency conversion."

    def __init__(self) -> None:
        self.routes: dict[str, int] = {}  # "LIS-MAD" -> economy fare in cents
        self.cards: dict[str, dict[str, Any]] = {}  # card id -> {"holder", "balance_cents"}
        self.bookings: dict[str, dict[str, Any]] = {}
        self.insurance: dict[str, str] = {}  # booking id -> insurance type
        self.budget_limit_cents: int | None = None
        self.next_booking = 1

    def load_state(self, config: dict[str, Any]) -> None:
        """Keys: ``routes`` ("AAA-BBB" -> economy fare), ``cards`` (id -> {holder, balance}),
        ``bookings``, ``insurance``, ``budget_limit`` and ``next_booking``."""
        self.routes = {str(k).upper(): _cents(float(v)) for k, v in dict(config.get("routes", {})).items()}
        self.cards = {
            str(k): {"holder": str(v["holder"]), "balance_cents": _cents(float(v["balance"]))}
            for k, v in dict(config.get("cards", {})).items()
        }
        self.bookings = copy.deepcopy(dict(config.get("bookings", {})))
        self.insurance = dict(config.get("insurance", {}))
        limit = config.get("budget_limit")
        self.budget_limit_cents = None if limit is None else _cents(float(limit))
        self.next_booking = int(config.get("next_booking", 1))

    def _fare(self, origin: str, destination: str, travel_class: str) -> int | None:
        base = self.routes.get(f"{origin.upper()}-{destination.upper()}")
        return None if base is None else base * CLASS_FACTOR[travel_class] // 100

    @tool
    def list_airports(self) -> dict[str, Any]:
        """Every airport code served, alphabetically."""
        codes = sorted({code for route in self.routes for code in route.split("-")})
        return {"airports": codes}

    @tool
    def get_flight_cost(
        self, origin: str, destination: str, travel_class: Literal["economy", "business", "first"]
    ) -> dict[str, Any]:
        """The fare of a direct flight.

        Args:
            origin: departure airport code, like 'LIS'.
            destination: arrival airport code.
            travel_class: 'economy', 'business' or 'first'.
        """
        fare = self._fare(origin, destination, travel_class)
        if fare is None:
            return {"error": f"get_flight_cost: no direct flight from {origin!r} to {destination!r}"}
        return {"cost": _money(fare), "currency": "EUR"}

    @tool
    def book_flight(
        self,
        origin: str,
        destination: str,
        date: str,
        travel_class: Literal["economy", "business", "first"],
        card_id: str,
    ) -> dict[str, Any]:
        """Book and pay a direct flight.

        Args:
            origin: departure airport code.
            destination: arrival airport code.
            date: travel date as YYYY-MM-DD.
            travel_class: 'economy', 'business' or 'first'.
            card_id: the card that pays.
        """
        fare = self._fare(origin, destination, travel_class)
        if fare is None:
            return {"error": f"book_flight: no direct flight from {origin!r} to {destination!r}"}
        try:
            dt.date.fromisoformat(date)
        except ValueError:
            return {"error": f"book_flight: date must be YYYY-MM-DD, got {date!r:.40}"}
        card = self.cards.get(card_id)
        if card is None:
            return {"error": f"book_flight: unknown card {card_id!r}"}
        if self.budget_limit_cents is not None and fare > self.budget_limit_cents:
            limit = _money(self.budget_limit_cents)
            return {"error": f"book_flight: the fare {_money(fare)} exceeds the budget limit {limit}"}
        if card["balance_cents"] < fare:
            return {"error": f"book_flight: card {card_id} has only {_money(card['balance_cents'])}"}
        if len(self.bookings) >= MAX_BOOKINGS:
            return {"error": "book_flight: too many bookings"}
        booking_id = f"BK{self.next_booking:04d}"
        card["balance_cents"] -= fare
        self.bookings[booking_id] = {
            "origin": origin.upper(),
            "destination": destination.upper(),
            "date": date,
            "class": travel_class,
            "card_id": card_id,
            "paid": _money(fare),
            "status": "confirmed",
        }
        self.next_booking += 1
        return {"booking_id": booking_id, "cost": _money(fare), "status": "confirmed"}

    @tool
    def get_booking(self, booking_id: str) -> dict[str, Any]:
        """Details of a booking.

        Args:
            booking_id: the booking's id, like 'BK0001'.
        """
        booking = self.bookings.get(booking_id)
        if booking is None:
            return {"error": f"get_booking: no booking {booking_id!r}"}
        return {"booking_id": booking_id, **booking, "insurance": self.insurance.get(booking_id)}

    @tool
    def cancel_booking(self, booking_id: str) -> dict[str, Any]:
        """Cancel a confirmed booking; the fare goes back to the card that paid.

        Args:
            booking_id: the booking's id.
        """
        booking = self.bookings.get(booking_id)
        if booking is None or booking["status"] != "confirmed":
            return {"error": f"cancel_booking: no confirmed booking {booking_id!r}"}
        booking["status"] = "cancelled"
        card = self.cards.get(booking["card_id"])
        if card is not None:
            card["balance_cents"] += _cents(booking["paid"])
        return {"booking_id": booking_id, "status": "cancelled", "refund": booking["paid"]}

    @tool
    def set_budget_limit(self, limit: float) -> dict[str, Any]:
        """Refuse future bookings whose fare is above a limit.

        Args:
            limit: the highest fare allowed, in EUR (positive).
        """
        if not 0 < limit < 1e9:
            return {"error": "set_budget_limit: the limit must be positive"}
        self.budget_limit_cents = _cents(limit)
        return {"budget_limit": _money(self.budget_limit_cents)}

    @tool
    def purchase_insurance(
        self, booking_id: str, insurance_type: Literal["basic", "premium"], card_id: str
    ) -> dict[str, Any]:
        """Buy travel insurance for a confirmed booking (basic 30.00, premium 75.00).

        Args:
            booking_id: the booking's id.
            insurance_type: 'basic' or 'premium'.
            card_id: the card that pays.
        """
        booking = self.bookings.get(booking_id)
        if booking is None or booking["status"] != "confirmed":
            return {"error": f"purchase_insurance: no confirmed booking {booking_id!r}"}
        if booking_id in self.insurance:
            return {"error": f"purchase_insurance: booking {booking_id} is already insured"}
        card = self.cards.get(card_id)
        price = INSURANCE_CENTS[insurance_type]
        if card is None or card["balance_cents"] < price:
            return {"error": f"purchase_insurance: card {card_id!r} is unknown or has too little balance"}
        card["balance_cents"] -= price
        self.insurance[booking_id] = insurance_type
        return {"booking_id": booking_id, "insurance": insurance_type, "cost": _money(price)}

    @tool
    def get_card_balance(self, card_id: str) -> dict[str, Any]:
        """The balance of a stored card.

        Args:
            card_id: the card's id.
        """
        card = self.cards.get(card_id)
        if card is None:
            return {"error": f"get_card_balance: unknown card {card_id!r}"}
        return {"card_id": card_id, "balance": _money(card["balance_cents"])}

    @tool
    def convert_currency(self, amount: float, from_currency: str, to_currency: str) -> dict[str, Any]:
        """Convert an amount between currencies at fixed rates (EUR, USD, GBP, CHF, JPY, NOK).

        Args:
            amount: the amount.
            from_currency: currency code of the amount.
            to_currency: currency code to convert to.
        """
        src, dst = from_currency.upper(), to_currency.upper()
        if src not in RATES_PER_EUR or dst not in RATES_PER_EUR:
            return {"error": f"convert_currency: supported currencies are {', '.join(RATES_PER_EUR)}"}
        if not abs(amount) < 1e12:
            return {"error": "convert_currency: amount out of range"}
        return {"amount": round(amount / RATES_PER_EUR[src] * RATES_PER_EUR[dst], 2), "currency": dst}
