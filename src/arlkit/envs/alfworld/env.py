"""ALFWorld's text household tasks (docs/environments.md#alfworld; ARLArena's and GiGPO's ALFWorld).

Episode semantics (ARLArena's ALFWorld wrapper, with arlkit's prompts and budgets on top):

- A game is a real ALFWorld text game played by TextWorld as ``AlfredTWEnv`` plays it
  (:mod:`arlkit.envs.alfworld.backend`): arlkit's generated games (default,
  :mod:`arlkit.envs.alfworld.games`) or a real download (``data_dir``; the test split is
  ``valid_seen``).
- Every observation is TextWorld's text (the intro first, with ``Your task is to: ...``) followed by
  the admissible commands, ``help`` left out. The task is also in the instruction. The history
  window is the prompt's (``--history 2`` is ARLArena's h = 2).
- An action is one admissible command, lower-cased (``Go To Cabinet 1`` is ``go to cabinet 1``).
  Anything else is invalid: nothing is sent to the game, the state is unchanged, and the trainer
  charges its invalid-action penalty (0.1, ``reward.invalid_action_penalty``), as ARLArena's
  projection marks such an action invalid.
- The episode ends when the goal holds: success, reward ``success_reward`` (10, ARLArena's 10·won;
  training uses ``reward.success_reward``, see ``configs/gigpo_alfworld.yaml``). T_max is 50.

Oracle: the planner expert (fast-downward through TextWorld, ALFWorld's ``planner`` expert). On the
walkthrough (the planner's plan from the start, exact shortest for every shipped game), its next
command; elsewhere a plan from the current state (cached per state). ``look``, ``inventory`` and
``examine`` commands are dropped from plans (they change no precondition or goal). Step quality
looks one command ahead and plans from there; ``action_values`` list only the plan's next command.
The search runs within ``planner_timeout_s`` and ``planner_memory_mb`` (:mod:`.planner`); where it
gives no answer within them the oracle is unknown there (no optimal action, no values, no shortest
length, success probability NaN), the game is recorded, and :meth:`AlfworldEnv.summary_notes` names it.
"""

from __future__ import annotations

import json
import math
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from arlkit.envs.alfworld.backend import POOL, Backend, GameView, modules
from arlkit.envs.alfworld.games import (
    TASK_TYPES, GeneratedGame, collect_real_games, game_document, load_shipped, read_real_game,
)  # fmt: skip
from arlkit.envs.alfworld.planner import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, PlannerLimit
from arlkit.envs.parsing import parse_tagged_action, quote
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.splits import SPLITS, content_id

__all__ = ["GAMMA", "AlfworldConfig", "AlfworldEnv"]

GAMMA = 0.95
_R = TypeVar("_R")
_NO_OPS = ("look", "inventory", "examine ", "help")  # commands that change nothing a goal or precondition reads
_TASK = re.compile(r"Your task is to: (.*?)\.?\s*$", re.MULTILINE)
_PLANS: OrderedDict[tuple[str, str], tuple[str, ...]] = OrderedDict()  # (game, facts) -> the planner's plan
_NO_PLAN: OrderedDict[tuple[str, str, float, int], str] = OrderedDict()  # (game, facts, limits) -> why none came
_UNPLANNED: dict[tuple[str, float, int], tuple[str, str]] = {}  # (task id, limits) -> (game's name, why no answer)
_STARTS: OrderedDict[str, GameView] = OrderedDict()  # game -> what a reset shows: resets need no game
_CACHE_LOCK = threading.Lock()
_MAX_CACHED = 50_000


