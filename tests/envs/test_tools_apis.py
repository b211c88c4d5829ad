"""The six API classes: documented tools, hand-checked behaviour, and no exception on any
well-typed argument (an error result leaves the state unchanged)."""

from __future__ import annotations

import copy
import json
import typing
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arlkit.envs.tools.api_base import public_state, tool_specs
from arlkit.envs.tools.apis import API_CLASSES, api_class, instantiate, specs_for

ALL = list(API_CLASSES)


def test_at_least_five_classes_with_unique_documented_tools() -> None:
    assert len(API_CLASSES) >= 5
    specs = specs_for(ALL)  # raises on a duplicate name
    assert len(specs) == sum(len(tool_specs(c)) for c in API_CLASSES.values())
    for spec in specs.values():
        assert spec.summary and all(p.description for p in spec.params), spec.name
        json.dumps(spec.json_schema())
    assert api_class("GorillaFileSystem") is API_CLASSES["FileSystem"]
    assert api_class("MathAPI") is API_CLASSES["Calculator"]
    with pytest.raises(KeyError, match="unknown API class 'TwitterAPI'"):
        api_class("TwitterAPI")


# -- file system -----------------------------------------------------------------------------
TREE = {
    "root": {
        "alex": {
            "type": "directory",
            "contents": {
                "notes.txt": {"type": "file", "content": "b line\na budget line\nc line"},
                "old.txt": {"type": "file", "content": "b line\nx line"},
                ".hidden": {"type": "file", "content": "h"},
                "docs": {"type": "directory", "contents": {}},
            },
        }
    }
}


def test_file_system_tools() -> None:
    fs = instantiate("FileSystem", TREE)
    assert fs.pwd() == {"current_working_directory": "/alex"}
    assert fs.ls() == {"current_directory_content": ["notes.txt", "old.txt", "docs"]}
    assert ".hidden" in fs.ls(a=True)["current_directory_content"]
    assert fs.grep(file_name="notes.txt", pattern="budget") == {"matching_lines": ["a budget line"]}
    assert fs.wc(file_name="notes.txt", mode="w") == {"count": 7, "type": "words"}
    assert fs.wc(file_name="notes.txt") == {"count": 3, "type": "lines"}
    assert fs.tail(file_name="notes.txt", lines=1) == {"last_lines": "c line"}
    assert fs.sort(file_name="notes.txt") == {"sorted_content": "a budget line\nb line\nc line"}
    assert fs.diff(file_name1="notes.txt", file_name2="old.txt") == {
        "diff_lines": "- a budget line\n- c line\n+ x line"
    }
    assert fs.cp(source="notes.txt", destination="docs")["result"] == "copied 'notes.txt' to 'docs/notes.txt'"
    assert fs.mv(source="old.txt", destination="older.txt")["result"] == "moved 'old.txt' to 'older.txt'"
    assert fs.find(path=".", name="notes") == {"matches": ["./notes.txt", "./docs/notes.txt"]}
    assert fs.cd(folder="docs") == {"current_working_directory": "/alex/docs"}
    assert fs.echo(content="hello", file_name="new.md") == {"terminal_output": None}
    assert fs.cat(file_name="new.md") == {"file_content": "hello"}
    assert fs.du() == {"disk_usage": f"{5 + len(TREE['root']['alex']['contents']['notes.txt']['content'])} bytes"}
    assert fs.cd(folder="..")["current_working_directory"] == "/alex"
    assert fs.rmdir(dir_name="docs")["error"] == "rmdir: directory 'docs' is not empty"
    assert fs.rm(file_name="docs") == {"result": "removed 'docs'"}
    assert TREE["root"]["alex"]["contents"]["docs"] == {"type": "directory", "contents": {}}  # config untouched


@pytest.mark.parametrize(
    "call",
    [
        lambda fs: fs.cd(folder="nowhere"),
        lambda fs: fs.cd(folder=".."),
        lambda fs: fs.mkdir(dir_name="docs"),
        lambda fs: fs.mkdir(dir_name="a/b"),
        lambda fs: fs.cat(file_name="docs"),
        lambda fs: fs.mv(source="missing", destination="x"),
        lambda fs: fs.mv(source="docs", destination="docs"),
        lambda fs: fs.cp(source="notes.txt", destination="old.txt"),
        lambda fs: fs.rm(file_name="missing"),
        lambda fs: fs.tail(file_name="notes.txt", lines=-1),
        lambda fs: fs.echo(content="x", file_name="docs"),
    ],
)
def test_file_system_errors_leave_the_state_unchanged(call: Any) -> None:
    fs = instantiate("FileSystem", TREE)
    before = copy.deepcopy(public_state(fs))
    assert "error" in call(fs)
    assert public_state(fs) == before


