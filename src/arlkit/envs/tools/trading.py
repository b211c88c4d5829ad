"""A brokerage account: cash, holdings, a fixed market, a watchlist, market and limit orders.

Money is kept in cents internally and shown as floats with 2 decimals, so results are exact and
reproducible. A market order (no limit price) fills at once at the market price; a limit order
that is not marketable (a buy limit below the price, a sell limit above it) stays pending until
cancelled (the market does not move).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from arlkit.envs.tools.api_base import tool

__all__ = ["TradingAccount"]

MAX_ORDERS = 200
MAX_AMOUNT_CENTS = 10**12


def _cents(amount: float) -> int:
    return round(amount * 100)


def _money(cents: int) -> float:
    return round(cents / 100, 2)


class TradingAccount:
    """Buy and sell stocks from one account."""

    api_name = "TradingAccount"
    bfcl_names: tuple[str, ...] = ()
    description = "A stock trading account with a fixed-price market, a watchlist and orders."

    def __init__(self) -> None:
        self.cash_cents = 0
        self.holdings: dict[str, int] = {}
        self.market: dict[str, dict[str, Any]] = {}  # symbol -> {"name", "sector", "price_cents"}
        self.watchlist: list[str] = []
        self.orders: list[dict[str, Any]] = []
        self.next_order_id = 1001

    def load_state(self, config: dict[str, Any]) -> None:
        """Keys: ``cash`` (float), ``holdings`` (symbol -> shares), ``market`` (symbol -> {name,
        sector, price}), ``watchlist``, ``orders``, ``next_order_id``."""
        self.cash_cents = _cents(float(config.get("cash", 0.0)))
        self.market = {
            str(sym).upper(): {
                "name": str(v["name"]),
                "sector": str(v["sector"]).lower(),
                "price_cents": _cents(float(v["price"])),
            }
            for sym, v in dict(config.get("market", {})).items()
        }
        self.holdings = {str(k): int(v) for k, v in dict(config.get("holdings", {})).items()}
        self.watchlist = [str(s) for s in config.get("watchlist", [])]
        self.orders = copy.deepcopy(list(config.get("orders", [])))
        self.next_order_id = int(config.get("next_order_id", 1001))

    def _stock(self, symbol: str) -> dict[str, Any] | None:
        return self.market.get(symbol.upper())

    @tool
    def get_stock_info(self, symbol: str) -> dict[str, Any]:
        """Name, sector and current price of a stock.

        Args:
            symbol: ticker symbol, like 'NVLT'.
        """
        stock = self._stock(symbol)
        if stock is None:
            return {"error": f"get_stock_info: unknown symbol {symbol!r}"}
        return {
            "symbol": symbol.upper(),
            "name": stock["name"],
            "sector": stock["sector"],
            "price": _money(stock["price_cents"]),
        }

    @tool
    def list_stocks_by_sector(self, sector: str) -> dict[str, Any]:
        """The symbols of a sector, alphabetically.

        Args:
            sector: sector name, like 'technology' or 'energy'.
        """
        symbols = sorted(s for s, v in self.market.items() if v["sector"] == sector.lower())
        if not symbols:
            sectors = sorted({v["sector"] for v in self.market.values()})
            return {"error": f"list_stocks_by_sector: unknown sector {sector!r}; sectors: {', '.join(sectors)}"}
        return {"symbols": symbols}

    @tool
    def get_account_summary(self) -> dict[str, Any]:
        """Cash, holdings and the market value of the holdings."""
        value = sum(self.market[s]["price_cents"] * n for s, n in self.holdings.items() if s in self.market)
        return {"cash": _money(self.cash_cents), "holdings": dict(self.holdings), "holdings_value": _money(value)}

    @tool
    def place_order(
        self, order_type: Literal["buy", "sell"], symbol: str, shares: int, limit_price: float | None = None
    ) -> dict[str, Any]:
        """Buy or sell shares: at the market price now, or with a limit price (pending when not reachable).

        Args:
            order_type: 'buy' or 'sell'.
            symbol: ticker symbol.
            shares: number of shares (positive).
            limit_price: highest price to pay (buy) or lowest to accept (sell); None for a market order.
        """
        stock = self._stock(symbol)
        if stock is None:
            return {"error": f"place_order: unknown symbol {symbol!r}"}
        if not 0 < shares <= 1_000_000:
            return {"error": "place_order: shares must be between 1 and 1000000"}
        if limit_price is not None and not 0 < limit_price < 1e9:
            return {"error": "place_order: limit_price must be positive"}
        if len(self.orders) >= MAX_ORDERS:
            return {"error": "place_order: too many orders"}
        sym, price = symbol.upper(), stock["price_cents"]
        limit = None if limit_price is None else _cents(limit_price)
        fills = limit is None or (limit >= price if order_type == "buy" else limit <= price)
        if fills and order_type == "buy" and price * shares > self.cash_cents:
            return {"error": f"place_order: not enough cash ({_money(self.cash_cents)}) for {shares} x {_money(price)}"}
        if fills and order_type == "sell" and self.holdings.get(sym, 0) < shares:
            return {"error": f"place_order: you hold {self.holdings.get(sym, 0)} shares of {sym}"}
        order = {
            "order_id": self.next_order_id,
            "type": order_type,
            "symbol": sym,
            "shares": shares,
            "limit_price": None if limit is None else _money(limit),
            "status": "filled" if fills else "pending",
            "fill_price": _money(price) if fills else None,
        }
        if fills:
            sign = 1 if order_type == "buy" else -1
            self.cash_cents -= sign * price * shares
            held = self.holdings.get(sym, 0) + sign * shares
            if held:
                self.holdings[sym] = held
            else:
                self.holdings.pop(sym, None)
        self.orders.append(order)
        self.next_order_id += 1
        return dict(order)

    @tool
    def get_order(self, order_id: int) -> dict[str, Any]:
        """Details of an order.

        Args:
            order_id: the order's id.
        """
        order = next((o for o in self.orders if o["order_id"] == order_id), None)
        return dict(order) if order else {"error": f"get_order: no order {order_id}"}

    @tool
    def cancel_order(self, order_id: int) -> dict[str, Any]:
        """Cancel a pending order.

        Args:
            order_id: the order's id.
        """
        order = next((o for o in self.orders if o["order_id"] == order_id), None)
        if order is None:
            return {"error": f"cancel_order: no order {order_id}"}
        if order["status"] != "pending":
            return {
                "error": f"cancel_order: order {order_id} is {order['status']}, only pending orders can be cancelled"
            }
        order["status"] = "cancelled"
        return {"order_id": order_id, "status": "cancelled"}

    @tool
    def add_to_watchlist(self, symbol: str) -> dict[str, Any]:
        """Add a stock to the watchlist.

        Args:
            symbol: ticker symbol.
        """
        sym = symbol.upper()
        if sym not in self.market:
            return {"error": f"add_to_watchlist: unknown symbol {symbol!r}"}
        if sym in self.watchlist:
            return {"error": f"add_to_watchlist: {sym} is already on the watchlist"}
        self.watchlist.append(sym)
        return {"watchlist": list(self.watchlist)}

    @tool
    def remove_from_watchlist(self, symbol: str) -> dict[str, Any]:
        """Remove a stock from the watchlist.

        Args:
            symbol: ticker symbol.
        """
        sym = symbol.upper()
        if sym not in self.watchlist:
            return {"error": f"remove_from_watchlist: {sym} is not on the watchlist"}
        self.watchlist.remove(sym)
        return {"watchlist": list(self.watchlist)}

    @tool
    def get_watchlist(self) -> dict[str, Any]:
        """The watchlist with current prices."""
        return {"watchlist": {s: _money(self.market[s]["price_cents"]) for s in self.watchlist if s in self.market}}

    @tool
    def deposit(self, amount: float) -> dict[str, Any]:
        """Add cash to the account.

        Args:
            amount: a positive amount.
        """
        cents = _cents(amount) if 0 < amount < 1e9 else 0
        if cents <= 0 or self.cash_cents + cents > MAX_AMOUNT_CENTS:
            return {"error": "deposit: the amount must be positive (and below 1e9)"}
        self.cash_cents += cents
        return {"cash": _money(self.cash_cents)}

    @tool
    def withdraw(self, amount: float) -> dict[str, Any]:
        """Take cash out of the account.

        Args:
            amount: a positive amount, at most the cash balance.
        """
        cents = _cents(amount) if 0 < amount < 1e9 else 0
        if cents <= 0 or cents > self.cash_cents:
            return {"error": f"withdraw: the amount must be positive and at most {_money(self.cash_cents)}"}
        self.cash_cents -= cents
        return {"cash": _money(self.cash_cents)}
