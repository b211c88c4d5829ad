"""Regenerate the shipped screened FrozenLake sets (:mod:`arlkit.envs.frozenlake.sets`),
``src/arlkit/data/frozenlake_budget_sensitive.json`` and ``frozenlake_budget_fork.json``:
``.venv/bin/python scripts/data/make_frozenlake_sets.py [budget_sensitive|budget_fork ...]`` (default: both).
The searches are seeded, so the files it writes are the ones in the repository."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from arlkit.envs.frozenlake.env import FrozenLakeConfig, FrozenLakeEnv
from arlkit.envs.frozenlake.sets import SHIPPED_SETS


def write_set(task_set: str) -> Path:
    """Generate ``task_set`` from its shipped parameters and write its data file."""
    shipped = SHIPPED_SETS[task_set]
    p = shipped.params
    config = FrozenLakeConfig(
        size=int(p["size"]), success_rate=float(p["success_rate"]), t_max=int(p["t_max"]), seed=int(p["seed"]),
        p_frozen=float(p["p_frozen"]), headroom_threshold=float(p["threshold"]), task_set=task_set,
    )  # fmt: skip
    env = FrozenLakeEnv(config, use_shipped=False)
    data = {"params": shipped.params}
    for split, n in shipped.counts.items():
        data[split] = [list(task.payload["desc"]) for task in env.tasks(split, n)]
    path = Path(__file__).resolve().parents[2] / "src" / "arlkit" / "data" / shipped.file
    path.write_text(json.dumps(data, indent=0) + "\n", encoding="utf-8")
    return path


def main() -> None:
    names = sys.argv[1:] or list(SHIPPED_SETS)
    unknown = [name for name in names if name not in SHIPPED_SETS]
    if unknown:
        sys.exit(f"unknown set {unknown[0]!r}; valid choices: {', '.join(SHIPPED_SETS)}")
    for name in names:
        print(f"wrote {write_set(name)}")


if __name__ == "__main__":
    main()
