"""A verifiers (v1) tool-use taskset for the tests: multiply two numbers with the task's calculator
tool (a ``Toolset`` served per rollout); the plain ``SingleAgentEnv`` runs it. The reward is 1 when
the final reply holds the product after a tool call; a ``@vf.stop`` ends a run at the second tool call."""

from __future__ import annotations

import json
import re

import verifiers.v1 as vf

__all__ = ["MulTaskset"]


class Calculator(vf.Toolset[vf.ToolsetConfig, vf.State]):
    @vf.tool
    async def multiply(self, a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b


class MulData(vf.TaskData):
    a: int
    b: int


class MulTask(vf.Task[MulData, vf.State, vf.TaskConfig]):
    @classmethod
    def toolsets(cls, config):
        return [Calculator(vf.ToolsetConfig())]

    @vf.stop
    async def too_many_calls(self, trace: vf.Trace) -> bool:
        return len(trace.tool_messages) >= 2

    @vf.reward
    async def correct(self, trace) -> float:
        product = str(self.data.a * self.data.b)
        return float(bool(trace.tool_messages) and product in re.findall(r"\d+", trace.last_reply))


class MulTaskset(vf.Taskset[MulTask, vf.TasksetConfig]):
    def load(self):
        for i in range(6):
            a, b = 100 + 37 * i, 23 + 11 * i
            yield MulTask(MulData(name=f"mul{i}", prompt=f"What is {a} times {b}?", a=a, b=b), self.config.task)


class Caller:
    """A scripted arlkit policy: calls the tool with the prompt's numbers, then answers with its result
    (``--policy vf_calc:caller``)."""

    name = "caller"
    context_length = None

    def generate(self, requests):
        from arlkit.policies.protocol import Reply

        replies = []
        for request in requests:
            last = request.messages[-1]["content"]
            result = re.search(r"Tool result \(calculator_multiply\): (\d+)", last)
            if result:
                replies.append(Reply(f"<think>done</think><action>{result.group(1)}</action>"))
                continue
            a, b = re.findall(r"\d+", last)[:2]
            call = json.dumps({"name": "calculator_multiply", "arguments": {"a": int(a), "b": int(b)}})
            replies.append(Reply(f"<think>use the tool</think><action><tool_call>{call}</tool_call></action>"))
        return replies


def caller(arg, sampling, backend):
    return Caller()
