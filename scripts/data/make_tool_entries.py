"""Writes arlkit's multi-turn tool-calling entries (``questions.jsonl``, ``answers.jsonl``, BFCL-v3
format) into ``src/arlkit/data/tools``.

Each entry is drawn from a seeded SplitMix64 stream: 1 to 3 API classes, a random initial state
for each, and 3 to 6 user turns, each from a request template that fits the state reached so far.
The templates run their ground-truth calls on a simulated copy of the state while the entry is
built, so every later request refers to files, ids and balances that really exist, and no
ground-truth call ever returns an error. About one turn in nine is an irrelevant request that no
tool can serve (its ground truth is empty). Run ``.venv/bin/python scripts/data/make_tool_entries.py`` after
changing anything here; the tests check that the shipped files equal this output.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from arlkit.envs.tools.apis import FINISH, instantiate, specs_for
from arlkit.envs.tools.calls import parse_calls
from arlkit.envs.tools.checks import bind, execute
from arlkit.envs.splitmix import SplitMix64
from arlkit.envs.tools.vehicle import DOORS, TIRES

HERE = Path(__file__).resolve().parents[2] / "src" / "arlkit" / "data" / "tools"
N_ENTRIES = 160
SEED = 20240611
MAX_ACTIONS = 24
# -- vocabularies -----------------------------------------------------------------------------
USERS = ("alex", "maria", "sam", "nora", "tom", "lena", "omar", "priya")
DIRS = ("documents", "projects", "archive", "reports", "photos", "research", "drafts", "backup")
FILE_STEMS = ("notes", "summary", "budget", "todo", "log", "plan", "report", "ideas", "minutes", "results")
EXTS = (".txt", ".md", ".csv", ".log")
WORDS = ("budget", "deadline", "review", "error", "meeting", "draft", "client", "release", "invoice", "risk")
SENTENCES = (
    "The {w} is due on Friday.",
    "Please check the {w} before noon.",
    "Nobody has read the {w} yet.",
    "We discussed the {w} with the team.",
    "The {w} needs a second look.",
    "Final {w} approved by Dana.",
    "Open question about the {w}.",
    "Moved the {w} to next week.",
)
NAMES = ("Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hiro", "Ines", "Jonas")
MESSAGES = (
    "See you at 10",
    "The report is ready",
    "Can we move the meeting?",
    "Lunch on Thursday?",
    "Thanks for the review",
    "Budget approved",
    "Please call me back",
    "Running late today",
)
STOCKS = (
    ("NVLT", "Novalight Systems", "technology"),
    ("QBIT", "Qubit Works", "technology"),
    ("CLDX", "Cloudex", "technology"),
    ("SOLR", "Solaris Power", "energy"),
    ("WNDR", "Windrose Energy", "energy"),
    ("PTRL", "Petrolux", "energy"),
    ("MEDX", "Medexa Health", "healthcare"),
    ("GENE", "Genetrix", "healthcare"),
    ("BNKR", "Bankora", "finance"),
    ("LEDG", "Ledgerline", "finance"),
    ("FOOD", "Foodhaven", "consumer"),
    ("TOYS", "Toyland Group", "consumer"),
)
AIRPORTS = ("LIS", "MAD", "CDG", "BER", "FCO", "AMS", "VIE", "OSL", "DUB", "ATH")
CURRENCIES = ("USD", "GBP", "CHF", "JPY", "NOK")
IRRELEVANT = (
    "Can you order me a large pepperoni pizza?",
    "What will the weather be like in Oslo tomorrow?",
    "Please book me a hotel room in Rome for two nights.",
    "Play some relaxing jazz music.",
    "Translate 'good morning' into Japanese for me.",
    "Call a taxi to pick me up in ten minutes.",
    "Who won the football match last night?",
)


# -- initial states ---------------------------------------------------------------------------
def _content(rng: SplitMix64, words: Sequence[str]) -> str:
    return "\n".join(rng.choice(SENTENCES).format(w=rng.choice(words)) for _ in range(rng.randint(2, 5)))


def fs_state(rng: SplitMix64) -> dict[str, Any]:
    def files(n: int) -> dict[str, Any]:
        out = {}
        for stem in rng.sample(FILE_STEMS, n):
            out[stem + rng.choice(EXTS)] = {"type": "file", "content": _content(rng, rng.sample(WORDS, 3))}
        return out

    top: dict[str, Any] = files(rng.randint(1, 3))
    for d in rng.sample(DIRS, rng.randint(2, 3)):
        top[d] = {"type": "directory", "contents": files(rng.randint(1, 3))}
    if rng.chance(0.4):
        top[".config"] = {"type": "file", "content": "theme=dark"}
    return {"root": {rng.choice(USERS): {"type": "directory", "contents": top}}}


def messenger_state(rng: SplitMix64) -> dict[str, Any]:
    names = rng.sample(NAMES, rng.randint(4, 6))
    users = {name: f"USR{i + 1:03d}" for i, name in enumerate(names)}
    messages = []
    for i in range(rng.randint(1, 3)):
        a, b = rng.sample(list(users.values()), 2)
        messages.append({"id": i + 1, "sender": a, "receiver": b, "text": rng.choice(MESSAGES)})
    return {"users": users, "messages": messages, "next_message_id": len(messages) + 1}


def trading_state(rng: SplitMix64) -> dict[str, Any]:
    market = {
        s: {"name": n, "sector": sec, "price": rng.randint(1500, 90000) / 100} for s, n, sec in rng.sample(STOCKS, 9)
    }
    held = rng.sample(sorted(market), 2)
    return {
        "cash": rng.randint(2000, 20000) * 1.0,
        "market": market,
        "holdings": {s: rng.randint(5, 60) for s in held},
        "watchlist": [rng.choice(sorted(market))],
    }


def travel_state(rng: SplitMix64) -> dict[str, Any]:
    routes: dict[str, float] = {}
    while len(routes) < 12:
        a, b = rng.sample(AIRPORTS, 2)
        routes[f"{a}-{b}"] = rng.randint(60, 420) * 1.0
    holder = rng.choice(NAMES)
    cards = {
        f"card_{rng.randint(1000, 9999)}": {"holder": holder, "balance": rng.randint(800, 5000) * 1.0} for _ in range(2)
    }
    return {"routes": routes, "cards": cards}


def vehicle_state(rng: SplitMix64) -> dict[str, Any]:
    return {
        "fuel_liters": rng.randint(8, 45) * 1.0,
        "doors": {d: rng.choice(("locked", "unlocked")) for d in DOORS},
        "tire_pressure": {t: rng.randint(26, 36) * 1.0 for t in TIRES},
    }


STATES: dict[str, Callable[[SplitMix64], dict[str, Any]]] = {
    "FileSystem": fs_state,
    "Calculator": lambda rng: {},
    "Messenger": messenger_state,
    "TradingAccount": trading_state,
    "TravelAgency": travel_state,
    "Vehicle": vehicle_state,
}


# -- the builder: runs ground-truth calls on a simulated state ---------------------------------
class Builder:
    def __init__(self, rng: SplitMix64, apis: list[str]) -> None:
        self.rng = rng
        self.apis = apis
        self.config = {api: STATES[api](rng) for api in apis}
        self.sim = {api: instantiate(api, self.config[api]) for api in apis}
        self.specs = specs_for(apis)
        self.notes: dict[str, Any] = {}  # facts later turns may use (last message id, pending order, ...)

    def run(self, text: str) -> Any:
        (call,) = parse_calls(text)
        result = execute(self.sim, bind(call, self.specs))
        if isinstance(result, dict) and "error" in result:
            raise AssertionError(f"ground-truth call {text} failed: {result['error']}")
        return result

    def here(self) -> dict[str, Any]:
        here: dict[str, Any] = self.sim["FileSystem"]._here()  # the generator inspects its own simulation
        return here

    def files(self) -> list[str]:
        return [n for n, node in self.here().items() if node["type"] == "file" and not n.startswith(".")]

    def dirs(self) -> list[str]:
        return [n for n, node in self.here().items() if node["type"] == "directory"]


Turn = tuple[str, list[str]]
Template = Callable[[Builder], Turn | None]


def _do(b: Builder, question: str, *calls: str) -> Turn:
    for text in calls:
        b.run(text)
    return question, list(calls)


def _new_name(b: Builder, stem_pool: Sequence[str], ext: str = "") -> str:
    for _ in range(50):
        name = f"{b.rng.choice(stem_pool)}_{b.rng.randint(2, 99)}{ext}"
        if name not in b.here():
            return name
    raise AssertionError("no free name")  # pragma: no cover


# File system ---------------------------------------------------------------------------------
def fs_ls(b: Builder) -> Turn:
    return _do(
        b,
        b.rng.choice(
            ("What is in my current folder? Include hidden files.", "List everything here, hidden files too.")
        ),
        "ls(a=True)",
    )


def fs_cd_ls(b: Builder) -> Turn | None:
    if not b.dirs():
        return None
    d = b.rng.choice(b.dirs())
    return _do(b, f"Open the '{d}' folder and show me what it contains.", f"cd(folder={d!r})", "ls()")


def fs_up(b: Builder) -> Turn | None:
    if len(b.sim["FileSystem"].cwd) < 2:
        return None
    return _do(b, "Go back up to the parent folder and list it.", "cd(folder='..')", "ls()")


def fs_mkdir(b: Builder) -> Turn:
    name = _new_name(b, ("team", "q3", "shared", "old", "misc"))
    return _do(b, f"Create a new folder called '{name}' here.", f"mkdir(dir_name={name!r})")


def fs_write(b: Builder) -> Turn:
    name = _new_name(b, ("memo", "draft", "reminder"), ".txt")
    text = b.rng.choice(MESSAGES)
    return _do(b, f"Write '{text}' into a new file named '{name}'.", f"echo(content={text!r}, file_name={name!r})")


def fs_cat(b: Builder) -> Turn | None:
    if not b.files():
        return None
    f = b.rng.choice(b.files())
    return _do(b, f"Show me what '{f}' says.", f"cat(file_name={f!r})")


def fs_grep(b: Builder) -> Turn | None:
    if not b.files():
        return None
    f = b.rng.choice(b.files())
    words = [w for w in WORDS if w in b.here()[f]["content"]]
    if not words:
        return None
    w = b.rng.choice(words)
    return _do(b, f"Which lines of '{f}' mention '{w}'?", f"grep(file_name={f!r}, pattern={w!r})")


def fs_wc(b: Builder) -> Turn | None:
    if not b.files():
        return None
    f = b.rng.choice(b.files())
    mode, what = b.rng.choice((("w", "words"), ("l", "lines"), ("c", "characters")))
    return _do(b, f"How many {what} does '{f}' have?", f"wc(file_name={f!r}, mode={mode!r})")


def fs_mv_into(b: Builder) -> Turn | None:
    if not b.files() or not b.dirs():
        return None
    f, d = b.rng.choice(b.files()), b.rng.choice(b.dirs())
    if f in b.here()[d]["contents"]:
        return None
    return _do(b, f"Move '{f}' into the '{d}' folder.", f"mv(source={f!r}, destination={d!r})")


def fs_rename(b: Builder) -> Turn | None:
    if not b.files():
        return None
    f = b.rng.choice(b.files())
    new = _new_name(b, ("final", "old", "copy"), "." + f.rsplit(".", 1)[-1])
    return _do(b, f"Rename '{f}' to '{new}'.", f"mv(source={f!r}, destination={new!r})")


def fs_cp(b: Builder) -> Turn | None:
    if not b.files():
        return None
    f = b.rng.choice(b.files())
    new = _new_name(b, ("backup", "spare"), "." + f.rsplit(".", 1)[-1])
    return _do(b, f"Make a copy of '{f}' named '{new}'.", f"cp(source={f!r}, destination={new!r})")


def fs_rm(b: Builder) -> Turn | None:
    if len(b.files()) < 2:
        return None
    f = b.rng.choice(b.files())
    return _do(b, f"Delete the file '{f}'; I do not need it any more.", f"rm(file_name={f!r})")


def fs_tail(b: Builder) -> Turn | None:
    if not b.files():
        return None
    f, n = b.rng.choice(b.files()), b.rng.randint(1, 3)
    return _do(b, f"Show me the last {n} line{'s' if n > 1 else ''} of '{f}'.", f"tail(file_name={f!r}, lines={n})")


def fs_sort(b: Builder) -> Turn | None:
    if not b.files():
        return None
    f = b.rng.choice(b.files())
    return _do(b, f"Show the lines of '{f}' in alphabetical order.", f"sort(file_name={f!r})")


def fs_diff(b: Builder) -> Turn | None:
    if len(b.files()) < 2:
        return None
    f1, f2 = b.rng.sample(b.files(), 2)
    return _do(b, f"What is the difference between '{f1}' and '{f2}'?", f"diff(file_name1={f1!r}, file_name2={f2!r})")


def fs_find(b: Builder) -> Turn:
    part = b.rng.choice(FILE_STEMS)
    return _do(
        b, f"Find every file or folder below this one whose name contains '{part}'.", f"find(path='.', name={part!r})"
    )


def fs_du(b: Builder) -> Turn:
    return _do(
        b, "How much disk space does this folder use? Give it in human-readable form.", "du(human_readable=True)"
    )


def fs_cd_write(b: Builder) -> Turn | None:
    if not b.dirs():
        return None
    d = b.rng.choice(b.dirs())
    b.run(f"cd(folder={d!r})")
    name = _new_name(b, ("readme", "index"), ".md")
    text = b.rng.choice(MESSAGES)
    b.run(f"echo(content={text!r}, file_name={name!r})")
    return (
        f"Go into '{d}' and create a file '{name}' there containing '{text}'.",
        [f"cd(folder={d!r})", f"echo(content={text!r}, file_name={name!r})"],
    )


# Calculator ---------------------------------------------------------------------------------
def _nums(b: Builder) -> list[int]:
    return [b.rng.randint(1, 99) for _ in range(b.rng.randint(3, 6))]


def calc_mean(b: Builder) -> Turn:
    nums = _nums(b)
    return _do(b, f"What is the average of {', '.join(map(str, nums))}?", f"mean(numbers={nums})")


def calc_std(b: Builder) -> Turn:
    nums = _nums(b)
    return _do(b, f"What is the standard deviation of {nums}?", f"standard_deviation(numbers={nums})")


def calc_divide(b: Builder) -> Turn:
    a, c = b.rng.randint(10, 999), b.rng.randint(2, 40)
    return _do(b, f"Compute {a} divided by {c}.", f"divide(a={a}, b={c})")


def calc_power(b: Builder) -> Turn:
    a, e = b.rng.randint(2, 12), b.rng.randint(2, 5)
    return _do(b, f"What is {a} to the power of {e}?", f"power(base={a}, exponent={e})")


def calc_sqrt(b: Builder) -> Turn:
    x, p = b.rng.randint(2, 5000), b.rng.randint(1, 4)
    return _do(b, f"Give me the square root of {x} to {p} decimal places.", f"square_root(number={x}, precision={p})")


def calc_percentage(b: Builder) -> Turn:
    whole = b.rng.randint(50, 900)
    part = b.rng.randint(1, whole)
    return _do(b, f"What percentage of {whole} is {part}?", f"percentage(part={part}, whole={whole})")


def calc_log(b: Builder) -> Turn:
    base, value, p = b.rng.choice((2, 3, 10)), b.rng.randint(5, 5000), b.rng.randint(2, 4)
    return _do(
        b,
        f"What is the logarithm of {value} in base {base}, to {p} decimals?",
        f"logarithm(value={value}, base={base}, precision={p})",
    )


def calc_chain(b: Builder) -> Turn:
    a, c, m = b.rng.randint(10, 500), b.rng.randint(10, 500), b.rng.randint(2, 9)
    total = b.run(f"add(a={a}, b={c})")["result"]
    b.run(f"multiply(a={total!r}, b={m})")
    return f"Add {a} and {c}, then multiply the sum by {m}.", [f"add(a={a}, b={c})", f"multiply(a={total!r}, b={m})"]


def calc_words_percentage(b: Builder) -> Turn | None:
    if "FileSystem" not in b.sim or not b.files():
        return None
    f = b.rng.choice(b.files())
    count = b.run(f"wc(file_name={f!r}, mode='w')")["count"]
    whole = b.rng.randint(max(count, 1) + 1, 200)
    b.run(f"percentage(part={count}, whole={whole})")
    return (
        f"Count the words in '{f}' and tell me what percentage of a {whole}-word limit that is.",
        [f"wc(file_name={f!r}, mode='w')", f"percentage(part={count}, whole={whole})"],
    )


# Messenger ----------------------------------------------------------------------------------
def _login(b: Builder) -> tuple[str, list[str]]:
    """The login phrase and call when nobody is logged in yet."""
    m = b.sim["Messenger"]
    if m.current_user is not None:
        return "", []
    name = b.rng.choice(sorted(m.users))
    uid = m.users[name]
    b.run(f"login(user_id={uid!r})")
    return f"I am {name} (user id {uid}). ", [f"login(user_id={uid!r})"]


def _other(b: Builder) -> str:
    m = b.sim["Messenger"]
    me = next((n for n, u in m.users.items() if u == m.current_user), None)
    return str(b.rng.choice(sorted(n for n in m.users if n != me)))


def msg_send(b: Builder) -> Turn:
    intro, calls = _login(b)
    other, text = _other(b), b.rng.choice(MESSAGES)
    uid = b.run(f"get_user_id(user={other!r})")["user_id"]
    sent = b.run(f"send_message(receiver_id={uid!r}, message={text!r})")
    b.notes["last_sent"] = sent["message_id"]
    calls += [f"get_user_id(user={other!r})", f"send_message(receiver_id={uid!r}, message={text!r})"]
    return f"{intro}Send '{text}' to {other}.", calls


def msg_contact(b: Builder) -> Turn | None:
    intro, calls = _login(b)
    m = b.sim["Messenger"]
    candidates = [n for n in sorted(m.users) if n not in m.contacts and m.users[n] != m.current_user]
    if not candidates:
        return None
    other = b.rng.choice(candidates)
    b.run(f"add_contact(user_name={other!r})")
    return f"{intro}Add {other} to my contacts.", [*calls, f"add_contact(user_name={other!r})"]


def msg_inbox(b: Builder) -> Turn:
    intro, calls = _login(b)
    b.run("view_inbox()")
    return f"{intro}Show me the messages I have received.", [*calls, "view_inbox()"]


def msg_sent(b: Builder) -> Turn:
    intro, calls = _login(b)
    b.run("view_messages_sent()")
    return f"{intro}Which messages have I sent so far?", [*calls, "view_messages_sent()"]


def msg_delete(b: Builder) -> Turn | None:
    mid = b.notes.pop("last_sent", None)
    if mid is None:
        return None
    return _do(b, "Actually, delete the message I just sent.", f"delete_message(message_id={mid})")


def msg_search(b: Builder) -> Turn:
    intro, calls = _login(b)
    word = b.rng.choice(("meeting", "report", "budget", "call", "review"))
    b.run(f"search_messages(keyword={word!r})")
    return f"{intro}Find my messages that mention '{word}'.", [*calls, f"search_messages(keyword={word!r})"]


def msg_send_file(b: Builder) -> Turn | None:
    if "FileSystem" not in b.sim or not b.files():
        return None
    f = b.rng.choice(b.files())
    if len(b.here()[f]["content"]) > 300:
        return None
    intro, calls = _login(b)
    content = b.run(f"cat(file_name={f!r})")["file_content"]
    other = _other(b)
    uid = b.run(f"get_user_id(user={other!r})")["user_id"]
    sent = b.run(f"send_message(receiver_id={uid!r}, message={content!r})")
    b.notes["last_sent"] = sent["message_id"]
    calls += [
        f"cat(file_name={f!r})",
        f"get_user_id(user={other!r})",
        f"send_message(receiver_id={uid!r}, message={content!r})",
    ]
    return f"{intro}Send the content of '{f}' to {other} as a message.", calls


# Trading ------------------------------------------------------------------------------------
def _symbols(b: Builder) -> list[str]:
    return sorted(b.sim["TradingAccount"].market)


def trade_price(b: Builder) -> Turn:
    sym = b.rng.choice(_symbols(b))
    return _do(b, f"What is {sym} trading at right now?", f"get_stock_info(symbol={sym!r})")


def trade_buy(b: Builder) -> Turn | None:
    t = b.sim["TradingAccount"]
    sym = b.rng.choice(_symbols(b))
    n = b.rng.randint(1, 20)
    if t.market[sym]["price_cents"] * n > t.cash_cents:
        return None
    return _do(
        b, f"Buy {n} shares of {sym} at the market price.", f"place_order(order_type='buy', symbol={sym!r}, shares={n})"
    )


def trade_sell(b: Builder) -> Turn | None:
    t = b.sim["TradingAccount"]
    if not t.holdings:
        return None
    sym = b.rng.choice(sorted(t.holdings))
    n = b.rng.randint(1, t.holdings[sym])
    return _do(b, f"Sell {n} of my {sym} shares.", f"place_order(order_type='sell', symbol={sym!r}, shares={n})")


def trade_limit(b: Builder) -> Turn:
    t = b.sim["TradingAccount"]
    sym = b.rng.choice(_symbols(b))
    price = t.market[sym]["price_cents"]
    limit = round(price * b.rng.randint(70, 95) / 10000, 2)
    n = b.rng.randint(1, 10)
    order = b.run(f"place_order(order_type='buy', symbol={sym!r}, shares={n}, limit_price={limit!r})")
    b.notes["pending"] = order["order_id"]
    return (
        f"Place a limit order to buy {n} shares of {sym} at {limit:.2f}.",
        [f"place_order(order_type='buy', symbol={sym!r}, shares={n}, limit_price={limit!r})"],
    )


def trade_cancel(b: Builder) -> Turn | None:
    order = b.notes.pop("pending", None)
    if order is None:
        return None
    return _do(b, "Cancel that pending order, please.", f"cancel_order(order_id={order})")


def trade_watch(b: Builder) -> Turn | None:
    t = b.sim["TradingAccount"]
    options = [s for s in _symbols(b) if s not in t.watchlist]
    sym = b.rng.choice(options)
    return _do(b, f"Add {sym} to my watchlist.", f"add_to_watchlist(symbol={sym!r})")


def trade_summary(b: Builder) -> Turn:
    return _do(b, "How much cash do I have, and what do I hold?", "get_account_summary()")


def trade_deposit(b: Builder) -> Turn:
    x = b.rng.randint(1, 50) * 100
    return _do(b, f"Deposit {x} into my trading account.", f"deposit(amount={x})")


def trade_sector(b: Builder) -> Turn:
    sector = b.rng.choice(sorted({v["sector"] for v in b.sim["TradingAccount"].market.values()}))
    return _do(b, f"Which {sector} stocks can I trade?", f"list_stocks_by_sector(sector={sector!r})")


def trade_conditional(b: Builder) -> Turn | None:
    t = b.sim["TradingAccount"]
    sym = b.rng.choice(_symbols(b))
    price = t.market[sym]["price_cents"] / 100
    threshold = round(price * b.rng.choice((0.9, 1.1)), 2)
    n = b.rng.randint(1, 5)
    question = f"Check the price of {sym} and buy {n} shares if it is below {threshold:.2f}."
    calls = [f"get_stock_info(symbol={sym!r})"]
    b.run(calls[0])
    if price < threshold and t.market[sym]["price_cents"] * n <= t.cash_cents:
        calls.append(f"place_order(order_type='buy', symbol={sym!r}, shares={n})")
        b.run(calls[1])
    elif price < threshold:
        return None  # pragma: no cover - not enough cash; try another template
    return question, calls


# Travel -------------------------------------------------------------------------------------
def _route(b: Builder) -> tuple[str, str]:
    route = b.rng.choice(sorted(b.sim["TravelAgency"].routes))
    origin, destination = route.split("-")
    return origin, destination


def _card(b: Builder) -> str:
    return str(b.rng.choice(sorted(b.sim["TravelAgency"].cards)))


def travel_cost(b: Builder) -> Turn:
    o, d = _route(b)
    cls = b.rng.choice(("economy", "business", "first"))
    return _do(
        b,
        f"How much is a {cls} ticket from {o} to {d}?",
        f"get_flight_cost(origin={o!r}, destination={d!r}, travel_class={cls!r})",
    )


def travel_book(b: Builder) -> Turn | None:
    o, d = _route(b)
    cls = b.rng.choice(("economy", "economy", "business"))
    card = _card(b)
    date = f"2025-{b.rng.randint(1, 12):02d}-{b.rng.randint(1, 28):02d}"
    call = f"book_flight(origin={o!r}, destination={d!r}, date={date!r}, travel_class={cls!r}, card_id={card!r})"
    agency = b.sim["TravelAgency"]
    fare = agency._fare(o, d, cls)
    limit = agency.budget_limit_cents
    if fare is None or fare > agency.cards[card]["balance_cents"] or (limit is not None and fare > limit):
        return None
    booking = b.run(call)
    b.notes["booking"] = (booking["booking_id"], card)
    return f"Book a {cls} flight from {o} to {d} on {date}, paid with card {card}.", [call]


def travel_budget(b: Builder) -> Turn:
    x = b.rng.randint(8, 30) * 50
    return _do(b, f"Set my travel budget limit to {x} EUR per ticket.", f"set_budget_limit(limit={x})")


def travel_insure(b: Builder) -> Turn | None:
    if "booking" not in b.notes:
        return None
    booking, card = b.notes["booking"]
    if booking in b.sim["TravelAgency"].insurance:
        return None
    kind = b.rng.choice(("basic", "premium"))
    return _do(
        b,
        f"Add {kind} insurance to booking {booking}, paid with the same card.",
        f"purchase_insurance(booking_id={booking!r}, insurance_type={kind!r}, card_id={card!r})",
    )


def travel_cancel(b: Builder) -> Turn | None:
    booking = b.notes.pop("booking", None)
    if booking is None:
        return None
    return _do(b, f"Cancel booking {booking[0]} and refund it.", f"cancel_booking(booking_id={booking[0]!r})")


def travel_balance(b: Builder) -> Turn:
    card = _card(b)
    return _do(b, f"What is the balance on card {card}?", f"get_card_balance(card_id={card!r})")


def travel_convert(b: Builder) -> Turn:
    x, cur = b.rng.randint(20, 2000), b.rng.choice(CURRENCIES)
    return _do(
        b, f"How much is {x} EUR in {cur}?", f"convert_currency(amount={x}, from_currency='EUR', to_currency={cur!r})"
    )


def travel_airports(b: Builder) -> Turn:
    return _do(b, "Which airports do you fly from or to?", "list_airports()")


# Vehicle ------------------------------------------------------------------------------------
def _all_doors() -> str:
    return repr(list(DOORS))


def car_lock(b: Builder) -> Turn | None:
    if all(s == "locked" for s in b.sim["Vehicle"].doors.values()):
        return None
    return _do(b, "Lock all the doors of the car.", f"lock_doors(unlock=False, doors={_all_doors()})")


def car_start(b: Builder) -> Turn | None:
    v = b.sim["Vehicle"]
    if v.engine_on:
        return None
    calls = []
    if any(s != "locked" for s in v.doors.values()):
        calls.append(f"lock_doors(unlock=False, doors={_all_doors()})")
    if v.brake_pedal < 1.0:
        calls.append("press_brake_pedal(position=1.0)")
    calls.append("start_engine()")
    return _do(b, "Start the engine, please.", *calls)


def car_lights(b: Builder) -> Turn:
    mode = b.rng.choice(("on", "off", "auto"))
    return _do(b, f"Set the headlights to {mode}.", f"set_headlights(mode={mode!r})")


def car_climate(b: Builder) -> Turn:
    t, mode = b.rng.randint(17, 27), b.rng.choice(("auto", "cool", "heat"))
    return _do(
        b, f"Set the cabin to {t} degrees Celsius in {mode} mode.", f"set_climate(temperature={t}, mode={mode!r})"
    )


def car_tires(b: Builder) -> Turn:
    return _do(b, "Check my tire pressure.", "check_tire_pressure()")


def car_inflate(b: Builder) -> Turn | None:
    v = b.sim["Vehicle"]
    low = [t for t in TIRES if v.tire_pressure[t] < 30.0]
    if not low:
        return None
    psi = b.rng.choice((32, 33, 35))
    calls = ["check_tire_pressure()"] + [f"inflate_tire(tire={t!r}, psi={psi})" for t in low]
    return _do(b, f"Check the tires and inflate every tire below 30 psi to {psi} psi.", *calls)


def car_refuel(b: Builder) -> Turn | None:
    room = int(60 - b.sim["Vehicle"].fuel_liters)
    if room < 5:
        return None
    liters = b.rng.randint(5, room)
    return _do(b, f"Add {liters} liters of fuel.", f"refuel(liters={liters})")


def car_range(b: Builder) -> Turn:
    return _do(b, "How far can I drive with the fuel I have?", "estimate_range()")


def car_cruise(b: Builder) -> Turn | None:
    v = b.sim["Vehicle"]
    if not v.engine_on or v.cruise_speed is not None:
        return None
    speed = b.rng.choice((80, 100, 110, 120))
    calls = ["set_parking_brake(engaged=False)"] if v.parking_brake else []
    calls.append(f"activate_cruise_control(speed_kmh={speed})")
    return _do(b, f"Hold {speed} km/h with cruise control.", *calls)


TEMPLATES: dict[str, list[Template]] = {
    "FileSystem": [
        fs_ls,
        fs_cd_ls,
        fs_up,
        fs_mkdir,
        fs_write,
        fs_cat,
        fs_grep,
        fs_wc,
        fs_mv_into,
        fs_rename,
        fs_cp,
        fs_rm,
        fs_tail,
        fs_sort,
        fs_diff,
        fs_find,
        fs_du,
        fs_cd_write,
        msg_send_file,
        calc_words_percentage,
    ],
    "Calculator": [calc_mean, calc_std, calc_divide, calc_power, calc_sqrt, calc_percentage, calc_log, calc_chain],
    "Messenger": [msg_send, msg_contact, msg_inbox, msg_sent, msg_delete, msg_search, msg_send],
    "TradingAccount": [
        trade_price,
        trade_buy,
        trade_sell,
        trade_limit,
        trade_cancel,
        trade_watch,
        trade_summary,
        trade_deposit,
        trade_sector,
        trade_conditional,
    ],
    "TravelAgency": [
        travel_cost,
        travel_book,
        travel_book,
        travel_budget,
        travel_insure,
        travel_cancel,
        travel_balance,
        travel_convert,
        travel_airports,
    ],
    "Vehicle": [
        car_lock,
        car_start,
        car_lights,
        car_climate,
        car_tires,
        car_inflate,
        car_refuel,
        car_range,
        car_cruise,
    ],
}
# Templates that also need a second API.
NEEDS = {msg_send_file: "Messenger", calc_words_percentage: "Calculator"}


def _attempt(b: Builder, template: Template) -> Turn | None:
    """Run ``template``; on failure (not applicable, or a ground-truth call that would error)
    roll the simulation back so that no half-applied turn leaks into the entry."""
    saved = copy.deepcopy((b.sim, b.notes))
    try:
        made = template(b)
    except Exception:  # an inapplicable template: try another
        made = None
    if made is None:
        b.sim, b.notes = saved
    return made


def _draw(rng: SplitMix64) -> tuple[list[str], dict[str, Any], list[list[str]], list[str]]:
    n_apis = rng.choice((1, 1, 2, 2, 2, 3))
    apis = rng.sample(sorted(TEMPLATES), n_apis)
    b = Builder(rng, apis)
    turns: list[str] = []
    truth: list[list[str]] = []
    used: set[str] = set()
    cost = 0
    for t in range(rng.randint(3, 6)):
        if t > 0 and rng.chance(0.11):
            question, calls = rng.choice(IRRELEVANT), list[str]()
        else:
            unused = [a for a in apis if a not in used]
            api = rng.choice(unused) if unused and rng.chance(0.7) else rng.choice(apis)
            made = None
            for _ in range(30):
                template = rng.choice(TEMPLATES[api])
                if NEEDS.get(template, api) not in apis:
                    continue
                made = _attempt(b, template)
                if made is not None:
                    break
            if made is None:
                continue
            question, calls = made
            used.add(api)
        if cost + max(1, len(calls)) > MAX_ACTIONS:
            break
        cost += max(1, len(calls))
        turns.append(question)
        truth.append(calls)
    config = {api: b.config[api] for api in apis if b.config[api]}
    return turns, config, truth, apis


def build_entry(index: int) -> tuple[list[str], dict[str, Any], list[list[str]], list[str]]:
    """(user turns, initial config, ground truth per turn, involved APIs) of entry ``index``:
    the first draw of its seed stream with at least two turns, one of them with calls."""
    for attempt in range(100):
        turns, config, truth, apis = _draw(SplitMix64.from_seeds(SEED, index, attempt))
        if len(turns) >= 2 and any(truth):
            return turns, config, truth, apis
    raise AssertionError(f"entry {index}: no usable draw")  # pragma: no cover


def build_entries() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(questions, answers) records in BFCL-v3 format."""
    questions, answers = [], []
    for i in range(N_ENTRIES):
        turns, config, truth, apis = build_entry(i)
        entry_id = f"arlkit_multi_turn_{i}"
        questions.append(
            {
                "id": entry_id,
                "question": [[{"role": "user", "content": q}] for q in turns],
                "initial_config": config,
                "involved_classes": apis,
            }
        )
        answers.append({"id": entry_id, "ground_truth": truth})
    return questions, answers


def render(records: list[dict[str, Any]]) -> str:
    """JSON lines with stable key order."""
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    target = Path(argv[0]) if argv else HERE
    questions, answers = build_entries()
    (target / "questions.jsonl").write_text(render(questions), encoding="utf-8")
    (target / "answers.jsonl").write_text(render(answers), encoding="utf-8")
    print(f"{len(questions)} entries -> {target}")
    assert FINISH not in "".join(render(answers))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
