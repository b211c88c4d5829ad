"""ALFWorld text games: arlkit's generated ones (shipped) and a user's real download.

A text game is what ALFWorld's ``alfworld-generate`` writes to ``game.tw-pddl``: ALFWorld's PDDL
domain (``alfred.pddl``), its text grammar (``alfred.twl2``) with the task description in place of
``UNKNOWN GOAL``, a PDDL problem, ``solvable`` and ``walkthrough`` (docs/environments.md#alfworld).

**Generated games** (``src/arlkit/data/alfworld/games.json.gz``, written by
``scripts/data/make_alfworld_games.py``) are stored as the world they describe: the floor plan's
receptacles (ALFWorld's ids from ``gen/layouts/``) with the spot the agent interacts with each one
from, the objects with the receptacle each lies in, the agent's start, the task (type, ALFWorld's
``pddl_params``, the description) and the planner's walkthrough. :func:`problem_pddl` writes the
PDDL problem from it with the file's tables (receptacle compatibilities and object properties of
ALFWorld's ``gen/constants.py``, goals of ``gen/goal_library.py``); domain and grammar come from
the installed ``alfworld`` wheel.

**A real download** (``$ALFWORLD_DATA/json_2.1.1``): :func:`collect_real_games` lists the games of
one split folder with ALFWorld's own ``AlfredTWEnv.collect_game_files`` (solvable games of the six
task types, no movable or sliced ones) and :func:`read_real_game` loads a ``game.tw-pddl`` as it is.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from arlkit.envs.alfworld.backend import modules

__all__ = [
    "GAMES_FILE",
    "TASK_TYPES",
    "GeneratedGame",
    "ShippedGames",
    "Tables",
    "collect_real_games",
    "game_document",
    "load_shipped",
    "pddl_name",
    "problem_pddl",
    "read_real_game",
    "type_of",
]

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
"""ALFWorld's six text task types, in its numbering (1-6)."""
GAMES_FILE = "games.json.gz"
_MANGLE = (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_"))


def pddl_name(alfred_id: str) -> str:
    """ALFWorld's PDDL spelling of an id (``Cabinet|+00.68|...`` -> ``Cabinet_bar__plus_00_dot_68...``),
    which ``AlfredDemangler`` turns back into ``cabinet 1``."""
    for old, new in _MANGLE:
        alfred_id = alfred_id.replace(old, new)
    return alfred_id


def type_of(alfred_id: str) -> str:
    """The object type of an ALFWorld id: its first part, or the last for sink and bathtub basins
    (``Sink|...|SinkBasin``)."""
    parts = alfred_id.split("|")
    return parts[-1] if len(parts) > 4 else parts[0]


@dataclass(frozen=True)
class Tables:
    """What ALFWorld's generator knows about types, as the shipped file records it.

    Attributes:
        can_contain: receptacle type -> object types it can hold (``VAL_RECEPTACLE_OBJECTS``).
        properties: ``cleanable``/``heatable``/``coolable``/``sliceable``/``toggleable`` -> object
            types (``VAL_ACTION_OBJECTS``); ``receptacle_object`` -> movable receptacles.
        openable: receptacle types that open and close (``OPENABLE_CLASS_LIST``).
        goals: task type -> its PDDL goal from the goal library (``{obj}``, ``{recep}``, ``{toggle}``
            to fill in; ``#`` already written ``-``; it ends with the parenthesis closing the problem).
    """

    can_contain: Mapping[str, tuple[str, ...]]
    properties: Mapping[str, tuple[str, ...]]
    openable: tuple[str, ...]
    goals: Mapping[str, str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tables:
        return cls(
            {k: tuple(v) for k, v in data["can_contain"].items()},
            {k: tuple(v) for k, v in data["properties"].items()},
            tuple(data["openable"]),
            dict(data["goals"]),
        )

    def to_json(self) -> dict[str, Any]:
        return {"can_contain": {k: list(v) for k, v in self.can_contain.items()},
                "properties": {k: list(v) for k, v in self.properties.items()},
                "openable": list(self.openable), "goals": dict(self.goals)}  # fmt: skip


@dataclass(frozen=True)
class GeneratedGame:
    """One generated game as its world (see the module docstring).

    Attributes:
        floor_plan: the ALFRED floor plan (``FloorPlan301``) whose receptacles it uses.
        task_type: one of :data:`TASK_TYPES`.
        pddl_params: ALFWorld's ``traj_data.json`` task parameters (``object_target``,
            ``parent_target``, ``toggle_target``, ``mrecep_target``, ``object_sliced``).
        task: the task description (a goal-library template filled in).
        agent: the agent's start, an ALFWorld location ``loc|x|z|rotation|horizon``.
        receptacles: ``(receptacle id, location)``, sorted.
        objects: ``(object id, receptacle id)``, sorted.
        walkthrough: the planner expert's commands from the start.
        index: the generator's candidate number (``scripts/data/make_alfworld_games.py``).
    """

    floor_plan: str
    task_type: str
    pddl_params: Mapping[str, Any]
    task: str
    agent: str
    receptacles: tuple[tuple[str, str], ...]
    objects: tuple[tuple[str, str], ...]
    walkthrough: tuple[str, ...] = ()
    index: int = -1

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GeneratedGame:
        return cls(
            str(data["floor_plan"]), str(data["task_type"]), dict(data["pddl_params"]), str(data["task"]),
            str(data["agent"]), tuple((str(r), str(loc)) for r, loc in data["receptacles"]),
            tuple((str(o), str(r)) for o, r in data["objects"]), tuple(str(c) for c in data.get("walkthrough", ())),
            int(data.get("index", -1)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "floor_plan": self.floor_plan, "task_type": self.task_type, "pddl_params": dict(self.pddl_params),
            "task": self.task, "agent": self.agent, "receptacles": [list(r) for r in self.receptacles],
            "objects": [list(o) for o in self.objects], "walkthrough": list(self.walkthrough), "index": self.index,
        }  # fmt: skip

    def content(self) -> str:
        """The canonical text of the world without walkthrough and index (ids and splits derive from it)."""
        data = self.to_json()
        del data["walkthrough"], data["index"]
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def problem_pddl(game: GeneratedGame, tables: Tables) -> str:
    """The PDDL problem of ``game`` in ALFWorld's vocabulary (``alfred.pddl``)."""
    receptacles = dict(game.receptacles)
    rtypes = sorted({type_of(r) for r in receptacles})
    otypes = sorted({type_of(o) for o, _ in game.objects})
    locations = sorted({*receptacles.values(), game.agent})
    declared = ["agent1 - agent", *(f"{t}Type - rtype" for t in rtypes), *(f"{t}Type - otype" for t in otypes)]
    declared += [f"{pddl_name(o)} - object" for o, _ in game.objects]
    declared += [f"{pddl_name(r)} - receptacle" for r in receptacles]
    declared += [f"{pddl_name(loc)} - location" for loc in locations]
    init = [f"(atLocation agent1 {pddl_name(game.agent)})"]
    for r, loc in game.receptacles:
        init.append(f"(receptacleType {pddl_name(r)} {type_of(r)}Type)")
        init.append(f"(receptacleAtLocation {pddl_name(r)} {pddl_name(loc)})")
        if type_of(r) in tables.openable:
            init.append(f"(openable {pddl_name(r)})")
    for o, r in game.objects:
        name, kind = pddl_name(o), type_of(o)
        init.append(f"(objectType {name} {kind}Type)")
        init.append(f"(inReceptacle {name} {pddl_name(r)})")
        init.append(f"(objectAtLocation {name} {pddl_name(receptacles[r])})")
        if kind not in tables.properties["toggleable"]:
            init.append(f"(pickupable {name})")
        for prop in ("cleanable", "heatable", "coolable", "sliceable", "toggleable"):
            if kind in tables.properties[prop]:
                init.append(f"({prop} {name})")
        if kind in tables.properties["receptacle_object"]:
            init.append(f"(isReceptacleObject {name})")
    for rt in rtypes:
        init += [f"(canContain {rt}Type {ot}Type)" for ot in otypes if ot in tables.can_contain.get(rt, ())]
    p = game.pddl_params
    goal = tables.goals[game.task_type].format(
        obj=p.get("object_target", ""), recep=p.get("parent_target", ""), toggle=p.get("toggle_target", ""),
        mrecep=p.get("mrecep_target", ""),
    )
    return "\n".join([
        f"(define (problem arlkit_{game.floor_plan.lower()})", "(:domain alfred)",
        "(:objects", *declared, ")", "(:init", *init, ")", goal.strip(), "",
    ])  # fmt: skip  (the goal library's goal also closes the ``define``)


@functools.lru_cache(maxsize=1)
def _logic() -> tuple[str, str]:
    info = modules()["info"]
    return Path(info.ALFRED_PDDL_PATH).read_text(encoding="utf-8"), Path(info.ALFRED_TWL2_PATH).read_text(encoding="utf-8")


def game_document(game: GeneratedGame, tables: Tables) -> dict[str, Any]:
    """The ``game.tw-pddl`` document of ``game`` as ``alfworld-generate`` writes one: the installed
    domain, the grammar with the task description, the problem, ``solvable`` and the walkthrough."""
    domain, grammar = _logic()
    return {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", game.task),
        "pddl_problem": problem_pddl(game, tables),
        "solvable": bool(game.walkthrough),
        "walkthrough": list(game.walkthrough),
    }


@dataclass(frozen=True)
class ShippedGames:
    """The shipped generated games: the tables, the generator's parameters and both splits."""

    tables: Tables
    params: Mapping[str, Any]
    splits: Mapping[str, tuple[GeneratedGame, ...]]


def decode_shipped(raw: bytes) -> ShippedGames:
    """Parse the bytes of a shipped games file."""
    data = json.loads(gzip.decompress(raw).decode("utf-8"))
    splits = {split: tuple(GeneratedGame.from_json(g) for g in data[split]) for split in ("train", "test")}
    return ShippedGames(Tables.from_json(data["tables"]), dict(data["params"]), splits)


def encode_shipped(tables: Tables, params: Mapping[str, Any], splits: Mapping[str, Sequence[GeneratedGame]]) -> bytes:
    """The bytes of a shipped games file (gzip without a timestamp: the same games, the same bytes)."""
    data = {"params": dict(params), "tables": tables.to_json(),
            **{split: [g.to_json() for g in splits[split]] for split in ("train", "test")}}  # fmt: skip
    text = json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n"
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


@functools.lru_cache(maxsize=1)
def load_shipped() -> ShippedGames:
    """The games shipped in ``arlkit/data/alfworld/`` (read once)."""
    return decode_shipped((resources.files("arlkit") / "data" / "alfworld" / GAMES_FILE).read_bytes())


def collect_real_games(folder: Path) -> list[Path]:
    """The ``game.tw-pddl`` files of one split folder (``json_2.1.1/valid_seen``) that ALFWorld's
    ``AlfredTWEnv`` plays, sorted by path (ALFWorld walks the folder in file-system order)."""
    tw_env = modules()["tw_env"]
    config = {
        "env": {"goal_desc_human_anns_prob": 0, "task_types": list(range(1, len(TASK_TYPES) + 1))},
        "dataset": {"data_path": str(folder), "num_train_games": -1},
    }
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        found = tw_env.AlfredTWEnv(config, train_eval="train").game_files
    return sorted(Path(f) for f in found)


def read_real_game(path: Path) -> dict[str, Any]:
    """A ``game.tw-pddl`` document, unchanged."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
