"""Where the budget-aware decisions are on a shipped FrozenLake set (docs/training.md, "Where BudgetMix's signal is").

For an episode of budget T played by the demo's cloned expert (the oracle planning for T_max at every step),
computed exactly from each map's MDP:

- signal: the expected sum over turns of P(alive in state s with r turns left) x gain(s, r), where gain(s, r)
  is the success probability within r of the best action minus that of the expert's action (both followed by
  optimal play, gamma 1);
- large: the same sum over the pairs with gain >= 0.1;
- visits: the expected number of visits to those pairs.

    .venv/bin/python scripts/budget_signal.py --set budget_fork --maps 200 --budgets 8,10,13,16,20,23,26,29,32
"""

from __future__ import annotations

import argparse

import numpy as np

from arlkit.envs.frozenlake.maps import lake_model
from arlkit.envs.frozenlake.sets import SHIPPED_SETS, shipped_maps


def episode_signal(desc: tuple[str, ...], budget: int, t_max: int, success_rate: float,
                   large: float = 0.1) -> tuple[float, float, float]:
    """``(signal, large part, visits to large pairs)`` of one map at ``budget`` (module docstring)."""
    model = lake_model(desc, True, success_rate)
    expert = model.planning_policy(t_max)[0]  # the same action distribution at every turn
    success = model.q_values(t_max, gamma=1.0)  # success within h, for every h <= t_max
    moves = (expert[:, :, None] * model.transitions).sum(axis=1)  # (S, S') under the expert
    alive = ~model.terminal
    where = np.zeros(len(expert))
    where[model.start] = 1.0
    signal = part = visits = 0.0
    for turn in range(budget):
        left = budget - turn
        gain = success[left].max(axis=1) - (expert * success[left]).sum(axis=1)
        where = where * alive
        signal += float(where @ gain)
        part += float(where @ (gain * (gain >= large)))
        visits += float(where @ (gain >= large))
        where = where @ moves
    return signal, part, visits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="task_set", choices=sorted(SHIPPED_SETS), default="budget_fork",
                        help="the shipped task set (default budget_fork, the demo's)")
    parser.add_argument("--maps", type=int, default=200, help="the first N shipped training maps (default 200)")
    parser.add_argument("--budgets", default="8,10,13,16,20,23,26,29,32", help="episode budgets, comma-separated")
    args = parser.parse_args()
    params = SHIPPED_SETS[args.task_set].params
    maps = shipped_maps(args.task_set, params, "train", args.maps)
    if maps is None:
        parser.error(f"--maps must be at most the shipped set's training maps, got {args.maps}")
    t_max, rate = params["t_max"], params["success_rate"]
    print("budget  signal  large part  visits to large pairs")
    for budget in (int(b) for b in args.budgets.split(",")):
        rows = np.array([episode_signal(desc, budget, t_max, rate) for desc in maps])
        print(f"{budget:6d}  {rows[:, 0].mean():.4f}  {rows[:, 1].mean():.4f}      {rows[:, 2].mean():.4f}")


if __name__ == "__main__":
    main()