@dataclass(frozen=True)
class AlfworldConfig:
    """Configuration of the ALFWorld environment.

    Attributes:
        data_dir: a real ALFWorld download: its ``json_2.1.1`` folder or the folder holding it
            (``$ALFWORLD_DATA``); empty for arlkit's shipped generated games.
        eval_split: the folder of ``data_dir`` that serves the test split (``valid_seen``, ARLArena's
            evaluation set, or ``valid_unseen``); ``train`` serves the train split.
        task_types: keep only these task types (ALFWorld's names); empty keeps all six.
        t_max: the full turn budget T_max (ARLArena: 50 steps).
        success_reward: reward of the step that wins (ARLArena: 10).
        max_games: most games this process keeps in memory at once, over all alfworld environments
            (about 7 MB each); the rollout engine keeps one environment per trajectory until its run
            ends, and one whose game went to another replays its commands when it steps again, so keep
            it at least the engine's ``max_active``.
        planner_timeout_s: wall-clock seconds one search of the planner (the oracle's, from one state)
            may run before it is killed and the oracle is unknown in that state.
        planner_memory_mb: memory one search may add (address space, MB); past it the search ends
            and the oracle is unknown in that state. One search runs per CPU core at most.
    """

    data_dir: str = ""
    eval_split: str = "valid_seen"
    task_types: tuple[str, ...] = ()
    t_max: int = 50
    success_reward: float = 10.0
    max_games: int = 256
    planner_timeout_s: float = DEFAULT_TIMEOUT_S
    planner_memory_mb: int = DEFAULT_MEMORY_MB

    def __post_init__(self) -> None:
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")
        if self.max_games < 1:
            raise ValueError(f"max_games must be >= 1, got {self.max_games}")
        if not self.planner_timeout_s > 0:
            raise ValueError(f"planner_timeout_s must be > 0, got {self.planner_timeout_s}")
        if self.planner_memory_mb < 1:
            raise ValueError(f"planner_memory_mb must be >= 1, got {self.planner_memory_mb}")
        if self.eval_split not in ("valid_seen", "valid_unseen"):
            raise ValueError(f"eval_split must be valid_seen or valid_unseen, got {self.eval_split!r}")
        unknown = sorted(set(self.task_types) - set(TASK_TYPES))
        if unknown:
            raise ValueError(f"unknown task types {unknown}; valid choices: {', '.join(TASK_TYPES)}")


def normalize(action: str) -> str:
    """An action as ALFWorld's commands are spelled: lower case, single spaces."""
    return " ".join(action.lower().split()) if isinstance(action, str) else ""


def _useful(plan: Sequence[str]) -> tuple[str, ...]:
    return tuple(c for c in plan if not c.startswith(_NO_OPS))


def _data_root(data_dir: str) -> Path:
    root = Path(data_dir).expanduser()
    return root / "json_2.1.1" if (root / "json_2.1.1").is_dir() else root


@lru_cache(maxsize=8)
def _real_games(folder: str) -> tuple[tuple[Path, str], ...]:
    """``(game.tw-pddl, task type)`` of every game ALFWorld plays in ``folder``."""
    if not Path(folder).is_dir():
        raise ValueError(f"no ALFWorld split folder {folder} (expected json_2.1.1/train, valid_seen, valid_unseen)")
    return tuple((path, _task_type(path)) for path in collect_real_games(Path(folder)))


@dataclass(frozen=True)
class _Game:
    """A task's game: ``key`` names it (the game pool, the caches), ``document`` is its
    ``game.tw-pddl``, ``walkthrough`` the plan from the start to trust (empty: ask the planner),
    ``task`` the task text (empty for a real file: read from the intro), ``name`` how reports name it
    (a real game's task and trial folders, a generated game's task id)."""

    key: str
    document: Mapping[str, Any]
    walkthrough: tuple[str, ...]
    task: str
    name: str


@lru_cache(maxsize=1024)
def _game(task_id: str, payload_text: str) -> _Game:
    payload = json.loads(payload_text)
    if "game" in payload:
        game = GeneratedGame.from_json(payload["game"])
        return _Game(task_id, game_document(game, load_shipped().tables), game.walkthrough, game.task, task_id)
    path = Path(payload["game_file"])
    # A real file's walkthrough may be ALFWorld's hand-coded expert's: the planner plans afresh.
    return _Game(f"{task_id}:{path}", read_real_game(path), (), "", f"{path.parent.parent.name}/{path.parent.name}")


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    with _CACHE_LOCK:
        cache[key] = value
        while len(cache) > _MAX_CACHED:
            cache.popitem(last=False)


