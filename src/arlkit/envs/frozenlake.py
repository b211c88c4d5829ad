"""FrozenLake with Gymnasium's rules, RAGEN's text symbols and an exact finite-horizon oracle.

Rules (Gymnasium ``FrozenLake-v1``): actions Left/Down/Right/Up (0..3); a move that would leave the
grid leaves the position unchanged; reaching ``G`` gives reward 1 and ends the episode, falling into
a hole ends it with reward 0. On slippery ice the intended direction is taken with probability
``success_rate`` and each perpendicular direction with ``(1 - success_rate) / 2``.

Oracle (SPEC §7.1): with the transition table P, ``V_0 = 0``,
``Q_h(s, a) = sum_s' P(s'|s, a) * (r(s') + gamma * (1 - terminal(s')) * V_{h-1}(s'))`` and
``V_h = max_a Q_h``, gamma = 0.95, computed for every state, action and horizon at once. With
gamma = 1 the same recursion gives the best probability of success within h turns.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any

import numpy as np

from arlkit.envs.protocol import ParsedAction, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.splits import collect_split, content_id
from arlkit.rollout.parsing import parse_tagged_action, quote

__all__ = ["ACTIONS", "FrozenLakeConfig", "FrozenLakeEnv", "LakeModel", "generate_random_map", "lake_model"]

ACTIONS = ("Left", "Down", "Right", "Up")
_MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))
GAMMA = 0.95


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
    """

    size: int = 4
    p_frozen: float = 0.8
    slippery: bool = True
    success_rate: float = 1.0 / 3.0
    t_max: int = 70
    seed: int = 0

    def __post_init__(self) -> None:
        if not 2 <= self.size <= 32:
            raise ValueError(f"size must be between 2 and 32, got {self.size}")
        if not 0.0 < self.p_frozen <= 1.0:
            raise ValueError(f"p_frozen must be in (0, 1], got {self.p_frozen}")
        if not 0.0 <= self.success_rate <= 1.0:
            raise ValueError(f"success_rate must be in [0, 1], got {self.success_rate}")
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")


def _reaches_goal(board: Sequence[str]) -> bool:
    """Depth-first search from the top-left cell over non-hole cells to the goal."""
    size = len(board)
    frontier, seen = [(0, 0)], {(0, 0)}
    while frontier:
        r, c = frontier.pop()
        for dr, dc in _MOVES:
            nr, nc = r + dr, c + dc
            if 0 <= nr < size and 0 <= nc < size and (nr, nc) not in seen:
                if board[nr][nc] == "G":
                    return True
                if board[nr][nc] != "H":
                    seen.add((nr, nc))
                    frontier.append((nr, nc))
    return False


def generate_random_map(size: int, p_frozen: float, rng: np.random.Generator) -> list[str]:
    """Gymnasium's random-map algorithm: S top-left, G bottom-right, every other cell frozen with
    probability ``p_frozen``, redrawn until the goal is reachable."""
    while True:
        cells = rng.choice(np.array(["F", "H"]), (size, size), p=[p_frozen, 1.0 - p_frozen])
        cells[0][0], cells[-1][-1] = "S", "G"
        board = ["".join(row) for row in cells]
        if _reaches_goal(board):
            return board


