"""arlkit environments in TRL's ``GRPOTrainer`` (its ``environment_factory``; docs/integrations.md).

TRL (1.16) builds one environment object per rollout with ``factory()``, calls
``reset(**row)`` with the dataset row (the returned text is appended to the row's last user
message), exposes the object's public methods as tools the model calls, and adds ``get_reward()``
as a reward. :func:`environment_factory` returns such a class for any arlkit environment, with
one tool, ``act(action)``: one environment turn, whose result is the observation and the turn
counter. :func:`trl_dataset` builds the rows: a budget-aware system prompt per task, the task
itself, its turn budget (one fixed budget, or one drawn per task from several: BudgetMix's
one-budget-per-group, since TRL's group is the ``num_generations`` completions of one row).

What this path keeps: the environments, their parsing-free action semantics, announced budgets
(in the prompt, after every turn, and enforced: ``act`` refuses turns past the budget), the
episode reward, and the models it trains, which ``arlkit eval --policy hf:PATH`` measures with
Pass@(K,T). What it cannot: per-step advantages (GiGPO, EMPG) and arlkit's loss aggregation and
clipping variants (TRL computes one sequence-level GRPO advantage per completion), the step-level
diagnostics during training, and arlkit's resume of a killed run (TRL's checkpoints instead).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from arlkit.envs import make
from arlkit.envs.protocol import Task
from arlkit.rollout.prompts import counter_note

__all__ = ["TOOL_CHAT_TEMPLATE", "environment_factory", "trl_dataset", "use_tool_chat_template"]

TOOL_CHAT_TEMPLATE = (
    "{%- if tools -%}<|im_start|>system\nTools you can call:\n<tools>"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools><|im_end|>\n{% endif -%}"
    "{%- for message in messages -%}<|im_start|>{{ message['role'] }}\n{{ message['content'] or '' }}"
    "{%- for call in (message['tool_calls'] if message['tool_calls'] is defined and message['tool_calls'] else []) -%}"
    "<tool_call>\n{\"name\": \"{{ call['function']['name'] }}\", \"arguments\": {{ call['function']['arguments'] | tojson }}}"
    "\n</tool_call>{%- endfor -%}<|im_end|>\n{% endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{% endif -%}"
)
"""A ChatML chat template that renders tools and tool calls the way TRL's Qwen parser reads them
(``<tool_call>`` JSON), for tokenizers like arlkit's tiny models' whose template ignores tools."""


def use_tool_chat_template(tokenizer: Any) -> Any:
    """Give ``tokenizer`` :data:`TOOL_CHAT_TEMPLATE` and TRL's parser of ``<tool_call>`` replies."""
    from trl import chat_template_utils

    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.response_template = chat_template_utils.qwen3_template
    return tokenizer


def _system_prompt(env_name: str, instruction: str, action_format: str, budget: int) -> str:
    return (
        f"You are an agent acting in the {env_name} environment under a finite interaction budget of {budget} "
        "turns. One turn is one call of the tool act, with one action as its argument; the tool returns the "
        "observation and the turns left. When the budget is spent the episode ends.\n\n"
        f"TASK-SPECIFIC INSTRUCTION:\n{instruction}\n\n"
        f"ACTION FORMAT:\nPass the action itself to act, without the tags the format below mentions. {action_format}"
    )


def trl_dataset(env_name: str, *, split: str = "train", n: int = 64, budget: int | Sequence[int] | None = None,
                seed: int = 0, **config: Any) -> Any:
    """A ``datasets.Dataset`` of ``n`` tasks of ``split``: ``prompt`` (a budget-aware system prompt
    and an opening user message; ``reset`` appends the first observation), ``task_id``,
    ``task_payload`` (JSON), ``budget`` and ``seed``. ``budget``: one budget for every row, several
    (one drawn per row, with ``seed``), or ``None`` for the family's T_max."""
    from datasets import Dataset

    env = make(env_name, **config)
    rng = np.random.default_rng(seed)
    choices = [env.t_max] if budget is None else ([budget] if isinstance(budget, int) else list(budget))
    if not choices or min(choices) < 1:
        raise ValueError(f"budgets must be >= 1, got {choices}")
    rows = []
    for i, task in enumerate(env.tasks(split, n)):
        env.reset(task, seed + i)
        text = env.prompt_text()
        turns = int(choices[int(rng.integers(len(choices)))])
        rows.append({
            "prompt": [{"role": "system", "content": _system_prompt(env_name, text.instruction, text.action_format, turns)},
                       {"role": "user", "content": "The episode starts. First observation:\n"}],
            "task_id": task.task_id, "task_payload": json.dumps(dict(task.payload)), "budget": turns, "seed": seed + i,
        })
    return Dataset.from_list(rows)


def environment_factory(env_name: str, **config: Any) -> type:
    """A class for ``GRPOTrainer(environment_factory=...)`` running ``env_name`` (module docstring);
    rows come from :func:`trl_dataset` with the same ``env_name`` and ``config``."""

    class ArlkitEnvironment:
        def __init__(self) -> None:
            self._env = make(env_name, **config)
            self._budget = self._env.t_max
            self._turns, self._return, self._success, self._over = 0, 0.0, False, False

        def reset(self, **row: Any) -> str:
            task = Task(str(row["task_id"]), json.loads(row["task_payload"]))
            self._budget = int(row.get("budget") or self._env.t_max)
            self._turns, self._return, self._success, self._over = 0, 0.0, False, False
            observation = self._env.reset(task, int(row.get("seed", 0)))
            return f"{observation}\n{counter_note(self._budget, 0)}"

        def act(self, action: str) -> str:
            """Take one turn in the environment: send one action and get the next observation.

            Args:
                action: The action, in the task's action format (for example Left, or one SQL query).
            """
            if self._over:
                return "The episode is over: no more turns."
            result = self._env.step(action if isinstance(action, str) else str(action))
            self._turns += 1
            self._return += float(result.reward)
            self._success = self._success or result.success
            self._over = result.done or self._turns >= self._budget
            ending = " The episode is over." if self._over else ""
            return f"{result.observation}\n{counter_note(self._budget, self._turns)}{ending}"

        def get_reward(self) -> float:
            return self._return

        @property
        def success(self) -> bool:
            """Whether the episode was solved."""
            return self._success

        @property
        def turns(self) -> int:
            """Turns taken."""
            return self._turns

    ArlkitEnvironment.__name__ = ArlkitEnvironment.__qualname__ = f"arlkit_{env_name.replace('-', '_')}"
    return ArlkitEnvironment
