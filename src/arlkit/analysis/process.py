"""Step-level process rewards — oracle Q and an LLM judge (RT §5.1, App. B.6, Table 3;
docs/metrics.md#process-signals) — and the judge's agreement with the oracle.

**For the trainer.** A process reward is any callable with the signature of
:data:`ProcessReward`::

    reward_fn(steps: Sequence[StepContext]) -> list[float | None]

called with the *pre-action* context of each step (the environment not yet stepped), returning
one value in [0, 1] per step, or ``None`` where no reward could be computed (a judge failure); a
trainer typically adds ``coef * value`` to that step's reward and skips ``None``. Contexts come
from :func:`step_context` (live, during a rollout) or :func:`trajectory_step_contexts` (after
it, by replaying the record). Two rewards are built in:

- :func:`oracle_process_reward` — ``Q*_h(s, a)`` with h the remaining turns (FrozenLake, Sokoban;
  any environment with an oracle or an ``action_quality`` method);
- :class:`LLMJudge` — any policy backend as a judge: it sees the task, the interaction history,
  the current observation, the remaining turns including this action, and the action, and must
  answer with one integer from 0 to 10, mapped to [0, 1] by dividing by 10. Any other reply is a
  recorded judge failure (value ``None``), never an exception.

**As an analysis.** :func:`judge_agreement` scores candidate actions at a pool of states with both
the judge and the oracle and reports their Spearman rank correlation (over all scored pairs, and
the mean within states).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from arlkit.envs.capabilities import action_quality
from arlkit.analysis.states import StatePoint, replay_states, restore_point
from arlkit.envs import ActionSpace, Env, Task
from arlkit.metrics.bootstrap import Estimate
from arlkit.policies.protocol import Message, Policy, Request
from arlkit.rollout.records import Trajectory
from arlkit.rollout.seeds import derive_seed

__all__ = [
    "JUDGE_PROMPT_VERSION",
    "JUDGE_SYSTEM_PROMPT",
    "JudgeAgreement",
    "JudgeVerdict",
    "LLMJudge",
    "ProcessReward",
    "StepContext",
    "judge_agreement",
    "judge_messages",
    "oracle_process_reward",
    "parse_judge_reply",
    "spearman",
    "step_context",
    "trajectory_step_contexts",
]

JUDGE_PROMPT_VERSION = "arlkit-judge-prompt-v1"

JUDGE_SYSTEM_PROMPT = (
    "You judge a single action that an agent proposes in an interactive task, before the action is "
    "executed. You are given the task, the interaction so far, the current observation, the number of "
    "turns the agent has left (counting this action), and the proposed action. Score the action with "
    "one integer from 0 (useless or harmful) to 10 (the best possible move here), considering whether "
    "it is correct, whether it is relevant to the task, and how much it is expected to help finish the "
    "task efficiently within the remaining turns. A necessary intermediate step deserves full credit. "
    "Give no credit for verbosity or for redundant or repeated actions.\n"
    "Answer with the integer only (0 to 10): no words, no explanation."
)
"""arlkit's wording of the judge instructions (content after RT Table 3; keep it stable)."""


@dataclass(frozen=True)
class StepContext:
    """What a process reward sees about one step, before the action is executed.

    Attributes:
        instruction: the task-specific instruction (``env.prompt_text().instruction``).
        observations: the observations so far (``t + 1`` of them; the last is the current one).
        actions: the agent's earlier actions (``t`` of them; ``None`` for unparsable replies).
        action: the action to score (``None``: the reply had no parsable action).
        remaining: turns left including this one.
        env: the live environment in the pre-action state (oracle rewards read it; the judge does
            not); ``None`` when unavailable.
    """

    instruction: str
    observations: Sequence[str]
    actions: Sequence[str | None]
    action: str | None
    remaining: int
    env: Env | None = None


ProcessReward = Callable[[Sequence[StepContext]], list["float | None"]]
"""A step-level reward: pre-action step contexts in, one value in [0, 1] (or ``None``) per step out."""


def step_context(point: StatePoint, env: Env, action: str | None) -> StepContext:
    """The :class:`StepContext` of proposing ``action`` at ``point`` (``env`` restored there)."""
    actions = [env.parse_action(reply).action for reply in point.replies]
    return StepContext(env.prompt_text().instruction, point.observations, actions, action, point.remaining, env)


def trajectory_step_contexts(
    make_env: Callable[[], Env], task: Task, trajectory: Trajectory, *, history: int | None = None
) -> list[StepContext]:
    """The pre-action :class:`StepContext` of every turn of a recorded trajectory, rebuilt by
    replay (each with its own environment restored to that turn's state), so a trainer can compute
    process rewards after its rollouts: ``reward_fn(trajectory_step_contexts(...))``."""
    contexts = []
    for point, turn in zip(replay_states(make_env(), task, trajectory, history=history), trajectory.turns, strict=True):
        env = restore_point(make_env, point)
        contexts.append(step_context(point, env, turn.action if turn.valid else None))
    return contexts


