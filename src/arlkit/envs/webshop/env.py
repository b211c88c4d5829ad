"""WebShop (Yao et al. 2022) in text mode, offline (docs/environments.md#webshop; ARLArena's conventions, T_max 15).

Episode semantics:

- Observation 0 is the search page; every observation starts with the customer's instruction and ends
  with the actions the page offers (``search[<your query>]`` on the search page, ``click[...]`` elsewhere),
  as ARLArena lists a page's admissible actions. Pages and moves: :mod:`arlkit.envs.webshop.pages`.
- An action is ``search[query]`` or ``click[button]`` inside ``<action>...</action>``. An action that is not
  one of these, or a click the page does not offer, is **invalid**: the state is unchanged, the observation
  says why, and the trainer charges its invalid-action penalty (0.1, ARLArena's) as for every environment.
- ``click[buy now]`` ends the episode with WebShop's score of the purchase
  (:func:`~arlkit.envs.webshop.reward.score_purchase`); success means score 1. The step reward is ARLArena's
  ``success_reward`` (10) on success and 0 otherwise, or the score itself with ``reward=score`` (WebShop's
  own reward: then a trajectory's return is its score). The final observation states the score either
  way; :func:`purchase_score` reads it from the environment's record of the purchase, never from an
  observation (an invalid action's observation echoes the action, whatever text it holds).
- Tasks are WebShop's goals: the test split is goals 0-499 and the training split goals 500 on (ARLArena's
  and verl-agent's; ``test_goals``, ``train_from``). By default the shipped synthetic catalogue (1,200 products,
  1,500 goals, ``scripts/data/make_webshop_catalog.py``); ``data_dir`` reads WebShop's own files.

The oracle (:mod:`arlkit.envs.webshop.oracle`) searches with the goal's key words, opens a product that
can score 1 (the goal's own, when the search shows it), chooses the options that count and buys; its
plan length ``3 + |U_opt|`` is the structural bound of Pass@(K,T). T_max is ARLArena's 15 (where that number
comes from: docs/environments.md#webshop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from arlkit.envs.parsing import parse_tagged_action, quote
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.splits import content_id
from arlkit.envs.webshop.catalog import Catalog, CatalogFiles, Goal, goal_from_payload, load_catalog
from arlkit.envs.webshop.oracle import GoalOracle
from arlkit.envs.webshop.pages import State, clickables, parse_move, render, transition
from arlkit.envs.webshop.reward import PurchaseScore, score_purchase
from arlkit.envs.webshop.search import SearchIndex, require_extra

__all__ = ["GAMMA", "WebshopConfig", "WebshopEnv", "purchase_score"]

GAMMA = 0.95
_SHIPPED = ("items_shuffle_synthetic.json.gz", "items_ins_v2_synthetic.json.gz", "items_human_ins_synthetic.json.gz",
            "reviews_synthetic.json.gz")  # the shipped catalogue's files, in CatalogFiles' order
_SCORE_LINE = "Your score (min 0.0, max 1.0): "


@dataclass(frozen=True)
class WebshopConfig:
    """Configuration of the WebShop environment.

    Attributes:
        data_dir: a folder of WebShop's own files (``items_shuffle*.json``, ``items_ins_v2*.json``,
            ``items_human_ins*.json``, optional ``reviews*.json``; ``.json.gz`` too); ``None`` uses the shipped
            synthetic catalogue.
        products_file: the products file in ``data_dir``: a name, or a glob that must match one file.
        attributes_file: the product attributes file in ``data_dir`` (name or glob).
        goals_file: the human goals file in ``data_dir`` (name or glob).
        reviews_file: the reviews file in ``data_dir`` (name or glob; none found: no reviews; empty: skip).
        test_goals: the test split: the first this many goals in WebShop's order (ARLArena evaluates on goals 0-499).
        train_from: the first training goal in WebShop's order (ARLArena and verl-agent train on goals 500 on;
            WebShop's own baselines on 1500 on, 500-1499 being its validation goals).
        reward: ``arlarena``: ``success_reward`` when the purchase scores 1, else 0; ``score``: the score.
        success_reward: the reward of a purchase that scores 1 under ``reward=arlarena`` (ARLArena: 10).
        max_query_chars: longest search query accepted.
        detail_chars: characters of a description, features or reviews page shown.
        t_max: the family's full turn budget T_max (ARLArena: 15).
    """

    data_dir: str | None = None
    products_file: str = "items_shuffle*.json*"
    attributes_file: str = "items_ins_v2*.json*"
    goals_file: str = "items_human_ins*.json*"
    reviews_file: str = "reviews*.json*"
    test_goals: int = 500
    train_from: int = 500
    reward: Literal["arlarena", "score"] = "arlarena"
    success_reward: float = 10.0
    max_query_chars: int = 500
    detail_chars: int = 1500
    t_max: int = 15

    def __post_init__(self) -> None:
        if self.reward not in ("arlarena", "score"):
            raise ValueError(f"reward must be arlarena or score, got {self.reward!r}")
        if self.test_goals < 0 or self.train_from < 0:
            raise ValueError(f"test_goals and train_from must be >= 0, got {self.test_goals} and {self.train_from}")
        if self.max_query_chars < 10:
            raise ValueError(f"max_query_chars must be >= 10, got {self.max_query_chars}")
        if self.detail_chars < 100:
            raise ValueError(f"detail_chars must be >= 100, got {self.detail_chars}")
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")


@dataclass
class _Store:
    """A loaded catalogue with its search index and per-goal oracles, shared by every env of a process."""

    catalog: Catalog
    index: SearchIndex
    oracles: dict[Goal, GoalOracle]


# The rollout engine builds one environment per trajectory: catalogues load once per process, keyed by
# their files and modification times.
_STORES: dict[tuple[object, ...], _Store] = {}
_MAX_ORACLES = 20_000


def _store(config: WebshopConfig) -> _Store:
    require_extra()  # before any work: a missing package is one clear error, not invalid steps later
    if config.data_dir is None:
        files = CatalogFiles(Path(str(resources.files("arlkit.data").joinpath("webshop"))), *_SHIPPED)
    else:
        names = (config.products_file, config.attributes_file, config.goals_file, config.reviews_file)
        files = CatalogFiles(Path(config.data_dir).expanduser(), *names)
    paths = [files.resolve(k, required=k != "reviews") for k in ("products", "attributes", "goals", "reviews")]
    key = tuple((str(p), p.stat().st_mtime_ns) if p is not None else None for p in paths)
    if key not in _STORES:
        catalog = load_catalog(files)
        _STORES[key] = _Store(catalog, SearchIndex(catalog.products), {})
    return _STORES[key]


class WebshopEnv:
    """WebShop's search -> results -> item -> options -> buy episodes; see the module docstring."""

    name = "webshop"

    def __init__(self, config: WebshopConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        self._store: _Store | None = None
        self._task: Task | None = None
        self._goal: Goal | None = None
        self._state = State()
        self._purchase: PurchaseScore | None = None

    # -- tasks ---------------------------------------------------------------------------------
    @property
    def store(self) -> _Store:
        """The catalogue, search index and oracles (loaded on first use, shared by the process)."""
        if self._store is None:
            self._store = _store(self.config)
        return self._store

    @property
    def catalog(self) -> Catalog:
        """The loaded catalogue."""
        return self.store.catalog

    def tasks(self, split: str, n: int) -> list[Task]:
        if n < 0:
            raise ValueError(f"the number of tasks must be >= 0, got {n}")
        goals = self.catalog.split(split, self.config.test_goals, self.config.train_from)
        if len(goals) < n:
            raise ValueError(f"only {len(goals)} {split} goals exist in {self.catalog.source} (asked for {n})")
        return [self.task_from(goal) for goal in goals[:n]]

    @staticmethod
    def task_from(goal: Goal) -> Task:
        """The protocol task of one goal (its id depends on the goal's content only)."""
        payload = goal.payload()
        content = repr((goal.asin, goal.instruction, goal.attributes, goal.options, goal.price_upper))
        return Task(task_id="ws-" + content_id(content), payload=payload)

    # -- episode -------------------------------------------------------------------------------
    @property
    def goal(self) -> Goal:
        """The current goal."""
        if self._goal is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._goal

    @property
    def state(self) -> State:
        """The current page state."""
        return self._state

    @property
    def score(self) -> float | None:
        """The score of the purchase, once bought (``None`` before)."""
        return None if self._purchase is None else self._purchase.score

    def reset(self, task: Task, seed: int) -> str:
        """Start ``task``; WebShop is deterministic, so ``seed`` is unused."""
        asin = str(task.payload.get("asin", "")).upper()
        product = self.catalog.by_asin.get(asin)
        if product is None:
            raise ValueError(f"task {task.task_id}: product {asin!r} is not in {self.catalog.source}")
        self._task, self._goal = task, goal_from_payload(task.payload, product)
        self._state, self._purchase = State(), None
        return self.render()

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_tagged_action(reply)

    def _search(self, query: str) -> tuple[str, ...]:
        return self.store.index.search(query)

    def _next(self, state: State, action: object) -> State | str:
        move = parse_move(action)
        if move is None:
            shown = quote(action) if isinstance(action, str) else "of a non-text type"
            return f"{shown} is not search[<query>] or click[<button>]"
        return transition(state, move, self.catalog, self._search, self.config.max_query_chars)

    def step(self, action: str) -> StepResult:
        goal = self.goal
        if self._state.page == "done":
            return StepResult("The episode is over.", 0.0, True, False, False)
        nxt = self._next(self._state, action)
        if isinstance(nxt, str):
            return StepResult(f"Invalid action: {nxt}. Nothing happened.\n{self.render()}", 0.0, False, False, False)
        self._state = nxt
        if nxt.page != "done":
            return StepResult(self.render(), 0.0, False, False, True)
        product = self.catalog.by_asin[nxt.asin]
        self._purchase = score_purchase(product, goal, nxt.options)
        success = self._purchase.score >= 1.0
        if self.config.reward == "score":
            reward = self._purchase.score
        else:
            reward = self.config.success_reward if success else 0.0
        return StepResult(self.render(), reward, True, success, True)

    def render(self) -> str:
        goal, state = self.goal, self._state
        if state.page == "done":
            product = self.catalog.by_asin[state.asin]
            chosen = ", ".join(f"{k}: {v}" for k, v in state.options) or "no options chosen"
            score = 0.0 if self._purchase is None else self._purchase.score
            bought = f"You bought [{state.asin.lower()}] {product.title} ({chosen})."
            return f"Instruction: {goal.instruction}\nThank you for shopping with us! {bought}\n{_SCORE_LINE}{score:.4f}"
        return render(state, goal, self.catalog, self._search, self.config.detail_chars)

    def prompt_text(self) -> PromptText:
        """The instruction (rules, goal) and the action format of the prompt."""
        instruction = (
            "You are shopping in WebShop, a simulated online store, for a customer. Search the store, open products "
            "from the results (10 per page), choose the options the customer asks for on the product's page (a "
            "product's description, features and reviews are one click away) and buy the product. The purchase is "
            "scored from 0 to 1 on the product's type, the attributes the customer asks for, the options chosen and "
            "the price limit; only a score of 1 is a success, and buying ends the episode. Each observation lists "
            f"the actions its page offers.\nThe customer's request: {self.goal.instruction}"
        )
        action_format = (
            "The action is search[your query] on the search page or click[button] with one of the buttons the page "
            "lists (a product id, an option value, next >, < prev, back to search, description, features, reviews, "
            "buy now), for example <action>search[red cotton t-shirt]</action> or <action>click[buy now]</action>."
        )
        return PromptText(instruction, action_format)

    # -- capabilities --------------------------------------------------------------------------
    def admissible_actions(self) -> Sequence[str]:
        """The page's clicks; on the search page any query is admissible, and this lists one search per
        product type of the catalogue (its ``query`` field), a finite set for random and scripted policies."""
        if self._state.page == "search":
            return [f"search[{q}]" for q in self.catalog.queries]
        return [f"click[{c}]" for c in clickables(self._state, self.catalog, self._search)]

    def state_key(self) -> str:
        task = self._task.task_id if self._task is not None else "-"
        score = "" if self._purchase is None else f"|{self._purchase.score:.4f}"
        return f"{task}|{self._state.key()}{score}"

    def snapshot(self) -> dict[str, Any]:
        return {"task": self._task, "goal": self._goal, "state": self._state, "purchase": self._purchase}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self._task, self._goal = snapshot["task"], snapshot["goal"]
        self._state, self._purchase = snapshot["state"], snapshot["purchase"]

    @property
    def oracle(self) -> GoalOracle:
        """The current goal's oracle (built on first use, cached per goal)."""
        goal, oracles = self.goal, self.store.oracles
        if goal not in oracles:
            if len(oracles) >= _MAX_ORACLES:
                oracles.clear()
            oracles[goal] = GoalOracle(self.catalog, goal, self._search)
        return oracles[goal]

    def shortest_solution_length(self) -> int | None:
        return self.oracle.distance(self._state, self.score)

    def success_probability(self, remaining: int) -> float:
        d = self.shortest_solution_length()
        return 1.0 if d is not None and d <= remaining else 0.0

    def _candidates(self) -> list[str]:
        actions = list(self.admissible_actions())
        if self._state.page == "search":
            query = self.oracle.best_search[0]
            if query is not None and f"search[{query}]" not in actions:
                actions.insert(0, f"search[{query}]")
        return actions

    def action_quality(self, action: str, remaining: int) -> float:
        """``Q*_h(s, a)`` with gamma 0.95 for any action text: 1 when it succeeds now, ``gamma**d(s')`` when the
        rest fits in the remaining turns, else 0; an invalid action scores 0. The state is unchanged."""
        if self._state.page == "done" or remaining <= 0:
            return 0.0
        nxt = self._next(self._state, action)
        if isinstance(nxt, str):
            return 0.0
        if nxt.page == "done":
            return 1.0 if score_purchase(self.catalog.by_asin[nxt.asin], self.goal, nxt.options).score >= 1.0 else 0.0
        d = self.oracle.distance(nxt)
        return GAMMA**d if d is not None and d + 1 <= remaining else 0.0

    def action_values(self, remaining: int) -> dict[str, float]:
        return {a: self.action_quality(a, remaining) for a in self._candidates()}

    def optimal_actions(self, remaining: int) -> list[str]:
        values = self.action_values(remaining)
        best = max(values.values(), default=0.0)
        gold = f"click[{self.goal.asin.lower()}]"
        best_actions = [a for a, v in values.items() if v >= best - 1e-12]
        return sorted(best_actions, key=lambda a: a != gold)  # the goal's own product first


@register_env("webshop", WebshopConfig)
def _make_webshop(config: WebshopConfig) -> WebshopEnv:
    return WebshopEnv(config)


def purchase_score(env: WebshopEnv) -> float | None:
    """The WebShop score of ``env``'s purchase, from the environment's own record of it (``None``
    before a purchase). Text is refused: an observation echoes what the policy wrote, so a score
    line in it proves nothing."""
    if not isinstance(env, WebshopEnv):
        raise TypeError(f"purchase_score reads a WebshopEnv's record of its purchase, not a {type(env).__name__}")
    return env.score
