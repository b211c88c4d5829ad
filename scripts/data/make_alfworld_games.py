"""Regenerate ``src/arlkit/data/alfworld/games.json.gz``, the shipped ALFWorld games
(:mod:`arlkit.envs.alfworld.games`): ``.venv/bin/python scripts/data/make_alfworld_games.py``
(the ``alfworld`` extra; about 4 s per game on one core).

Everything comes from the installed ``alfworld`` wheel (docs/environments.md#alfworld):

- **receptacles**: a floor plan's ``gen/layouts/FloorPlanN-openable.json``: ALFWorld's receptacle ids
  and the pose the agent interacts with each from, written as ALFWorld's locations
  ``loc|x/0.25|z/0.25|rotation/90|horizon``; the agent starts at a point of ``FloorPlanN-layout.npy``
  where no receptacle is;
- **objects**: types of the floor plan's ``FloorPlanN-objects.json`` that some of its receptacles can hold
  (``gen/constants.py``: ``VAL_RECEPTACLE_OBJECTS``; sliced variants left out as in ALFWorld's text
  games), the target plus up to :data:`OTHER_TYPES` more, 1-2 of each (the target 1-3, 2-3 for
  ``pick_two_obj_and_place``), each in a receptacle that can hold it (target objects never start
  where the goal wants them); a ``DeskLamp`` for ``look_at_obj_in_light`` stands on a desk, side table or
  dresser (the tables have no entry for lamps: arlkit's choice);
- **the task**: a goal of ``gen/goal_library.py`` for the task type, in a room type ALFWorld allows for it
  (``GOALS_VALID``), with objects that have the needed property (``VAL_ACTION_OBJECTS``); its description
  is one of the goal's templates.

Candidate ``i`` is seeded by ``(seed, i)`` and has task type ``TASK_TYPES[i % 6]``; its split is a hash of
its content (:func:`arlkit.envs.splits.split_of`). A candidate is kept when its split still needs games
of its type, the planner expert (fast-downward through TextWorld) finds a plan from the start, replaying
that plan in TextWorld wins at its last command and not before, and an exact breadth-first search over
the game (:func:`shortest_solution`) finds no shorter solution: every shipped walkthrough is a shortest
one. The file's bytes depend only on the parameters.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import time
from collections import Counter, deque
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np

from arlkit.envs.alfworld.backend import Backend, modules
from arlkit.envs.alfworld.games import (
    GAMES_FILE, TASK_TYPES, GeneratedGame, Tables, encode_shipped, game_document, type_of,
)  # fmt: skip
from arlkit.envs.splits import split_of

PARAMS = {"seed": 0, "train_per_type": 30, "test_per_type": 20}
OTHER_TYPES = 9
LAMP_HOLDERS = ("Desk", "SideTable", "Dresser")
_APPLIANCE = {"pick_clean_then_place_in_recep": ("SinkBasin", "cleanable"),
              "pick_heat_then_place_in_recep": ("Microwave", "heatable"),
              "pick_cool_then_place_in_recep": ("Fridge", "coolable")}  # fmt: skip
OUT = Path(__file__).resolve().parents[2] / "src" / "arlkit" / "data" / "alfworld" / GAMES_FILE


def alfworld_assets() -> tuple[Any, Any, Path]:
    """ALFWorld's ``gen/constants.py``, ``gen/goal_library.py`` and ``gen/layouts/`` folder."""
    modules()  # sets $ALFWORLD_DATA before alfworld is imported
    import alfworld.gen.constants as constants
    import alfworld.gen.goal_library as goal_library

    return constants, goal_library, Path(constants.__file__).parent / "layouts"


def tables() -> Tables:
    """The shipped file's tables, from ALFWorld's constants and goal library."""
    constants, goal_library, _ = alfworld_assets()
    actions = constants.VAL_ACTION_OBJECTS
    properties = {name.lower(): tuple(sorted(actions[name])) for name in ("Cleanable", "Heatable", "Coolable", "Sliceable", "Toggleable")}
    properties["receptacle_object"] = tuple(sorted(constants.MOVABLE_RECEPTACLES))
    goals = {t: goal_library.gdict[t]["pddl"].replace("#", "-") for t in TASK_TYPES}
    can_contain = {r: tuple(sorted(objs)) for r, objs in sorted(constants.VAL_RECEPTACLE_OBJECTS.items())}
    return Tables(can_contain, properties, tuple(sorted(constants.OPENABLE_CLASS_LIST)), goals)