def test_file_system_cannot_grow_without_bound() -> None:
    fs = instantiate("FileSystem", TREE)
    fs.echo(content="x" * 400_000, file_name="big.txt")
    assert "error" not in fs.cp(source="big.txt", destination="big2.txt")
    assert fs.cp(source="big.txt", destination="big3.txt") == {"error": "cp: the file system is full"}


# -- calculator ------------------------------------------------------------------------------
def test_calculator_hand_derived() -> None:
    c = instantiate("Calculator", {})
    assert c.mean(numbers=[1.0, 2.0, 3.0, 4.0]) == {"result": 2.5}
    # Population sd of 2,4,4,4,5,5,7,9: mean 5, squared deviations sum 32, 32/8 = 4, sqrt 2.
    assert c.standard_deviation(numbers=[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == {"result": 2.0}
    assert c.logarithm(value=8.0, base=2.0, precision=3) == {"result": 3.0}
    assert c.square_root(number=2.0, precision=3) == {"result": 1.414}
    assert c.percentage(part=1.0, whole=8.0) == {"result": 12.5}
    assert c.round_number(number=2.675, decimal_places=1) == {"result": 2.7}
    assert c.divide(a=1.0, b=0.0) == {"error": "float division by zero"}
    assert "error" in c.power(base=10.0, exponent=400.0)
    assert "error" in c.logarithm(value=-1.0, base=10.0, precision=2)
    assert "error" in c.mean(numbers=[])
    assert "error" in c.add(a=float("inf"), b=1.0)
    assert public_state(c) == {}


# -- messenger, trading, travel, vehicle -------------------------------------------------------
def test_messenger_flow() -> None:
    m = instantiate("Messenger", {"users": {"Ann": "USR001", "Bob": "USR002"}})
    assert m.send_message(receiver_id="USR002", message="hi") == {"error": "not logged in: call login(user_id) first"}
    assert m.login(user_id="USR001") == {"login_status": True, "user": "Ann"}
    assert m.send_message(receiver_id="USR002", message="Budget call?") == {"sent_status": True, "message_id": 1}
    assert m.search_messages(keyword="budget")["messages"][0]["text"] == "Budget call?"
    assert m.add_contact(user_name="Bob") == {"added_status": True, "user_id": "USR002"}
    assert "error" in m.add_contact(user_name="Bob")
    assert m.delete_message(message_id=1) == {"deleted_status": True, "message_id": 1}
    assert m.view_messages_sent() == {"messages": []}


def test_trading_in_exact_cents() -> None:
    t = instantiate(
        "TradingAccount",
        {"cash": 1000.0, "market": {"abc": {"name": "Abc", "sector": "Tech", "price": 12.34}}, "holdings": {"ABC": 2}},
    )
    order = t.place_order(order_type="buy", symbol="abc", shares=3)
    assert order["status"] == "filled" and order["fill_price"] == 12.34
    assert t.get_account_summary() == {
        "cash": 962.98,
        "holdings": {"ABC": 5},
        "holdings_value": 61.7,
    }  # 1000 - 3 x 12.34
    pending = t.place_order(order_type="buy", symbol="ABC", shares=1, limit_price=10.0)
    assert pending["status"] == "pending" and t.cash_cents == 96298
    assert t.cancel_order(order_id=pending["order_id"]) == {"order_id": pending["order_id"], "status": "cancelled"}
    assert "error" in t.cancel_order(order_id=pending["order_id"])
    assert "error" in t.place_order(order_type="sell", symbol="ABC", shares=6)
    assert t.place_order(order_type="sell", symbol="ABC", shares=5)["status"] == "filled"
    assert t.holdings == {} and t.list_stocks_by_sector(sector="tech") == {"symbols": ["ABC"]}


def test_travel_fares_budget_and_refunds() -> None:
    a = instantiate(
        "TravelAgency", {"routes": {"LIS-MAD": 200.0}, "cards": {"c1": {"holder": "Ann", "balance": 900.0}}}
    )
    # Business is 250% of economy, first 400%.
    assert [
        a.get_flight_cost(origin="LIS", destination="MAD", travel_class=k)["cost"]
        for k in ("economy", "business", "first")
    ] == [200.0, 500.0, 800.0]
    assert "error" in a.get_flight_cost(origin="MAD", destination="LIS", travel_class="economy")
    a.set_budget_limit(limit=600.0)
    assert (
        "budget limit"
        in a.book_flight(origin="LIS", destination="MAD", date="2025-01-02", travel_class="first", card_id="c1")[
            "error"
        ]
    )
    booked = a.book_flight(origin="LIS", destination="MAD", date="2025-01-02", travel_class="business", card_id="c1")
    assert booked == {"booking_id": "BK0001", "cost": 500.0, "status": "confirmed"}
    assert a.purchase_insurance(booking_id="BK0001", insurance_type="premium", card_id="c1")["cost"] == 75.0
    assert a.get_card_balance(card_id="c1")["balance"] == 325.0
    assert a.cancel_booking(booking_id="BK0001")["refund"] == 500.0
    assert a.get_card_balance(card_id="c1")["balance"] == 825.0
    assert a.convert_currency(amount=100.0, from_currency="EUR", to_currency="usd") == {
        "amount": 108.0,
        "currency": "USD",
    }
    assert "error" in a.book_flight(
        origin="LIS", destination="MAD", date="tomorrow", travel_class="economy", card_id="c1"
    )


def test_vehicle_start_sequence() -> None:
    v = instantiate("Vehicle", {})
    assert v.start_engine() == {"error": "start_engine: lock all doors first"}
    v.lock_doors(unlock=False, doors=["driver", "passenger", "rear_left", "rear_right"])
    assert "press the brake" in v.start_engine()["error"]
    v.press_brake_pedal(position=1.0)
    assert v.start_engine()["engine"] == "running"
    assert "parking brake" in v.activate_cruise_control(speed_kmh=100.0)["error"]
    v.set_parking_brake(engaged=False)
    assert v.activate_cruise_control(speed_kmh=100.0) == {"cruise_speed": 100.0}
    assert v.estimate_range() == {"range_km": 450.0}  # 30 l x 15 km/l
    with pytest.raises(ValueError, match="unknown state field"):
        instantiate("Vehicle", {"warp_drive": True})


# -- fuzzing: well-typed arguments never raise ---------------------------------------------------
TEXT = st.text(max_size=12) | st.sampled_from(
    ["notes.txt", "docs", "..", "USR001", "ABC", "LIS", "c1", "driver", "BK0001"]
)
NUMBER = (
    st.floats(allow_nan=False, width=64)
    | st.integers(-(10**6), 10**6).map(float)
    | st.sampled_from([0.0, 1.0, 1e308, -1e308])
)


def strategy_for(annotation: Any) -> st.SearchStrategy[Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(strategy_for(args[0]), max_size=5)
    if origin is not None and type(None) in args:
        return st.none() | strategy_for(next(a for a in args if a is not type(None)))
    return {str: TEXT, int: st.integers(-(10**6), 10**6), float: NUMBER, bool: st.booleans()}[annotation]


STATES = {
    "FileSystem": TREE,
    "Calculator": {},
    "Messenger": {"users": {"Ann": "USR001", "Bob": "USR002"}, "current_user": "USR001"},
    "TradingAccount": {
        "cash": 500.0,
        "market": {"ABC": {"name": "Abc", "sector": "tech", "price": 12.0}},
        "holdings": {"ABC": 3},
    },
    "TravelAgency": {"routes": {"LIS-MAD": 100.0}, "cards": {"c1": {"holder": "Ann", "balance": 900.0}}},
    "Vehicle": {},
}


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    api = draw(st.sampled_from(ALL))
    spec = draw(st.sampled_from(sorted(tool_specs(API_CLASSES[api]).values(), key=lambda s: s.name)))
    kwargs = {p.name: draw(strategy_for(p.annotation)) for p in spec.params if p.required or draw(st.booleans())}
    return api, spec.name, kwargs


@settings(max_examples=400, deadline=None)
@given(st.lists(calls(), min_size=1, max_size=6))
def test_well_typed_calls_never_raise_and_errors_change_nothing(
    sequence: list[tuple[str, str, dict[str, Any]]],
) -> None:
    instances = {api: instantiate(api, STATES[api]) for api in ALL}
    for api, name, kwargs in sequence:
        before = copy.deepcopy(public_state(instances[api]))
        result = getattr(instances[api], name)(**kwargs)
        assert isinstance(result, dict)
        json.dumps(result, allow_nan=False)
        if "error" in result:
            assert public_state(instances[api]) == before, (name, kwargs)
