"""The FrozenLake environment: text maps (RAGEN's symbols) over the exact model of
:mod:`arlkit.envs.frozenlake.maps`, random or budget-sensitive task sets, and the optional
oracle capabilities."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any, Literal

import numpy as np

from arlkit.envs.frozenlake.sets import GENERATORS, shipped_maps
from arlkit.envs.frozenlake.maps import ACTIONS, LakeModel, generate_random_map, lake_model, random_start
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.splits import collect_split, content_id
from arlkit.envs.parsing import parse_tagged_action, quote

__all__ = ["FrozenLakeConfig", "FrozenLakeEnv"]


@dataclass(frozen=True)
class FrozenLakeConfig:
    """Configuration of the FrozenLake family.

    Attributes:
        size: the map is ``size`` x ``size`` cells.
        p_frozen: probability that a cell of a random map is frozen (Gymnasium's ``p``).
        slippery: whether moves can slip sideways.
        success_rate: probability of moving in the intended direction on slippery ice
            (Gymnasium's default 1/3).
        t_max: the family's full turn budget T_max (RT uses 70).
        seed: seed of the task stream (which maps exist); the split of a map depends only on its
            content.
        task_set: ``random`` (Gymnasium's random maps), ``budget_sensitive`` (slippery maps whose
            budget headroom at 25% of T_max is at least ``headroom_threshold``) or ``budget_fork``
            (slippery maps, the start anywhere, whose budget-aware first move at 25% of T_max gains
            at least ``headroom_threshold`` success over the full-budget oracle's); see
            :mod:`arlkit.envs.frozenlake.sets`.
        headroom_threshold: the least headroom of a ``budget_sensitive`` map, or the least first-move
            gain of a ``budget_fork`` map (its shipped set uses 0.2).
        start: ``corner`` (the map's own start: Gymnasium's top-left cell, anywhere on ``budget_fork``
            maps) or ``random`` (each task starts on
            a frozen cell drawn from the map's content and ``seed``, from which the goal is
            reachable: varied distances to the goal, e.g. for training; the maps themselves are
            those of ``task_set``, whose screening assumed the corner start).
    """

    size: int = 4
    p_frozen: float = 0.8
    slippery: bool = True
    success_rate: float = 1.0 / 3.0
    t_max: int = 70
    seed: int = 0
    task_set: Literal["random", "budget_sensitive", "budget_fork"] = "random"
    headroom_threshold: float = 0.10
    start: Literal["corner", "random"] = "corner"

    def __post_init__(self) -> None:
        if not 2 <= self.size <= 32:
            raise ValueError(f"size must be between 2 and 32, got {self.size}")
        if not 0.0 < self.p_frozen <= 1.0:
            raise ValueError(f"p_frozen must be in (0, 1], got {self.p_frozen}")
        if not 0.0 <= self.success_rate <= 1.0:
            raise ValueError(f"success_rate must be in [0, 1], got {self.success_rate}")
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")
        if self.task_set not in ("random", *GENERATORS):
            raise ValueError(f"task_set must be one of random, {', '.join(GENERATORS)}; got {self.task_set!r}")
        if self.task_set != "random" and not self.slippery:
            raise ValueError(f"task_set={self.task_set} needs slippery=true (deterministic maps have no headroom)")
        if self.start not in ("corner", "random"):
            raise ValueError(f"start must be corner or random, got {self.start!r}")


class FrozenLakeEnv:
    """Text FrozenLake: symbols ``P`` player, ``_`` frozen, ``O`` hole, ``G`` goal."""

    name = "frozenlake"

    def __init__(self, config: FrozenLakeConfig, *, use_shipped: bool = True) -> None:
        self.config = config
        self._use_shipped = use_shipped
        self.t_max = config.t_max
        self._model: LakeModel | None = None
        self._task: Task | None = None
        self._pos = 0
        self._done = False
        self._rng = np.random.default_rng(0)

    # -- tasks ---------------------------------------------------------------------------------
    def _map_stream(self) -> Iterator[tuple[str, ...] | None]:
        if self.config.task_set != "random":
            yield from GENERATORS[self.config.task_set](
                self.config.size,
                self.config.success_rate,
                self.config.t_max,
                threshold=self.config.headroom_threshold,
                seed=self.config.seed,
                p_frozen=self.config.p_frozen,
            )
            return
        for i in count():
            rng = np.random.default_rng([self.config.seed, self.config.size, i])
            yield tuple(generate_random_map(self.config.size, self.config.p_frozen, rng))

    def tasks(self, split: str, n: int) -> list[Task]:
        return [self.task_from_map(self._place_start(desc)) for desc in self._maps(split, n)]

    def _maps(self, split: str, n: int) -> list[tuple[str, ...]]:
        screened = self.config.task_set != "random"
        if screened and self._use_shipped:
            shipped = shipped_maps(self.config.task_set, self._set_params(), split, n)
            if shipped is not None:
                return shipped
        max_draws = 20 * n + 200 if screened else 50 * n + 5_000
        return collect_split(self._map_stream(), "\n".join, split, n, max_draws=max_draws)

    def _place_start(self, desc: tuple[str, ...]) -> tuple[str, ...]:
        if self.config.start == "corner":
            return desc
        return random_start(desc, np.random.default_rng([self.config.seed, int(content_id("\n".join(desc)), 16), 7]))

    def _set_params(self) -> dict:
        c = self.config
        return {
            "size": c.size, "success_rate": c.success_rate, "t_max": c.t_max, "threshold": c.headroom_threshold,
            "seed": c.seed, "p_frozen": c.p_frozen,
        }  # fmt: skip

    @staticmethod
    def task_from_map(desc: Sequence[str]) -> Task:
        """A task for a hand-made map given in Gymnasium letters (S, F, H, G)."""
        rows = [str(row) for row in desc]
        if not rows or any(len(row) != len(rows[0]) for row in rows):
            raise ValueError("a FrozenLake map must be a non-empty rectangle of rows")
        flat = "".join(rows)
        if set(flat) - set("SFHG") or flat.count("S") != 1 or flat.count("G") != 1:
            raise ValueError("a FrozenLake map uses S, F, H, G with exactly one S and one G")
        return Task(task_id="fl-" + content_id("\n".join(rows)), payload={"desc": rows})

    # -- episode -------------------------------------------------------------------------------
    @property
    def model(self) -> LakeModel:
        """The exact model of the current task's map."""
        if self._model is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._model

    def reset(self, task: Task, seed: int) -> str:
        desc = tuple(task.payload["desc"])
        self._model = lake_model(desc, self.config.slippery, self.config.success_rate)
        self._task = task
        self._pos = self._model.start
        self._done = False
        self._rng = np.random.default_rng(seed)
        return self.render()

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_tagged_action(reply)

    def step(self, action: str) -> StepResult:
        model = self.model
        index = _action_index(action)
        if self._done:
            return StepResult("The episode is over.\n" + self.render(), 0.0, True, False, False)
        if index is None:
            message = f"Invalid action {quote(action)}: write exactly one of {', '.join(ACTIONS)}."
            return StepResult(f"{message} You did not move.\n{self.render()}", 0.0, False, False, False)
        probs = model.transitions[self._pos, index]
        self._pos = int(min(np.searchsorted(np.cumsum(probs), self._rng.random(), side="right"), len(probs) - 1))
        success = bool(model.goal_reward[self._pos] > 0)
        self._done = bool(model.terminal[self._pos])
        if success:
            note = "You reached the goal."
        elif self._done:
            note = "You fell into a hole."
        else:
            note = f"You chose {ACTIONS[index]}."
        return StepResult(f"{note}\n{self.render()}", 1.0 if success else 0.0, self._done, success, True)

    def render(self) -> str:
        model = self.model
        rows = []
        for r, row in enumerate(model.desc):
            cells = []
            for c, ch in enumerate(row):
                if r * model.ncol + c == self._pos:
                    cells.append("P")
                else:
                    cells.append({"H": "O", "G": "G"}.get(ch, "_"))
            rows.append("".join(cells))
        return "\n".join(rows)

    def prompt_text(self) -> PromptText:
        """The instruction (rules, legend, goal) and the action format of the prompt."""
        instruction = (
            "You walk on a frozen lake drawn as a grid, one row per line. Symbols: P is you, _ is "
            "safe ice, O is a hole (falling in ends the episode with no reward), G is the goal. "
            "Reach G to succeed. A move into the border leaves you where you are."
        )
        if self.config.slippery:
            p = self.config.success_rate
            instruction += (
                f" The ice is slippery: you move in the chosen direction with probability {p:.2f}, "
                "otherwise sideways (perpendicular to it)."
            )
        action_format = "The action is one of Left, Down, Right, Up, for example <action>Left</action>."
        return PromptText(instruction, action_format)

    def admissible_actions(self) -> Sequence[str]:
        return ACTIONS

    def state_key(self) -> str:
        task_id = self._task.task_id if self._task else "-"
        return f"{task_id}@{self._pos}"

    def snapshot(self) -> dict[str, Any]:
        return {
            "task": self._task,
            "pos": self._pos,
            "done": self._done,
            "rng": self._rng.bit_generator.state,
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        task = snapshot["task"]
        self._task = task
        self._model = lake_model(tuple(task.payload["desc"]), self.config.slippery, self.config.success_rate)
        self._pos = int(snapshot["pos"])
        self._done = bool(snapshot["done"])
        self._rng = np.random.default_rng()
        self._rng.bit_generator.state = snapshot["rng"]

    # -- oracle --------------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """The player's cell index (row * size + column)."""
        return self._pos

    def action_values(self, remaining: int) -> dict[str, float]:
        q = self.model.q_values(max(remaining, 0))[max(remaining, 0), self._pos]
        return {name: float(q[i]) for i, name in enumerate(ACTIONS)}

    def optimal_actions(self, remaining: int) -> list[str]:
        values = self.action_values(remaining)
        best = max(values.values())
        return [a for a, v in values.items() if v >= best - 1e-12]

    def shortest_solution_length(self) -> int | None:
        d = int(self.model.distance[self._pos])
        return None if d < 0 else d

    def success_probability(self, remaining: int) -> float:
        return self.model.success_probability(self._pos, remaining)

    def headroom(self, budget: int) -> float:
        """Budget headroom of the current task at ``budget`` (docs/metrics.md#budget-headroom): the budget-aware optimum's
        success probability from the start minus that of the policy optimal for T_max."""
        return self.model.headroom(budget, self.t_max)


def _action_index(action: str) -> int | None:
    cleaned = action.strip().strip(".").lower()
    for i, name in enumerate(ACTIONS):
        if cleaned == name.lower():
            return i
    return None


@register_env("frozenlake", FrozenLakeConfig)
def _make_frozenlake(config: FrozenLakeConfig) -> FrozenLakeEnv:
    return FrozenLakeEnv(config)