class AlfworldEnv:
    """ALFWorld text games; see the module docstring."""

    name = "alfworld"
    blocking_steps = True  # a new game's reset takes about half a second, a step tens of milliseconds

    def __init__(self, config: AlfworldConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        modules()  # a missing package fails here, in one line naming the install command
        POOL.capacity = config.max_games
        self._task: Task | None = None
        self._game: _Game | None = None
        self._task_text = ""
        self._commands: list[str] = []
        self._view: GameView | None = None
        weakref.finalize(self, POOL.drop, id(self))

    # -- tasks ---------------------------------------------------------------------------------
    def tasks(self, split: str, n: int) -> list[Task]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; valid choices: {', '.join(SPLITS)}")
        kinds = set(self.config.task_types or TASK_TYPES)
        if self.config.data_dir:
            root = _data_root(self.config.data_dir)
            games = _real_games(str(root / ("train" if split == "train" else self.config.eval_split)))
            chosen = [path for path, kind in games if kind in kinds]
            tasks = [Task("alfworld-" + content_id(str(p.relative_to(root))), {"game_file": str(p)}) for p in chosen]
        else:
            games = [g for g in load_shipped().splits[split] if g.task_type in kinds]
            tasks = [Task("alfworld-" + content_id(g.content()), {"game": g.to_json()}) for g in games]
        if n < 0 or n > len(tasks):
            raise ValueError(f"only {len(tasks)} {split} ALFWorld games (asked for {n})")
        return tasks[:n]

    # -- the game ------------------------------------------------------------------------------
    def _play(self, action: Callable[[Backend], _R]) -> _R:
        """Run ``action`` on a backend brought to this environment's state."""
        game = self._game
        if game is None:
            raise RuntimeError("call reset(task, seed) first")
        backend = POOL.acquire(id(self), game.key)
        try:
            backend.sync(game.key, game.document, self._commands)
            return action(backend)
        finally:
            POOL.release(backend)

    def reset(self, task: Task, seed: int) -> str:
        """Start ``task``; ALFWorld's text games are deterministic, so ``seed`` is unused. The start
        is played once per game and process; later resets show it again and leave the game itself to
        catch up when it is next played."""
        game = _game(task.task_id, json.dumps(dict(task.payload), sort_keys=True))
        self._task, self._game, self._commands = task, game, []
        with _CACHE_LOCK:
            start = _STARTS.get(game.key)
        if start is None:
            start = self._play(lambda backend: backend.view)
            _remember(_STARTS, game.key, start)
        self._view = start
        found = _TASK.search(start.feedback) if not game.task else None
        self._task_text = game.task or (found.group(1) if found else "")
        return self.render()

    def parse_action(self, reply: str) -> ParsedAction:
        parsed = parse_tagged_action(reply)
        if parsed.action is None:
            return parsed
        command = normalize(parsed.action)
        return ParsedAction(command, None, parsed.strict_format) if command else ParsedAction(None, "the <action> tag is empty")

    @property
    def view(self) -> GameView:
        """What the agent sees now."""
        if self._view is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._view

    def step(self, action: str) -> StepResult:
        view = self.view
        if view.won:
            return StepResult("The episode is over.", 0.0, True, False, False)
        command = normalize(action)
        if command not in self.admissible_actions():
            shown = quote(action) if isinstance(action, str) else "of a non-text type"
            note = f"Invalid action {shown}: it is not one of the admissible actions. Nothing happened."
            return StepResult(f"{note}\n\n{self.render()}", 0.0, False, False, False)
        self._view = self._play(lambda backend: backend.step(command))
        self._commands.append(command)
        won = self._view.won
        return StepResult(self.render(), self.config.success_reward if won else 0.0, won, won, True)

    def render(self) -> str:
        view = self.view
        listed = ", ".join(f"'{c}'" for c in self.admissible_actions())
        return f"{view.feedback.strip()}\n\nYour admissible actions of the current situation are: [{listed}]."

    def prompt_text(self) -> PromptText:
        self.view  # noqa: B018 - raises before reset
        instruction = (
            "You are an expert agent operating in the ALFRED Embodied Environment: a household described in "
            "text. You go to receptacles (cabinets, drawers, countertops, a fridge, a sink basin, ...), open "
            "and close them, take objects and move them into receptacles, clean an object with a sink basin, "
            "heat it with a microwave, cool it with a fridge, or use a desk lamp. You hold at most one object. "
            f"Your task is to: {self._task_text}."
        )
        action_format = (
            "The action is one of the admissible actions listed after each observation, written as listed, "
            "for example <action>go to cabinet 1</action>; any other action is invalid and changes nothing."
        )
        return PromptText(instruction, action_format)

    def admissible_actions(self) -> Sequence[str]:
        return tuple(c for c in self.view.admissible if c != "help")

    # -- state ---------------------------------------------------------------------------------
    def state_key(self) -> str:
        return f"{self._task.task_id if self._task else '-'}@{self.view.facts}"

    def snapshot(self) -> dict[str, Any]:
        return {"task": self._task, "game": self._game, "text": self._task_text, "commands": tuple(self._commands),
                "view": self._view}  # fmt: skip

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Return to a snapshot; the game itself catches up (a replay) when it is next played."""
        self._task, self._game, self._task_text = snapshot["task"], snapshot["game"], snapshot["text"]
        self._commands, self._view = list(snapshot["commands"]), snapshot["view"]

    @property
    def commands(self) -> tuple[str, ...]:
        """The commands executed since the reset."""
        return tuple(self._commands)

    # -- oracle (the planner expert) -----------------------------------------------------------
    def plan(self) -> tuple[str, ...] | None:
        """The planner's commands from here (empty once won, ``None`` when no plan exists);
        :class:`~arlkit.envs.alfworld.planner.PlannerLimit` when the planner gives no answer within
        its limits here (the game is then recorded for :meth:`summary_notes`)."""
        view = self.view
        if view.won:
            return ()
        game, k = self._game, len(self._commands)
        assert game is not None  # a view exists only after a reset
        if game.walkthrough and tuple(self._commands) == game.walkthrough[:k]:
            return game.walkthrough[k:]
        limits = (self.config.planner_timeout_s, self.config.planner_memory_mb)
        key = (game.key, view.facts)
        with _CACHE_LOCK:
            cached, failed = _PLANS.get(key), _NO_PLAN.get((*key, *limits))
        if failed is not None:
            raise PlannerLimit(failed)
        if cached is None:
            try:
                found = self._play(lambda backend: backend.plan(timeout_s=limits[0], memory_mb=limits[1]))
            except PlannerLimit as exc:
                _remember(_NO_PLAN, (*key, *limits), str(exc))
                task_id = self._task.task_id if self._task else ""
                with _CACHE_LOCK:
                    _UNPLANNED.setdefault((task_id, *limits), (game.name, str(exc)))
                raise
            cached = _useful(found or ())
            _remember(_PLANS, key, cached)
        return cached or None

    def summary_notes(self, tasks: Sequence[Task]) -> list[str]:
        """The games among ``tasks`` whose planner gave no answer within this configuration's limits
        in this process (their oracle is unknown in some state), one line each for ``summary.md``."""
        limits = (self.config.planner_timeout_s, self.config.planner_memory_mb)
        with _CACHE_LOCK:
            found = [_UNPLANNED[key] for key in ((t.task_id, *limits) for t in tasks) if key in _UNPLANNED]
        if not found:
            return []
        return [f"- **oracle unavailable for {len(found)} alfworld game(s)**: the planner gave no answer within its "
                "limits (`planner_timeout_s`, `planner_memory_mb`) in some state, where the oracle knows no action (an "
                "oracle policy's trajectory there ends with a policy error); at a game's start, its expected optimum is "
                "unknown (nan)",
                *(f"  - `{name}`: {why}" for name, why in found)]  # fmt: skip

    def _known_plan(self) -> tuple[str, ...] | None:
        """:meth:`plan`, ``None`` also where the planner gave no answer."""
        try:
            return self.plan()
        except PlannerLimit:
            return None

    def shortest_solution_length(self) -> int | None:
        plan = self._known_plan()
        return None if plan is None else len(plan)

    def optimal_actions(self, remaining: int) -> list[str]:
        plan = self._known_plan()
        return [plan[0]] if plan else []

    def action_values(self, remaining: int) -> dict[str, float]:
        plan = self._known_plan()
        if not plan:
            return {}
        return {plan[0]: GAMMA ** (len(plan) - 1) if len(plan) <= remaining else 0.0}

    def success_probability(self, remaining: int) -> float:
        """1 when the plan fits ``remaining``, else 0; NaN where the planner gave no answer."""
        try:
            plan = self.plan()
        except PlannerLimit:
            return math.nan
        return 1.0 if plan is not None and len(plan) <= remaining else 0.0

    def action_quality(self, action: str, remaining: int) -> float:
        """``gamma ** d(s')`` when the command leads to a state the planner solves within the turns
        left after it, else 0 (an invalid command: 0); NaN where the planner gave no answer. Looks
        ahead one command and restores."""
        command = normalize(action)
        if self.view.won or command not in self.admissible_actions() or remaining < 1:
            return 0.0
        try:
            plan = self.plan()
            if plan and command == plan[0]:
                after: int | None = len(plan) - 1
            else:
                saved = self.snapshot()
                try:
                    self.step(command)
                    found = self.plan()
                finally:
                    self.restore(saved)
                after = None if found is None else len(found)
        except PlannerLimit:
            return math.nan
        return GAMMA**after if after is not None and after + 1 <= remaining else 0.0


def _task_type(game_file: Path) -> str:
    try:
        return str(json.loads((game_file.parent / "traj_data.json").read_text(encoding="utf-8"))["task_type"])
    except (OSError, ValueError, KeyError):
        return ""


@register_env("alfworld", AlfworldConfig)
def _make_alfworld(config: AlfworldConfig) -> AlfworldEnv:
    return AlfworldEnv(config)