def oracle_process_reward(steps: Sequence[StepContext]) -> list[float | None]:
    """``Q*_h(s, a)`` of each step (h = remaining turns, gamma 0.95); unparsable actions get 0.
    Needs ``StepContext.env`` with an oracle (or ``action_quality``)."""
    out: list[float | None] = []
    for step in steps:
        if step.env is None:
            raise ValueError("oracle_process_reward needs StepContext.env (the live pre-action environment)")
        out.append(action_quality(step.env, step.action, step.remaining))
    return out


def _history_text(step: StepContext, max_turns: int | None) -> str:
    t = len(step.actions)
    if t == 0:
        return "(none: this is the first action)"
    lines = []
    first = 0 if max_turns is None else max(0, t - max_turns)
    if first > 0:
        lines.append(f"(turns 1-{first} omitted)")
    else:
        lines.append(f"Initial observation:\n{step.observations[0]}")
    for i in range(first, t):
        shown = step.actions[i] if step.actions[i] is not None else "(no valid action)"
        lines.append(f"Turn {i + 1} action: {shown}")
        if i + 1 < t:
            lines.append(f"Turn {i + 1} observation:\n{step.observations[i + 1]}")
    return "\n".join(lines)


def judge_messages(step: StepContext, *, max_history_turns: int | None = None) -> list[Message]:
    """The judge's chat for one step: :data:`JUDGE_SYSTEM_PROMPT`, then the filled-in input."""
    action = step.action if step.action is not None else "(the agent's reply contained no valid action)"
    user = (
        f"TASK:\n{step.instruction}\n\n"
        f"INTERACTION HISTORY:\n{_history_text(step, max_history_turns)}\n\n"
        f"CURRENT OBSERVATION:\n{step.observations[-1]}\n\n"
        f"REMAINING TURNS (including this action): {step.remaining}\n\n"
        f"ACTION TO JUDGE:\n{action}\n\n"
        "Your score (one integer from 0 to 10):"
    )
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class JudgeVerdict:
    """One parsed judge reply.

    Attributes:
        value: the score mapped to [0, 1], or ``None`` on failure.
        raw: the judge's reply text.
        error: why the reply was rejected (``None`` when accepted).
    """

    value: float | None
    raw: str
    error: str | None = None


_THINK_BLOCK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_INTEGER = re.compile(r"\s*([0-9]{1,3})\s*")


def parse_judge_reply(text: object) -> JudgeVerdict:
    """An integer 0-10 (surrounding whitespace allowed, after an optional leading ``<think>`` block)
    becomes ``value = n / 10``; anything else is a failure with its reason. Never raises."""
    if not isinstance(text, str):
        return JudgeVerdict(None, repr(text)[:200], "the reply is not text")
    body = _THINK_BLOCK.sub("", text, count=1)
    match = _INTEGER.fullmatch(body)
    if match is None:
        shown = body.strip()[:40]
        return JudgeVerdict(None, text, f"not a bare integer: {shown!r}" if shown else "empty reply")
    number = int(match.group(1))
    if number > 10:
        return JudgeVerdict(None, text, f"{number} is outside 0-10")
    return JudgeVerdict(number / 10.0, text)


@dataclass
class LLMJudge:
    """An LLM-judge process reward (RT Table 3): any policy backend answers the judge prompt.

    Attributes:
        policy: the judge model (``generate`` is called with judge chats; ``Request.env`` is
            ``None`` and ``remaining`` is ``None``).
        seed: base seed of the judge's sampling (request i gets ``derive_seed(seed, "judge", i)``).
        max_history_turns: show only the last N turns of history (``None``: all).
        batch_size: requests per ``generate`` call.
        failures: running count of rejected judge replies.
    """

    policy: Policy
    seed: int = 0
    max_history_turns: int | None = None
    batch_size: int = 64
    failures: int = 0
    calls: int = field(default=0, repr=False)

    def judge(self, steps: Sequence[StepContext]) -> list[JudgeVerdict]:
        """One verdict per step; backend errors and malformed replies are failures."""
        verdicts: list[JudgeVerdict] = []
        for start in range(0, len(steps), self.batch_size):
            chunk = steps[start : start + self.batch_size]
            requests = [
                Request(judge_messages(s, max_history_turns=self.max_history_turns), derive_seed(self.seed, "judge", self.calls + i), 0)
                for i, s in enumerate(chunk)
            ]
            self.calls += len(chunk)
            try:
                replies = self.policy.generate(requests)
            except Exception as exc:  # a judge outage must not stop training
                replies = []
                error = f"judge backend raised {type(exc).__name__}: {exc}"[:200]
                verdicts += [JudgeVerdict(None, "", error) for _ in chunk]
                self.failures += len(chunk)
                continue
            for reply in replies:
                verdict = JudgeVerdict(None, "", f"judge backend error: {reply.error}") if reply.error else parse_judge_reply(reply.text)
                self.failures += verdict.value is None
                verdicts.append(verdict)
        return verdicts

    def __call__(self, steps: Sequence[StepContext]) -> list[float | None]:
        """The :data:`ProcessReward` interface: scores in [0, 1], ``None`` for failures."""
        return [v.value for v in self.judge(steps)]


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    starts = np.cumsum(counts) - counts
    return (starts + (counts + 1) / 2.0)[inverse]


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Spearman rank correlation with average ranks for ties; NaN when either side is constant or
    fewer than two pairs."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size != y.size:
        raise ValueError("spearman needs two sequences of equal length")
    if x.size < 2:
        return math.nan
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


