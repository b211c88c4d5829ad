"""Speed of the ``alfworld`` environment (ALFWorld's TextWorld engine under arlkit).

Reports, on this machine, over shipped test games:
- reset: a game not in memory (TextWorld's ``load`` then ``reset``: both translate the PDDL with
  fast-downward), and the same game again after some steps (``reset`` only);
- one step (an admissible command) and the planner expert from the start (fast-downward's search), as
  the oracle runs it (in a forked child bounded in time and memory, :mod:`arlkit.envs.alfworld.planner`)
  and as TextWorld's ``replan`` runs it (in this process, unbounded), from the same state;
- steps/s and resets/s through the rollout engine with the ``random`` policy (uniform over the
  admissible commands, T = 50) and with the ``oracle`` (the walkthrough; the episode ends at the win).

Run: .venv/bin/python benchmarks/bench_alfworld.py
"""

from __future__ import annotations

import dataclasses
import statistics
import time

from arlkit.envs import make
from arlkit.envs.alfworld.backend import Backend
from arlkit.envs.alfworld.games import game_document, load_shipped
from arlkit.policies import make_policy
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts

N_GAMES = 20


def direct() -> dict[str, list[float]]:
    shipped = load_shipped()
    times: dict[str, list[float]] = {"load + reset": [], "reset again": [], "step": [], "planner from the start": [],
                                     "planner, in-process": []}  # fmt: skip
    backend = Backend()
    for game in shipped.splits["test"][:N_GAMES]:
        document = game_document(dataclasses.replace(game, walkthrough=()), shipped.tables)
        start = time.perf_counter()
        backend.start(game.content(), document)
        times["load + reset"].append(time.perf_counter() - start)
        start = time.perf_counter()
        backend.plan()
        times["planner from the start"].append(time.perf_counter() - start)
        pddl = backend.env.unwrapped
        start = time.perf_counter()
        backend._locked(pddl._pddl_state.replan, pddl._entity_infos)
        times["planner, in-process"].append(time.perf_counter() - start)
        for command in game.walkthrough:
            start = time.perf_counter()
            backend.step(command)
            times["step"].append(time.perf_counter() - start)
        start = time.perf_counter()
        backend.start(game.content(), document)
        times["reset again"].append(time.perf_counter() - start)
    return times


def engine(policy: str, samples: int) -> tuple[float, float, float]:
    """(steps/s, trajectories/s, success rate) through the engine."""
    tasks = make("alfworld").tasks("test", N_GAMES)
    start = time.perf_counter()
    played = run_rollouts(lambda: make("alfworld"), make_jobs(tasks, samples, 50, 0), make_policy(policy),
                          PromptConfig(history=2))  # fmt: skip
    wall = time.perf_counter() - start
    steps = sum(len(t.turns) for t in played)
    return steps / wall, len(played) / wall, sum(t.success for t in played) / len(played)


def main() -> None:
    for name, values in direct().items():
        print(f"{name:<24} mean {1000 * statistics.mean(values):7.0f} ms   median {1000 * statistics.median(values):7.0f} ms"
              f"   max {1000 * max(values):7.0f} ms   (n={len(values)})")  # fmt: skip
    for policy, samples in (("random", 2), ("oracle", 2)):
        rate, resets, success = engine(policy, samples)
        print(f"engine + {policy:<7} ({N_GAMES} games x {samples}, T=50): {rate:6.1f} steps/s, {resets:5.2f} trajectories/s, "
              f"success {success:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
