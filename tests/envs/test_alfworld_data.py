"""The shipped ALFWorld games: what ``scripts/data/make_alfworld_games.py`` writes, solvable, and shortest.

Regenerating all of them takes the planner minutes, so the tests regenerate a seeded sample and check
the rest structurally: every walkthrough is as long as the exact breadth-first search's shortest
solution, and a seeded sample (one game per task type and split) is replayed in TextWorld."""

from __future__ import annotations

import dataclasses
import random
from importlib import resources

import pytest

pytest.importorskip("alfworld")

from arlkit.envs.alfworld.backend import Backend  # noqa: E402
from arlkit.envs.alfworld.games import (  # noqa: E402
    GAMES_FILE, TASK_TYPES, decode_shipped, encode_shipped, game_document, load_shipped,
)
from arlkit.envs.splits import split_of  # noqa: E402


@pytest.fixture(scope="module")
def script(data_script):  # type: ignore[no-untyped-def]
    return data_script("make_alfworld_games")


def test_the_file_is_what_the_script_writes_for_its_games(script) -> None:  # type: ignore[no-untyped-def]
    raw = (resources.files("arlkit") / "data" / "alfworld" / GAMES_FILE).read_bytes()
    shipped = decode_shipped(raw)
    assert shipped.params == script.PARAMS and shipped.tables == script.tables()
    assert encode_shipped(shipped.tables, shipped.params, shipped.splits) == raw


def test_both_splits_hold_every_task_type_and_are_disjoint(script) -> None:  # type: ignore[no-untyped-def]
    shipped = load_shipped()
    contents = {}
    for split, games in shipped.splits.items():
        counts = {t: sum(g.task_type == t for g in games) for t in TASK_TYPES}
        assert counts == dict.fromkeys(TASK_TYPES, script.PARAMS[f"{split}_per_type"])
        assert all(split_of(g.content()) == split for g in games)
        indices = [g.index for g in games]
        assert indices == sorted(set(indices)) and all(TASK_TYPES[g.index % 6] == g.task_type for g in games)
        contents[split] = {g.content() for g in games}
        assert len(contents[split]) == len(games)
    assert not contents["train"] & contents["test"]


def test_every_walkthrough_is_a_shortest_solution(script) -> None:  # type: ignore[no-untyped-def]
    shipped = load_shipped()
    for games in shipped.splits.values():
        for game in games:
            assert script.shortest_solution(game, shipped.tables) == len(game.walkthrough), game.index


def test_a_seeded_sample_regenerates_identically(script) -> None:  # type: ignore[no-untyped-def]
    shipped = load_shipped()
    rng = random.Random(19)
    sample = [rng.choice(shipped.splits["train"]), rng.choice(shipped.splits["test"]), rng.choice(shipped.splits["test"])]
    for game in sample:
        again = script.candidate(game.index, shipped.params["seed"], shipped.tables)
        assert again is not None and again.content() == game.content() and again.index == game.index
    replanned, reason = script.plan_and_check(dataclasses.replace(sample[0], walkthrough=()), shipped.tables, Backend())
    assert reason == "kept" and replanned is not None and replanned.walkthrough == sample[0].walkthrough


def test_a_sample_of_walkthroughs_wins_in_textworld_at_the_last_command() -> None:
    shipped = load_shipped()
    rng, backend = random.Random(7), Backend()
    for i, task_type in enumerate(TASK_TYPES):  # one game per task type, the splits taking turns
        games = shipped.splits[("train", "test")[i % 2]]
        game = rng.choice([g for g in games if g.task_type == task_type])
        view = backend.start(game.content(), game_document(game, shipped.tables))
        for command in game.walkthrough:
            assert not view.won and command in view.admissible, (game.index, command)
            view = backend.step(command)
        assert view.won, game.index