@dataclass
class JudgeAgreement:
    """Judge vs oracle on a state pool.

    Attributes:
        rows: ``(state index, task_id, t, remaining, action, oracle value, judge value or None,
            judge error or None)`` per scored action.
        spearman_all: rank correlation over every pair the judge scored.
        spearman_ci: bootstrap interval of ``spearman_all`` over tasks (``None`` when undefined).
        spearman_within: mean of the per-state correlations (states where both vary).
        states_with_variation: states that entered ``spearman_within``.
        failures: judge failures.
        notes: remarks.
    """

    rows: list[tuple[int, str, int, int, str, float, float | None, str | None]]
    spearman_all: float
    spearman_ci: Estimate | None
    spearman_within: float
    states_with_variation: int
    failures: int
    notes: list[str] = field(default_factory=list)


def _bootstrap_spearman(rows: Sequence[tuple], resamples: int, seed: int) -> Estimate | None:  # type: ignore[type-arg]
    ok = [r for r in rows if r[6] is not None]
    if len(ok) < 3:
        return None
    tasks = sorted({r[1] for r in ok})
    members = {t: [i for i, r in enumerate(ok) if r[1] == t] for t in tasks}
    o = np.array([r[5] for r in ok])
    j = np.array([r[6] for r in ok], dtype=float)
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(resamples):
        idx = np.concatenate([members[tasks[k]] for k in rng.integers(0, len(tasks), len(tasks))])
        value = spearman(o[idx], j[idx])
        if not math.isnan(value):
            stats.append(value)
    point = spearman(o, j)
    if math.isnan(point) or not stats:
        return None
    low, high = np.quantile(stats, [0.025, 0.975])
    return Estimate(point, float(low), float(high))


def judge_agreement(
    judge: LLMJudge,
    make_env: Callable[[], Env],
    points: Sequence[StatePoint],
    *,
    candidates: Callable[[Env, StatePoint], Sequence[str]] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> JudgeAgreement:
    """Score candidate actions at every point with the judge and with the oracle.

    ``candidates(env, point)`` lists the actions to score (default: every admissible action, for
    environments with a finite action set).
    """
    contexts: list[StepContext] = []
    rows_meta = []
    for i, point in enumerate(points):
        env = restore_point(make_env, point)
        if candidates is not None:
            actions = list(candidates(env, point))
        elif isinstance(env, ActionSpace):
            actions = list(env.admissible_actions())
        else:
            raise ValueError(f"environment {env.name!r} has no finite action set: pass candidates=")
        for action in actions:
            contexts.append(step_context(point, env, action))
            rows_meta.append((i, point.task_sample[0], point.t, point.remaining, action))
    oracle = oracle_process_reward(contexts)
    verdicts = judge.judge(contexts)
    rows = [(*meta, float(o or 0.0), v.value, v.error) for meta, o, v in zip(rows_meta, oracle, verdicts, strict=True)]
    ok = [r for r in rows if r[6] is not None]
    overall = spearman([r[5] for r in ok], [float(r[6] or 0.0) for r in ok]) if ok else math.nan
    within = []
    for i in range(len(points)):
        mine = [r for r in ok if r[0] == i]
        value = spearman([r[5] for r in mine], [float(r[6] or 0.0) for r in mine])
        if not math.isnan(value):
            within.append(value)
    failures = sum(1 for r in rows if r[6] is None)
    notes = []
    if failures:
        notes.append(f"{failures} of {len(rows)} judge replies were not an integer 0-10 (recorded as failures)")
    return JudgeAgreement(
        rows, overall, _bootstrap_spearman(rows, resamples, seed),
        float(np.mean(within)) if within else math.nan, len(within), failures, notes,
    )  # fmt: skip
