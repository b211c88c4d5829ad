"""FrozenLake task sets where the turn budget matters (docs/metrics.md#budget-headroom).

On standard random maps the budget-aware optimum beats the full-budget optimum by only about 2
points at 25% of T_max, too little for any evaluation to resolve. Both sets here are screened by an
exact quantity of each map's MDP at that budget (:func:`quarter_budget`), never by a model's results:

- ``budget_sensitive``: the headroom (:meth:`~arlkit.envs.frozenlake.maps.LakeModel.headroom`) is at
  least a threshold. Start and goal sit in opposite corners, so every route that fits 25% of T_max is a
  shortest one, and the budget-aware decisions come late in an episode and are small ones.
- ``budget_fork``: the gain of the budget-aware *first move*
  (:meth:`~arlkit.envs.frozenlake.maps.LakeModel.first_move_gain`) is at least a threshold. The goal stays
  in the bottom-right corner, the start sits anywhere, and the map forks at the start: a short route
  beside holes that a tight budget must take, and a safe detour that the full-budget oracle prefers. Full-budget training never meets that
  decision with a tight budget left; BudgetMix does (docs/training.md, "The budget-fork maps").

Each set is found by a seeded hill climb from random maps (single-cell flips frozen <-> hole, and for
``budget_fork`` moves of the start), after which every accepted map's single-cell
neighbours that also clear the threshold are offered too. The streams are deterministic and finite, so a
task space that is too small ends in a clear error rather than a hang.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

import numpy as np

from arlkit.envs.frozenlake.maps import generate_random_map, lake_model, reaches_goal

__all__ = [
    "SHIPPED_SETS", "ShippedSet", "budget_fork_maps", "budget_sensitive_maps", "quarter_budget", "shipped_maps",
]  # fmt: skip

Map = tuple[str, ...]


def quarter_budget(t_max: int) -> int:
    """25% of T_max rounded up to whole turns, in integers."""
    return (t_max * 25 + 99) // 100


def _rows(flat: list[str], size: int) -> Map:
    return tuple("".join(flat[r * size : (r + 1) * size]) for r in range(size))


def _flip(desc: Map, index: int) -> Map:
    """``desc`` with cell ``index`` (row-major) turned frozen <-> hole."""
    flat = list("".join(desc))
    flat[index] = "H" if flat[index] == "F" else "F"
    return _rows(flat, len(desc))


def _screened(
    score: Callable[[Map], float],
    first_map: Callable[[np.random.Generator], Map],
    mutate: Callable[[Map, np.random.Generator], Map | None],
    *,
    size: int,
    threshold: float,
    seed: int,
    salt: int,
    restarts: int,
    climb_steps: int,
) -> Iterator[Map | None]:
    """The hill climb shared by both sets (module docstring): per restart, climb from ``first_map`` by
    ``mutate`` (``None``: no move this step) while ``score`` does not drop, until it reaches ``threshold``;
    yield the map and its single-cell neighbours that clear it too, or ``None`` for a failed climb."""
    seen: set[Map] = set()
    for restart in range(restarts):
        rng = np.random.default_rng([seed, size, restart, salt])
        desc = first_map(rng)
        best = score(desc)
        for _ in range(climb_steps):
            if best >= threshold:
                break
            candidate = mutate(desc, rng)
            if candidate is None or not reaches_goal(candidate):
                continue
            value = score(candidate)
            if value >= best:
                desc, best = candidate, value
        if best < threshold:
            yield None
            continue
        flat = "".join(desc)
        family = [desc] + [_flip(desc, i) for i in range(size * size) if flat[i] in "FH"]
        for member in family:
            if member in seen or not reaches_goal(member):
                continue
            if member is desc or score(member) >= threshold:
                seen.add(member)
                yield member


def budget_sensitive_maps(
    size: int,
    success_rate: float,
    t_max: int,
    *,
    threshold: float = 0.10,
    seed: int = 0,
    restarts: int = 20_000,
    climb_steps: int = 60,
    p_frozen: float = 0.8,
) -> Iterator[Map | None]:
    """Slippery maps (start top-left, goal bottom-right) whose headroom at ``quarter_budget(t_max)`` is at
    least ``threshold``.

    Yields distinct maps (Gymnasium letters) in a deterministic order, and ``None`` after each
    hill climb that failed (so a consumer can bound its attempts); stops after ``restarts`` climbs.
    """
    budget = quarter_budget(t_max)
    corners = (0, size * size - 1)

    def flip_inside(desc: Map, rng: np.random.Generator) -> Map | None:
        r, c = (int(x) for x in rng.integers(size, size=2))
        return None if r * size + c in corners else _flip(desc, r * size + c)

    return _screened(
        lambda desc: lake_model(desc, True, success_rate).headroom(budget, t_max),
        lambda rng: tuple(generate_random_map(size, p_frozen, rng)),
        flip_inside,
        size=size, threshold=threshold, seed=seed, salt=2511, restarts=restarts, climb_steps=climb_steps,
    )  # fmt: skip


def budget_fork_maps(
    size: int,
    success_rate: float,
    t_max: int,
    *,
    threshold: float = 0.20,
    seed: int = 0,
    restarts: int = 20_000,
    climb_steps: int = 100,
    p_frozen: float = 0.8,
) -> Iterator[Map | None]:
    """Slippery maps whose first-move gain at ``quarter_budget(t_max)`` is at least ``threshold``, with the
    goal in the bottom-right corner and the start anywhere (module docstring). Yields like
    :func:`budget_sensitive_maps`.

    (With the goal anywhere too the screening finds more maps, but the nano model does not learn to play
    them in the demo's cloning budget: docs/training.md, "The budget-fork maps".)"""
    budget = quarter_budget(t_max)

    def move_start(desc: Map, index: int) -> Map | None:
        flat = list("".join(desc))
        if flat[index] != "F":
            return None
        flat[flat.index("S")], flat[index] = "F", "S"
        return _rows(flat, size)

    def first_map(rng: np.random.Generator) -> Map:
        desc = tuple(generate_random_map(size, p_frozen, rng))
        frozen = [i for i, ch in enumerate("".join(desc)) if ch == "F"]
        return move_start(desc, int(rng.choice(frozen))) or desc

    def flip_or_move(desc: Map, rng: np.random.Generator) -> Map | None:
        kind, index = int(rng.integers(2)), int(rng.integers(size * size))
        if kind == 0:
            return _flip(desc, index) if "".join(desc)[index] in "FH" else None
        return move_start(desc, index)

    def score(desc: Map) -> float:
        return lake_model(desc, True, success_rate).first_move_gain(budget, t_max) if reaches_goal(desc) else 0.0

    return _screened(score, first_map, flip_or_move, size=size, threshold=threshold, seed=seed, salt=3607,
                     restarts=restarts, climb_steps=climb_steps)


# -- the shipped sets -----------------------------------------------------------------------------
# Screening takes minutes (each map's score is an exact DP), so each set's default configuration is
# generated once by `scripts/data/make_frozenlake_sets.py` and shipped with the package; any other
# configuration is generated on the fly by the same code.


@dataclass(frozen=True)
class ShippedSet:
    """One shipped task set: the generator's parameters, the maps per split, and the data file."""

    params: dict
    counts: dict
    file: str


SHIPPED_SETS = {
    "budget_sensitive": ShippedSet(
        {"size": 5, "success_rate": 0.8, "t_max": 32, "threshold": 0.10, "seed": 0, "p_frozen": 0.8},
        {"train": 600, "test": 300}, "frozenlake_budget_sensitive.json"),
    "budget_fork": ShippedSet(
        {"size": 5, "success_rate": 0.8, "t_max": 32, "threshold": 0.20, "seed": 0, "p_frozen": 0.8},
        {"train": 600, "test": 300}, "frozenlake_budget_fork.json"),
}  # fmt: skip
GENERATORS = {"budget_sensitive": budget_sensitive_maps, "budget_fork": budget_fork_maps}


@cache
def _shipped_file(name: str) -> dict:
    from importlib import resources

    return json.loads(resources.files("arlkit.data").joinpath(name).read_text(encoding="utf-8"))


def shipped_maps(task_set: str, params: dict, split: str, n: int) -> list[Map] | None:
    """The first ``n`` shipped maps of ``split`` in ``task_set`` when ``params`` match the shipped set's,
    else None."""
    shipped = SHIPPED_SETS.get(task_set)
    if shipped is None or params != shipped.params or n > shipped.counts.get(split, 0):
        return None
    data = _shipped_file(shipped.file)
    if data["params"] != shipped.params:
        return None
    return [tuple(rows) for rows in data[split][:n]]
