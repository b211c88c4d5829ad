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
from typing import Any, Literal

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
        task_set: ``random`` (Gymnasium's random maps) or ``budget_sensitive`` (slippery maps whose
            budget headroom at 25% of T_max is at least ``headroom_threshold``; see
            :mod:`arlkit.envs.frozenlake_sets`).
        headroom_threshold: the least headroom of a ``budget_sensitive`` map.
    """

    size: int = 4
    p_frozen: float = 0.8
    slippery: bool = True
    success_rate: float = 1.0 / 3.0
    t_max: int = 70
    seed: int = 0
    task_set: Literal["random", "budget_sensitive"] = "random"
    headroom_threshold: float = 0.10

    def __post_init__(self) -> None:
        if not 2 <= self.size <= 32:
            raise ValueError(f"size must be between 2 and 32, got {self.size}")
        if not 0.0 < self.p_frozen <= 1.0:
            raise ValueError(f"p_frozen must be in (0, 1], got {self.p_frozen}")
        if not 0.0 <= self.success_rate <= 1.0:
            raise ValueError(f"success_rate must be in [0, 1], got {self.success_rate}")
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")
        if self.task_set not in ("random", "budget_sensitive"):
            raise ValueError(f"task_set must be random or budget_sensitive, got {self.task_set!r}")
        if self.task_set == "budget_sensitive" and not self.slippery:
            raise ValueError("task_set=budget_sensitive needs slippery=true (deterministic maps have no headroom)")


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
        rows, cols = np.divmod(np.arange(n), self.ncol)
        # next_cell[s, b]: the cell reached from s by a move in direction b (the border stops it)
        self.next_cell = np.stack(
            [
                np.clip(rows + dr, 0, self.nrow - 1) * self.ncol + np.clip(cols + dc, 0, self.ncol - 1)
                for dr, dc in _MOVES
            ],
            axis=1,
        )
        if slippery:
            side = (1.0 - success_rate) / 2.0
            outcomes = [(-1, side), (0, success_rate), (1, side)]  # (direction offset, probability)
        else:
            outcomes = [(0, 1.0)]
        self.transitions = np.zeros((n, 4, n))
        states = np.arange(n)
        for a in range(4):
            for offset, prob in outcomes:
                np.add.at(self.transitions[:, a, :], (states, self.next_cell[:, (a + offset) % 4]), prob)
        term = np.flatnonzero(self.terminal)
        self.transitions[term] = 0.0
        self.transitions[term, :, term] = 1.0  # holes and the goal absorb (episodes end there)
        self.distance = self._distances()
        self._values: dict[float, np.ndarray] = {}

    def move(self, s: int, a: int) -> int:
        """The cell reached from ``s`` by a non-slipping move ``a`` (the border stops the move)."""
        return int(self.next_cell[s, a])

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

    def planning_policy(self, horizon: int, criterion: str = "discounted") -> np.ndarray:
        """Array (horizon, S, 4): the action distribution at turn t (0-based) of the oracle that
        plans for ``horizon`` turns, i.e. for ``h = horizon - t`` remaining turns at turn t, spreading
        uniformly over its best actions.

        ``criterion`` ``discounted``: best by Q*_h with gamma = 0.95 (arlkit's oracle).
        ``success``: best by the probability of success within h (gamma = 1), ties broken by Q*_h.
        """
        if criterion not in ("discounted", "success"):
            raise ValueError(f"criterion must be 'discounted' or 'success', got {criterion!r}")
        # row t of these stacks plans for h = horizon - t remaining turns
        q_discounted = self.q_values(horizon, gamma=GAMMA)[horizon:0:-1]
        q_first = self.q_values(horizon, gamma=1.0)[horizon:0:-1] if criterion == "success" else q_discounted
        first = q_first >= q_first.max(axis=2, keepdims=True) - 1e-12
        second = np.where(first, q_discounted, -np.inf)
        best = first & (second >= second.max(axis=2, keepdims=True) - 1e-12)
        return best / best.sum(axis=2, keepdims=True)

    def policy_success_probability(self, policy: np.ndarray, budget: int) -> np.ndarray:
        """Array (S,): probability that the non-stationary ``policy`` (array (>= budget, S, 4) of
        action distributions per turn) reaches the goal within ``budget`` turns from each state."""
        reward = self.transitions @ self.goal_reward  # (S, 4)
        continuing = self.transitions * (~self.terminal)[None, None, :]
        value = np.zeros(self.transitions.shape[0])
        for t in range(budget - 1, -1, -1):
            q = reward + continuing @ value
            value = (policy[t] * q).sum(axis=1)
            value[self.terminal] = 0.0
        return value

    def headroom(self, budget: int, t_max: int, criterion: str = "discounted") -> float:
        """Budget headroom at ``budget`` from the start cell (SPEC §2.5): the success probability
        within T of an oracle that plans for the announced budget T minus that of the same oracle
        planning for the full budget T_max (what full-budget training converges to).

        ``discounted`` (default): both are arlkit's gamma = 0.95 oracle; 0 at T = T_max.
        ``success``: the budget-aware side is the exact optimum V*_T (gamma = 1) and the full-budget
        side maximises success within T_max; never negative, 0 at T = T_max.
        """
        if not 1 <= budget <= t_max:
            raise ValueError(f"budget must be between 1 and t_max = {t_max}, got {budget}")
        full = self.policy_success_probability(self.planning_policy(t_max, criterion), budget)[self.start]
        if criterion == "success":
            aware = self.success_probability(self.start, budget)
        else:
            aware = float(self.policy_success_probability(self.planning_policy(budget, criterion), budget)[self.start])
        return aware - float(full)


@functools.lru_cache(maxsize=4096)
def lake_model(desc: tuple[str, ...], slippery: bool, success_rate: float) -> LakeModel:
    """The (cached) exact model of a map."""
    return LakeModel(desc, slippery, success_rate)


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
        if self.config.task_set == "budget_sensitive":
            from arlkit.envs.frozenlake_sets import budget_sensitive_maps

            yield from budget_sensitive_maps(
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
        budget_sensitive = self.config.task_set == "budget_sensitive"
        if budget_sensitive and self._use_shipped:
            from arlkit.envs.frozenlake_sets import shipped_maps

            shipped = shipped_maps(self._set_params(), split, n)
            if shipped is not None:
                return [self.task_from_map(desc) for desc in shipped]
        max_draws = 20 * n + 200 if budget_sensitive else 50 * n + 5_000
        maps = collect_split(self._map_stream(), "\n".join, split, n, max_draws=max_draws)
        return [self.task_from_map(desc) for desc in maps]

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

    def headroom(self, budget: int) -> float:
        """Budget headroom of the current task at ``budget`` (SPEC §2.5): the budget-aware optimum's
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
