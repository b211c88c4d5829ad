"""A test double for tool calling through ``arlkit serve``: the nano model with a forward hook that
forces its replies token by token. A prompt that holds a tool result gets :data:`ANSWER`, any other
prompt :data:`CALL` (a ``<tool_call>`` block calling ``add(1, 2)``). The server renders, samples,
parses and answers as it does for any model; only the logits are scripted. Every prompt the model
encodes is kept (decoded) in ``prompts``, so a test can check what the chat template rendered."""

from __future__ import annotations

from typing import Any

import torch

CALL = '<tool_call>\n{"name": "add", "arguments": {"x": 1, "y": 2}}\n</tool_call><|im_end|>'
ANSWER = "The sum is 3.<|im_end|>"
ADD_TOOL = {"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                   "required": ["x", "y"]}}}


class ScriptedReplies:
    """Forces ``model``'s replies (see the module docstring) while :attr:`enabled`; one request at a time."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.call = tokenizer(CALL, add_special_tokens=False)["input_ids"]
        self.answer = tokenizer(ANSWER, add_special_tokens=False)["input_ids"]
        self.enabled = False
        self.prompts: list[str] = []
        self._plan: list[int] = []
        self._next: tuple[int, int] | None = None  # (token forced last, its position): a decode step feeds it back
        self._step = 0
        self._handle = model.register_forward_hook(self._hook, with_kwargs=True)

    def remove(self) -> None:
        self._handle.remove()

    def _hook(self, module: Any, args: Any, kwargs: dict[str, Any], output: Any) -> Any:
        if not self.enabled:
            return output
        ids, positions = kwargs["input_ids"], kwargs.get("position_ids")
        last = int(positions[0, -1]) if positions is not None else ids.shape[1] - 1
        if self._next is None or ids.shape[1] != 1 or (int(ids[0, -1]), last) != self._next:
            text = self.tokenizer.decode(ids[0].tolist())  # a new prompt (its uncached part)
            self.prompts.append(text)
            self._plan = self.answer if "<|im_start|>tool" in text else self.call
            self._step = 0
        token = self._plan[min(self._step, len(self._plan) - 1)]
        self._step += 1
        self._next = (token, last + 1)
        logits = output.logits
        forced = torch.full_like(logits[:, -1, :], -1e4)
        forced[:, token] = 0.0
        logits[:, -1, :] = forced
        return output
