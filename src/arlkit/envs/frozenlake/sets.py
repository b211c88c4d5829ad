"""FrozenLake task sets where the turn budget matters (docs/metrics.md#budget-headroom).

On standard random maps the budget-aware optimum beats the full-budget optimum by only about 2
points at 25% of T_max, too little for any evaluation to resolve. This module builds maps whose
headroom at that budget is at least a threshold: random maps are improved by a seeded hill climb
over single-cell flips (frozen <-> hole, the goal staying reachable), which discovers the
"short risky path beside a longer safe detour" shape by itself; every accepted map's single-cell
neighbours that also clear the threshold are offered too. The stream is deterministic and finite,
so a task space that is too small ends in a clear error rather than a hang.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from arlkit.envs.frozenlake.maps import generate_random_map, lake_model, reaches_goal

__all__ = ["budget_sensitive_maps", "quarter_budget"]


def quarter_budget(t_max: int) -> int:
    """25% of T_max rounded up to whole turns, in integers."""
    return (t_max * 25 + 99) // 100


def _flip(desc: tuple[str, ...], r: int, c: int) -> tuple[str, ...]:
    rows = [list(row) for row in desc]
    rows[r][c] = "H" if rows[r][c] == "F" else "F"
    return tuple("".join(row) for row in rows)


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
) -> Iterator[tuple[str, ...] | None]:
    """Slippery maps whose headroom at ``quarter_budget(t_max)`` is at least ``threshold``.

    Yields distinct maps (Gymnasium letters) in a deterministic order, and ``None`` after each
    hill climb that failed (so a consumer can bound its attempts); stops after ``restarts`` climbs.
    """
    budget = quarter_budget(t_max)
    seen: set[tuple[str, ...]] = set()

    def headroom(desc: tuple[str, ...]) -> float:
        return lake_model(desc, True, success_rate).headroom(budget, t_max)

    for restart in range(restarts):
        rng = np.random.default_rng([seed, size, restart, 2511])
        desc = tuple(generate_random_map(size, p_frozen, rng))
        best = headroom(desc)
        for _ in range(climb_steps):
            if best >= threshold:
                break
            r, c = (int(x) for x in rng.integers(size, size=2))
            if (r, c) in ((0, 0), (size - 1, size - 1)):
                continue
            candidate = _flip(desc, r, c)
            if not reaches_goal(candidate):
                continue
            value = headroom(candidate)
            if value >= best:
                desc, best = candidate, value
        if best < threshold:
            yield None
            continue
        family = [desc] + [
            _flip(desc, r, c)
            for r in range(size)
            for c in range(size)
            if (r, c) not in ((0, 0), (size - 1, size - 1))
        ]
        for member in family:
            if member in seen or not reaches_goal(member):
                continue
            if member is desc or headroom(member) >= threshold:
                seen.add(member)
                yield member


# -- the shipped set ------------------------------------------------------------------------------
# Screening takes minutes (each map's headroom is an exact DP), so the default budget-sensitive set
# is generated once by `python -m arlkit.envs.frozenlake.sets` and shipped with the package; any
# other configuration is generated on the fly by the same code.

SHIPPED_PARAMS = {"size": 5, "success_rate": 0.8, "t_max": 32, "threshold": 0.10, "seed": 0, "p_frozen": 0.8}
SHIPPED_COUNTS = {"train": 600, "test": 300}
SHIPPED_FILE = "frozenlake_budget_sensitive.json"


def shipped_maps(params: dict, split: str, n: int) -> list[tuple[str, ...]] | None:
    """The first ``n`` shipped maps of ``split`` when ``params`` match the shipped set, else None."""
    if params != SHIPPED_PARAMS or n > SHIPPED_COUNTS.get(split, 0):
        return None
    from importlib import resources

    import json

    text = resources.files("arlkit.data").joinpath(SHIPPED_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    if data["params"] != SHIPPED_PARAMS:
        return None
    return [tuple(rows) for rows in data[split][:n]]