def _location(x: float, z: float, rotation: float, horizon: float) -> str:
    return f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{int(rotation) // 90 % 4}|{int(horizon)}"


def _scene_type(constants: Any, plan: str) -> str:
    number = int(plan.removeprefix("FloorPlan"))
    return next(kind for kind, numbers in constants.SCENE_TYPE.items() if number in numbers)


def build_game(task_type: str, plan: str, rng: random.Random, t: Tables) -> GeneratedGame | None:
    """One candidate world on floor plan ``plan``, or ``None`` when the plan cannot host the task."""
    constants, goal_library, layouts = alfworld_assets()
    poses = json.loads((layouts / f"{plan}-openable.json").read_text())
    present = set(json.loads((layouts / f"{plan}-objects.json").read_text()))
    receptacles = sorted((r, _location(*pose)) for r, pose in poses.items())
    rtypes = {type_of(r) for r, _ in receptacles}
    holders = {k: [r for r, _ in receptacles if k in t.can_contain.get(type_of(r), ())]
               for k in set().union(*t.can_contain.values())}  # fmt: skip
    movable = sorted(k for k in present if holders.get(k) and "Sliced" not in k)
    appliance, prop = _APPLIANCE.get(task_type, (None, None))
    if appliance is not None and appliance not in rtypes:
        return None
    targets = [k for k in movable if prop is None or k in t.properties[prop]]
    toggle = ""
    if task_type == "look_at_obj_in_light":
        lamp_spots = [r for r, _ in receptacles if type_of(r) in LAMP_HOLDERS]
        if "DeskLamp" not in present or not lamp_spots:
            return None
        toggle = "DeskLamp"
    if not targets:
        return None
    target = rng.choice(targets)
    parent = ""
    if toggle == "":
        parents = sorted(k for k in rtypes if target in t.can_contain.get(k, ()) and k != appliance)
        if not parents:
            return None
        parent = rng.choice(parents)
    others = [k for k in movable if k != target]
    rng.shuffle(others)
    objects: dict[str, str] = {}

    def place(kind: str, spots: list[str]) -> None:
        spot = rng.choice(spots)
        x, y, z = (float(v) for v in spot.split("|")[1:4])
        while True:
            oid = f"{kind}|{x + rng.uniform(-0.3, 0.3):+06.2f}|{y + rng.uniform(0.0, 0.2):+06.2f}|{z + rng.uniform(-0.3, 0.3):+06.2f}"
            if oid not in objects:
                objects[oid] = spot
                return

    banned = {parent, "Fridge" if task_type == "pick_cool_then_place_in_recep" else ""}
    target_spots = [r for r in holders[target] if type_of(r) not in banned]
    if not target_spots:
        return None
    for _ in range(rng.randint(2 if task_type == "pick_two_obj_and_place" else 1, 3)):
        place(target, target_spots)
    for kind in sorted(others[:OTHER_TYPES]):
        for _ in range(rng.randint(1, 2)):
            place(kind, holders[kind])
    if toggle:
        place(toggle, lamp_spots)
    taken = {loc for _, loc in receptacles}
    points = np.load(layouts / f"{plan}-layout.npy")
    for _ in range(100):
        x, z = points[rng.randrange(len(points))]
        agent = _location(float(x), float(z), 90 * rng.randrange(4), 30)
        if agent not in taken:
            break
    else:
        return None
    template = rng.choice(goal_library.gdict[task_type]["templates"])
    task = template.format(obj=target.lower(), recep=parent.lower(), toggle=toggle.lower(), mrecep="")
    params = {"object_target": target, "parent_target": parent, "toggle_target": toggle, "mrecep_target": "",
              "object_sliced": False}  # fmt: skip
    return GeneratedGame(plan, task_type, params, task, agent, tuple(receptacles), tuple(sorted(objects.items())))


def candidate(index: int, seed: int, t: Tables) -> GeneratedGame | None:
    """Candidate ``index`` of the stream (``None`` when 20 floor plans in a row could not host it)."""
    constants, _, layouts = alfworld_assets()
    task_type = TASK_TYPES[index % len(TASK_TYPES)]
    rng = random.Random(f"arlkit-alfworld:{seed}:{index}")
    plans = sorted(p.name.removesuffix("-openable.json") for p in layouts.glob("FloorPlan*-openable.json"))
    allowed = [p for p in plans if _scene_type(constants, p) in constants.GOALS_VALID[task_type]]
    for _ in range(20):
        game = build_game(task_type, rng.choice(allowed), rng, t)
        if game is not None:
            return dataclasses.replace(game, index=index)
    return None


def shortest_solution(game: GeneratedGame, t: Tables) -> int | None:
    """The fewest commands that win ``game``, by breadth-first search over ALFWorld's rules
    (``alfred.pddl``) restricted to what can matter: the target objects, the lamp, and the places
    they are in or must go to. Going elsewhere, opening other receptacles or holding other objects
    never shortens a solution, so the restriction keeps the search exact."""
    where = dict(game.receptacles)
    p = game.pddl_params
    appliance, _ = _APPLIANCE.get(game.task_type, (None, None))
    targets = [o for o, _ in game.objects if type_of(o) == p["object_target"]]
    lamps = {o: r for o, r in game.objects if p["toggle_target"] and type_of(o) == p["toggle_target"]}
    useful = {r for o, r in game.objects if o in targets} | set(lamps.values())
    useful |= {r for r in where if type_of(r) in (p["parent_target"], appliance)}
    places = sorted({where[r] for r in useful})

    def accessible(r: str, opened: frozenset[str]) -> bool:
        return type_of(r) not in t.openable or r in opened

    def won(loc: str, held: int, inside: tuple[str, ...], flags: frozenset[int], lit: frozenset[str]) -> bool:
        if game.task_type == "look_at_obj_in_light":
            return held >= 0 and any(where[lamps[lamp]] == loc for lamp in lit)
        goal = [i for i, r in enumerate(inside) if r and type_of(r) == p["parent_target"] and (appliance is None or i in flags)]
        if game.task_type == "pick_two_obj_and_place":
            return len(goal) != len({inside[i] for i in goal})
        return bool(goal)

    start = (game.agent, -1, tuple(r for o, r in game.objects if o in targets), frozenset(), frozenset(), frozenset())
    depth = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        loc, held, inside, opened, flags, lit = state
        if won(loc, held, inside, flags, lit):
            return depth[state]
        here = [r for r in useful if where[r] == loc]
        nexts = [(place, held, inside, opened, flags, lit) for place in places if place != loc]
        nexts += [(loc, held, inside, opened | {r}, flags, lit) for r in here if type_of(r) in t.openable and r not in opened]
        nexts += [(loc, held, inside, opened, flags, lit | {lamp}) for lamp, r in lamps.items() if r in here]
        if held < 0:
            for i, r in enumerate(inside):
                if r in here and accessible(r, opened):
                    nexts.append((loc, i, inside[:i] + ("",) + inside[i + 1:], opened, flags, lit))
        else:
            for r in here:
                if accessible(r, opened) and p["object_target"] in t.can_contain.get(type_of(r), ()):
                    nexts.append((loc, -1, inside[:held] + (r,) + inside[held + 1:], opened, flags, lit))
            if any(type_of(r) == appliance for r in here):
                nexts.append((loc, held, inside, opened, flags | {held}, lit))
        for nxt in nexts:
            if nxt not in depth:
                depth[nxt] = depth[state] + 1
                queue.append(nxt)
    return None


def plan_and_check(game: GeneratedGame, t: Tables, backend: Backend) -> tuple[GeneratedGame | None, str]:
    """``(game with its walkthrough, "kept")``, or ``(None, why it was dropped)``."""
    document = game_document(game, t)
    key = game.content()
    if backend.start(key, document).won:
        return None, "won at the start"
    plan = backend.plan()
    if not plan:
        return None, "no plan"
    view = backend.start(key, document)
    for command in plan:
        if command not in view.admissible or view.won:
            return None, "plan does not replay"
        view = backend.step(command)
    if not view.won:
        return None, "plan does not win"
    shortest = shortest_solution(game, t)
    if shortest != len(plan):
        return None, "plan longer than the shortest" if shortest is not None and shortest < len(plan) else "search disagrees"
    return dataclasses.replace(game, walkthrough=tuple(plan)), "kept"


def generate(params: dict[str, int], t: Tables, log: bool = False) -> Iterator[tuple[str, GeneratedGame]]:
    """``(split, game)`` for every kept candidate, in stream order, until both splits are full."""
    need = {(s, k): params[f"{s}_per_type"] for s in ("train", "test") for k in TASK_TYPES}
    backend, reasons = Backend(), Counter[str]()
    for index in count():
        if not any(need.values()):
            break
        game = candidate(index, params["seed"], t)
        if game is None:
            reasons["no floor plan"] += 1
            continue
        split = split_of(game.content())
        if need[(split, game.task_type)] == 0:
            continue
        started = time.perf_counter()
        kept, reason = plan_and_check(game, t, backend)
        reasons[reason] += 1
        if log:
            print(f"{index:4d} {split:5s} {game.task_type:32s} {reason} ({time.perf_counter() - started:.1f} s)", flush=True)
        if kept is not None:
            need[(split, game.task_type)] -= 1
            yield split, kept
    if log:
        print(dict(reasons))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    t = tables()
    splits: dict[str, list[GeneratedGame]] = {"train": [], "test": []}
    started = time.perf_counter()
    for split, game in generate(PARAMS, t, log=True):
        splits[split].append(game)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(encode_shipped(t, PARAMS, splits))
    n = sum(map(len, splits.values()))
    print(f"wrote {args.out}: {n} games, {args.out.stat().st_size} bytes, {(time.perf_counter() - started) / n:.1f} s per game")


if __name__ == "__main__":
    main()
