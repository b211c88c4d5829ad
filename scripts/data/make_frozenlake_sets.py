"""Regenerate ``src/arlkit/data/frozenlake_budget_sensitive.json``, the shipped budget-sensitive
FrozenLake maps (:mod:`arlkit.envs.frozenlake.sets`): ``.venv/bin/python scripts/data/make_frozenlake_sets.py``.
The search is seeded, so the file it writes is the one in the repository."""

from __future__ import annotations

import json
from pathlib import Path

from arlkit.envs.frozenlake.env import FrozenLakeConfig, FrozenLakeEnv
from arlkit.envs.frozenlake.sets import SHIPPED_FILE, SHIPPED_COUNTS, SHIPPED_PARAMS


def main() -> None:
    p = SHIPPED_PARAMS
    config = FrozenLakeConfig(
        size=int(p["size"]), success_rate=float(p["success_rate"]), t_max=int(p["t_max"]), seed=int(p["seed"]),
        p_frozen=float(p["p_frozen"]), headroom_threshold=float(p["threshold"]), task_set="budget_sensitive",
    )  # fmt: skip
    env = FrozenLakeEnv(config, use_shipped=False)
    data = {"params": SHIPPED_PARAMS}
    for split, n in SHIPPED_COUNTS.items():
        data[split] = [list(task.payload["desc"]) for task in env.tasks(split, n)]
    path = Path(__file__).resolve().parents[2] / "src" / "arlkit" / "data" / SHIPPED_FILE
    path.write_text(json.dumps(data, indent=0) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
