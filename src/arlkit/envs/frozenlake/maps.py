"""FrozenLake maps and their exact MDP: Gymnasium's rules and random-map generator, and the
finite-horizon dynamic programme that is the environment's oracle.

Rules (Gymnasium ``FrozenLake-v1``): actions Left/Down/Right/Up (0..3); a move that would leave the
grid leaves the position unchanged; reaching ``G`` gives reward 1 and ends the episode, falling into
a hole ends it with reward 0. On slippery ice the intended direction is taken with probability
``success_rate`` and each perpendicular direction with ``(1 - success_rate) / 2``.

Oracle (docs/algorithms.md#oracles): with the transition table P, ``V_0 = 0``,
``Q_h(s, a) = sum_s' P(s'|s, a) * (r(s') + gamma * (1 - terminal(s')) * V_{h-1}(s'))`` and
``V_h = max_a Q_h``, gamma = 0.95, computed for every state, action and horizon at once. With
gamma = 1 the same recursion gives the best probability of success within h turns.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Sequence


import numpy as np

__all__ = ["ACTIONS", "GAMMA", "LakeModel", "generate_random_map", "lake_model", "random_start", "reaches_goal"]

ACTIONS = ("Left", "Down", "Right", "Up")
_MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))
GAMMA = 0.95


def reaches_goal(board: Sequence[str]) -> bool:
    """Depth-first search from the start ``S`` (the top-left cell when the board has none) over
    non-hole cells to the goal."""
    size = len(board)
    flat = "".join(board)
    start = divmod(flat.index("S"), size) if "S" in flat else (0, 0)
    frontier, seen = [start], {start}
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
        if reaches_goal(board):
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
        """Budget headroom at ``budget`` from the start cell (docs/metrics.md#budget-headroom): the success probability
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

    def first_move_gain(self, budget: int, t_max: int) -> float:
        """The budget-aware first move's gain at ``budget`` (docs/metrics.md#budget-headroom): the success
        probability within ``budget`` of the best first move minus that of the first move of the oracle
        planning for ``t_max`` (ties spread uniformly), each followed by optimal play (gamma 1). Positive
        only where a tight budget changes the very first decision, which full-budget training never
        meets with that budget left."""
        if not 1 <= budget <= t_max:
            raise ValueError(f"budget must be between 1 and t_max = {t_max}, got {budget}")
        success = self.q_values(budget, gamma=1.0)[budget, self.start]
        expert = self.planning_policy(t_max)[0, self.start]
        return float(success.max() - expert @ success)


def random_start(desc: tuple[str, ...], rng: np.random.Generator) -> tuple[str, ...]:
    """``desc`` with its start moved to a frozen cell drawn uniformly from those that reach the goal
    (the map's own start among them)."""
    flat = list("".join(desc))
    distance = lake_model(desc, False, 1.0).distance
    cells = [i for i, ch in enumerate(flat) if ch in "SF" and distance[i] > 0]
    chosen = cells[int(rng.integers(len(cells)))]
    flat[flat.index("S")] = "F"
    flat[chosen] = "S"
    width = len(desc[0])
    return tuple("".join(flat[r * width : (r + 1) * width]) for r in range(len(desc)))


@functools.lru_cache(maxsize=4096)
def lake_model(desc: tuple[str, ...], slippery: bool, success_rate: float) -> LakeModel:
    """The (cached) exact model of a map."""
    return LakeModel(desc, slippery, success_rate)