class LakeModel:
    """The exact MDP of one map: transition table, distances and the finite-horizon DP.

    Attributes:
        desc: the map rows in Gymnasium letters (S, F, H, G).
        transitions: array (S, 4, S) of next-state probabilities.
        terminal: bool array (S,) of holes and the goal.
        goal_reward: float array (S,), 1 at the goal.
        distance: int array (S,) of the fewest moves to the goal (-1 when unreachable).
    """

    def __init__(self, desc: tuple[str, ...], slippery: bool, success_rate: float) -> None:
        self.desc = desc
        self.nrow, self.ncol = len(desc), len(desc[0])
        n = self.nrow * self.ncol
        flat = "".join(desc)
        self.terminal = np.array([ch in "GH" for ch in flat])
        self.goal_reward = np.array([1.0 if ch == "G" else 0.0 for ch in flat])
        self.start = flat.index("S")
        self.transitions = np.zeros((n, 4, n))
        for s in range(n):
            for a in range(4):
                if self.terminal[s]:
                    self.transitions[s, a, s] = 1.0
                elif slippery:
                    side = (1.0 - success_rate) / 2.0
                    for b, p in (((a - 1) % 4, side), (a, success_rate), ((a + 1) % 4, side)):
                        self.transitions[s, a, self.move(s, b)] += p
                else:
                    self.transitions[s, a, self.move(s, a)] = 1.0
        self.distance = self._distances()
        self._values: dict[float, np.ndarray] = {}

    def move(self, s: int, a: int) -> int:
        """The cell reached from ``s`` by a non-slipping move ``a`` (the border stops the move)."""
        r, c = divmod(s, self.ncol)
        dr, dc = _MOVES[a]
        r = min(max(r + dr, 0), self.nrow - 1)
        c = min(max(c + dc, 0), self.ncol - 1)
        return r * self.ncol + c

    def _distances(self) -> np.ndarray:
        n = self.nrow * self.ncol
        dist = np.full(n, -1, dtype=np.int64)
        goal = int(np.flatnonzero(self.goal_reward)[0])
        dist[goal] = 0
        # Reverse BFS: s is one move from s' when s is not terminal and some action leads there.
        preds: list[list[int]] = [[] for _ in range(n)]
        for s in range(n):
            if not self.terminal[s]:
                for a in range(4):
                    preds[self.move(s, a)].append(s)
        queue = deque([goal])
        while queue:
            cur = queue.popleft()
            for prev in preds[cur]:
                if dist[prev] < 0:
                    dist[prev] = dist[cur] + 1
                    queue.append(prev)
        return dist

    def q_values(self, horizon: int, gamma: float = GAMMA) -> np.ndarray:
        """Array (horizon + 1, S, 4): ``Q_h(s, a)`` for every h = 0..horizon (``Q_0 = 0``)."""
        table = self._values.get(gamma)
        if table is None or table.shape[0] <= horizon:
            table = self._solve(max(horizon, 2 * (table.shape[0] if table is not None else 16)), gamma)
            self._values[gamma] = table
        return table[: horizon + 1]

    def _solve(self, horizon: int, gamma: float) -> np.ndarray:
        n = self.nrow * self.ncol
        reward = self.transitions @ self.goal_reward  # (S, 4): expected immediate reward
        continuing = self.transitions * (~self.terminal)[None, None, :]  # (S, 4, S')
        q = np.zeros((horizon + 1, n, 4))
        value = np.zeros(n)
        for h in range(1, horizon + 1):
            q[h] = reward + gamma * continuing @ value
            q[h][self.terminal] = 0.0
            value = q[h].max(axis=1)
        return q

    def success_probability(self, state: int, horizon: int) -> float:
        """Best probability of reaching the goal from ``state`` within ``horizon`` moves."""
        if horizon <= 0:
            return 0.0
        return float(self.q_values(horizon, gamma=1.0)[horizon, state].max())


@functools.lru_cache(maxsize=4096)
def lake_model(desc: tuple[str, ...], slippery: bool, success_rate: float) -> LakeModel:
    """The (cached) exact model of a map."""
    return LakeModel(desc, slippery, success_rate)


class FrozenLakeEnv:
    """Text FrozenLake: symbols ``P`` player, ``_`` frozen, ``O`` hole, ``G`` goal."""

    name = "frozenlake"

    def __init__(self, config: FrozenLakeConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        self._model: LakeModel | None = None
        self._task: Task | None = None
        self._pos = 0
        self._done = False
        self._rng = np.random.default_rng(0)

    # -- tasks ---------------------------------------------------------------------------------
    def _map_stream(self) -> Iterator[tuple[str, ...]]:
        for i in count():
            rng = np.random.default_rng([self.config.seed, self.config.size, i])
            yield tuple(generate_random_map(self.config.size, self.config.p_frozen, rng))

    def tasks(self, split: str, n: int) -> list[Task]:
        maps = collect_split(self._map_stream(), "\n".join, split, n, max_draws=200 * n + 20_000)
        return [self.task_from_map(desc) for desc in maps]

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

    def instruction(self) -> str:
        text = (
            "You walk on a frozen lake drawn as a grid, one row per line. Symbols: P is you, _ is "
            "safe ice, O is a hole (falling in ends the episode with no reward), G is the goal. "
            "Reach G to succeed. A move into the border leaves you where you are."
        )
        if self.config.slippery:
            p = self.config.success_rate
            text += (
                f" The ice is slippery: you move in the chosen direction with probability {p:.2f}, "
                "otherwise sideways (perpendicular to it)."
            )
        return text

    def action_format(self) -> str:
        return "The action is one of Left, Down, Right, Up, for example <action>Left</action>."

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


def _action_index(action: str) -> int | None:
    cleaned = action.strip().strip(".").lower()
    for i, name in enumerate(ACTIONS):
        if cleaned == name.lower():
            return i
    return None


@register_env("frozenlake", FrozenLakeConfig)
def _make_frozenlake(config: FrozenLakeConfig) -> FrozenLakeEnv:
    return FrozenLakeEnv(config)
