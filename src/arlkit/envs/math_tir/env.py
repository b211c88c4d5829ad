"""Tool-integrated math (ARLArena's TIR setting; docs/environments.md#math-tir; T_max 8).

Episode semantics:

- Observation 0 is the problem. Each turn the agent either runs Python or answers: the reply's
  last fenced ```python block or its last ``\\boxed{...}``, whichever comes later, is the action.
- A code block runs in the sandbox (a fresh interpreter each time: nothing carries over between
  blocks), with numpy, sympy, mpmath and scipy (:data:`TOOLS`) but without the task set's sources:
  the generators, their data and seeds, and the shipped problems are masked. The observation is
  ``Code execution result: `` and its output (stdout, then stderr, cut at ``output_chars``), or
  why it stopped (time limit, memory, output limit).
- ``\\boxed{answer}`` ends the episode: success (reward 1) when the problem's scorer gives 1.0
  (:func:`~arlkit.envs.math_tir.problems.score_answer`, in a worker process: a check that runs past
  ``score_timeout_s`` is stopped and the answer is not correct). Running out of turns scores 0.
- A reply with neither (or an empty block or answer, or an over-long program) is invalid.

Oracle (docs/algorithms.md#oracles): answering is always one turn, so ``shortest_solution_length``
is 1 and the optimal action is the boxed reference answer (Q* = 1). A code block that prints the
answer is worth gamma when another turn follows it (0 on the last turn); ``demonstration`` is that
two-turn tool-use path (code that prints the answer, then the answer), e.g. for SFT data.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from arlkit.envs.answers import answer_folders, generator_packages
from arlkit.envs.math_tir.problems import (
    FAMILIES, GENERATORS, LEVELS, SCORE_TIMEOUT_S, SHIPPED_FILE, MathProblem, generated_problems, score_answer,
    shipped_problems,
)
from arlkit.envs.parsing import parse_tagged_action
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.sandboxed import env_sandbox, refuse_derived
from arlkit.sandbox import Sandbox, SandboxConfig, SandboxResult

__all__ = ["TOOLS", "MathTirConfig", "MathTirEnv", "parse_tir_action"]

GAMMA = 0.95
TOOLS = ("numpy", "sympy", "mpmath", "scipy")
"""What code blocks compute with; stays importable even where a generator needs it too."""
_CODE = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_BOXED = "\\boxed{"
_OUTCOME_TEXT = {
    "timeout": "the program ran past its time limit and was stopped",
    "memory": "the program ran out of memory",
    "output_limit": "the program wrote too much output and was stopped",
}


@dataclass(frozen=True)
class MathTirConfig:
    """Configuration of the math-tir environment.

    Attributes:
        task_set: ``generated`` (reasoning-gym's generators) or ``shipped`` (arlkit's own problems).
        families: reasoning-gym families to draw from (generated set).
        levels: difficulty levels (generated set; :mod:`arlkit.envs.math_tir.problems`).
        seed: base seed of the generators.
        test_pool: test problems per (family, level); train problems avoid their questions.
        t_max: the family's full turn budget T_max (8).
        code_timeout_s: wall-clock limit of one code block; the sandbox's CPU limit follows it.
        output_chars: characters of program output shown; the sandbox's output cap follows it.
        max_code_chars: longer programs are invalid actions.
        score_timeout_s: deadline of scoring one final answer; a check that runs longer (sympy on
            ``\\binom{10000000}{5000000}``) is stopped and the answer is not correct.
        sandbox: limits and isolation of the sandbox code blocks run in (``sandbox.memory_mb``,
            ``sandbox.min_isolation``, ...); its ``wall_time_s``, ``cpu_time_s`` and
            ``max_output_bytes`` follow ``code_timeout_s`` and ``output_chars``
            (:mod:`arlkit.envs.sandboxed`).
    """

    task_set: Literal["generated", "shipped"] = "generated"
    families: tuple[str, ...] = FAMILIES
    levels: tuple[int, ...] = LEVELS
    seed: int = 0
    test_pool: int = 50
    t_max: int = 8
    code_timeout_s: float = 5.0
    output_chars: int = 2000
    max_code_chars: int = 20_000
    score_timeout_s: float = SCORE_TIMEOUT_S
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

    def __post_init__(self) -> None:
        if self.task_set not in ("generated", "shipped"):
            raise ValueError(f"task_set must be generated or shipped, got {self.task_set!r}")
        if not self.families or not self.levels or min(self.levels) < 0:
            raise ValueError("families and levels must be non-empty, levels >= 0")
        if self.t_max < 1 or self.test_pool < 1 or self.code_timeout_s <= 0 or self.output_chars < 100:
            raise ValueError("t_max >= 1, test_pool >= 1, code_timeout_s > 0 and output_chars >= 100 are required")
        if not self.score_timeout_s > 0:
            raise ValueError(f"score_timeout_s must be > 0, got {self.score_timeout_s}")
        refuse_derived(self.sandbox, {"wall_time_s": "code_timeout_s", "cpu_time_s": "code_timeout_s",
                                      "max_output_bytes": "output_chars"})


def _last_boxed(text: str) -> tuple[int, str] | None:
    """``(start, content)`` of the last complete ``\\boxed{...}`` (braces balanced)."""
    start = text.rfind(_BOXED)
    while start >= 0:
        depth, i = 1, start + len(_BOXED)
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return start, text[start + len(_BOXED) : i - 1]
        start = text.rfind(_BOXED, 0, start)
    return None


def parse_tir_action(reply: str) -> ParsedAction:
    """The action of a reply: ``\\boxed{X}`` or a fenced python block (whichever comes last).
    Never raises."""
    if not isinstance(reply, str):
        return ParsedAction(None, "the reply is not text")
    tagged = parse_tagged_action(reply)
    codes = list(_CODE.finditer(reply))
    boxed = _last_boxed(reply)
    code_at = codes[-1].start() if codes else -1
    if boxed is None and not codes:
        return ParsedAction(None, "no ```python code block and no \\boxed{answer} found in the reply")
    if boxed is not None and boxed[0] > code_at:
        action = f"{_BOXED}{boxed[1].strip()}}}"
        piece = boxed[1]
    else:
        piece = codes[-1].group(1)
        action = f"```python\n{piece.rstrip()}\n```"
    strict = tagged.strict_format and tagged.action is not None and piece in tagged.action
    return ParsedAction(action, None, strict)


class MathTirEnv:
    """Math problems solved with a Python tool and a boxed final answer."""

    name = "math-tir"
    blocking_steps = True  # a code block is a sandboxed program run; an answer is scored in a worker process

    def __init__(self, config: MathTirConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        self._sandbox: Sandbox | None = None
        self._task: Task | None = None
        self._problem: MathProblem | None = None
        self._transcript: list[str] = []
        self._observation = ""
        self._done = self._solved = False

    def tasks(self, split: str, n: int) -> list[Task]:
        if self.config.task_set == "shipped":
            if split not in ("train", "test"):
                raise ValueError(f"unknown split {split!r}; valid choices: train, test")
            chosen = [p for p in shipped_problems() if p.metadata.get("split") == split]
            if n < 0 or n > len(chosen):
                raise ValueError(f"only {len(chosen)} shipped {split} problems exist (asked for {n})")
        else:
            c = self.config
            chosen = list(generated_problems(split, n, tuple(c.families), tuple(c.levels), c.seed, c.test_pool))
        return [Task(p.task_id, p.to_payload()) for p in chosen[:n]]

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = Sandbox(env_sandbox(
                self.config.sandbox,
                wall_time_s=self.config.code_timeout_s + 5.0, cpu_time_s=int(self.config.code_timeout_s) + 2,
                max_output_bytes=max(65536, self.config.output_chars * 8), hide_paths=answer_folders([SHIPPED_FILE]),
                hide_packages=generator_packages(GENERATORS, TOOLS),
            ))
        return self._sandbox

    def _require(self) -> MathProblem:
        if self._problem is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._problem

    def reset(self, task: Task, seed: int) -> str:
        self._task, self._problem = task, MathProblem.from_payload(task.payload)
        self._transcript = []
        self._done = self._solved = False
        self._observation = f"PROBLEM: {self._problem.question}"
        return self._observation

    def parse_action(self, reply: str) -> ParsedAction:
        return parse_tir_action(reply)

    def run_code(self, code: str) -> str:
        """The observation of running ``code`` in the sandbox."""
        result: SandboxResult = self.sandbox.run_python(code, wall_time_s=self.config.code_timeout_s)
        text = result.stdout + (("\n" if result.stdout and not result.stdout.endswith("\n") else "") + result.stderr
                                if result.stderr else "")
        cut = self.config.output_chars
        if len(text) > cut:
            text = text[:cut] + f"\n[... output cut: {len(text)} characters in all ...]"
        note = _OUTCOME_TEXT.get(result.outcome)
        if note:
            text = (text + "\n" if text else "") + f"({note})"
        return "Code execution result: " + (text.strip("\n") if text.strip() else "(no output)")

    def step(self, action: str) -> StepResult:
        problem = self._require()
        if self._done:
            return StepResult("The episode is over.", 0.0, True, False, False)
        action = action.strip() if isinstance(action, str) else ""
        if action.startswith(_BOXED) and action.endswith("}"):
            answer = action[len(_BOXED) : -1].strip()
            if not answer:
                return StepResult("Invalid action: the boxed answer is empty.", 0.0, False, False, False)
            self._transcript.append(action)
            self._solved = score_answer(problem, answer, timeout_s=self.config.score_timeout_s) >= 1.0
            self._done = True
            verdict = "correct" if self._solved else "not correct"
            self._observation = f"Your final answer {answer} is {verdict}."
            return StepResult(self._observation, 1.0 if self._solved else 0.0, True, self._solved, True)
        match = re.fullmatch(r"```python\n(.*)\n```", action, re.DOTALL)
        if match is None:
            return StepResult("Invalid action: write a ```python code block or a final \\boxed{answer}.", 0.0, False, False, False)
        code = match.group(1)
        if not code.strip():
            return StepResult("Invalid action: the code block is empty.", 0.0, False, False, False)
        if len(code) > self.config.max_code_chars:
            return StepResult(f"Invalid action: the program is longer than {self.config.max_code_chars} characters.",
                              0.0, False, False, False)
        self._transcript.append(action)
        self._observation = self.run_code(code)
        return StepResult(self._observation, 0.0, False, False, True)

    def render(self) -> str:
        return self._observation or "No task: call reset first."

    def prompt_text(self) -> PromptText:
        self._require()
        instruction = (
            "Solve the math problem. You may run Python to compute: each turn, either write one ```python code "
            "block (it runs in a fresh interpreter; you see what it prints) or give your final answer as "
            f"\\boxed{{answer}}, which ends the episode. Each program may run {self.config.code_timeout_s:g} s; "
            "nothing carries over between programs, so print what you need."
        )
        action_format = (
            "Inside the action tags, write either a code block, for example <action>```python\nprint(17 * 24)\n```"
            "</action>, or the final answer, for example <action>\\boxed{408}</action>. Give the answer in the form "
            "the problem asks for."
        )
        return PromptText(instruction, action_format)

    def state_key(self) -> str:
        task_id = self._task.task_id if self._task else "-"
        digest = hashlib.sha256("\0".join(self._transcript).encode("utf-8", "replace")).hexdigest()[:16]
        return f"{task_id}@{digest if self._transcript else 'start'}"

    def snapshot(self) -> dict[str, Any]:
        return {"task": self._task, "transcript": list(self._transcript), "observation": self._observation,
                "done": self._done, "solved": self._solved}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self._task = snapshot["task"]
        self._problem = MathProblem.from_payload(self._task.payload) if self._task else None
        self._transcript = list(snapshot["transcript"])
        self._observation = snapshot["observation"]
        self._done, self._solved = bool(snapshot["done"]), bool(snapshot["solved"])

    # -- oracle --------------------------------------------------------------------------------
    def _answer_action(self) -> str:
        return f"{_BOXED}{self._require().answer}}}"

    def _print_action(self) -> str:
        return f"```python\nprint({self._require().answer!r})\n```"

    def demonstration(self) -> list[str]:
        """The two-turn tool-use solution: code that prints the reference answer, then the answer."""
        return [self._print_action(), self._answer_action()]

    def shortest_solution_length(self) -> int | None:
        if self._done:
            return 0 if self._solved else None
        return 1

    def action_values(self, remaining: int) -> dict[str, float]:
        if self._done or remaining < 1:
            return {self._answer_action(): 0.0}
        return {self._answer_action(): 1.0, self._print_action(): GAMMA if remaining >= 2 else 0.0}

    def optimal_actions(self, remaining: int) -> list[str]:
        return [] if self._done else [self._answer_action()]

    def success_probability(self, remaining: int) -> float:
        if self._done:
            return 1.0 if self._solved else 0.0
        return 1.0 if remaining >= 1 else 0.0


@register_env("math-tir", MathTirConfig)
def _make_math_tir(config: MathTirConfig) -> MathTirEnv:
    return MathTirEnv(config)
