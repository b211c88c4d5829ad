"""Token ids of chat prompts and reply texts, rendered the one way arlkit renders them (the tokenizer's
chat template, then the tokenizer without added special tokens): the ``hf`` backend samples from these
ids and the trainer scores them, so both must agree token for token."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from arlkit.policies.protocol import Message

__all__ = ["ChatTokens"]


class ChatTokens:
    """Token ids of chat prompts and texts, for one tokenizer (with a chat template)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")  # the unknown token's id when there is none
        if im_end == tokenizer.unk_token_id:
            im_end = None
        self.eos_ids: frozenset[int] = frozenset(
            i for i in (tokenizer.eos_token_id, im_end) if isinstance(i, int) and i >= 0
        )
        """Tokens that end a turn: the tokenizer's end-of-sequence token and ChatML's ``<|im_end|>``."""
        pad = next((i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id) if isinstance(i, int)), 0)
        self.pad_id: int = pad
        """Padding: the tokenizer's pad token, else its end-of-sequence token, else 0."""

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text ending with the assistant header."""
        return str(self.tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                      add_generation_prompt=True))

    def ids(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the rendered prompt."""
        return self.ids(self.render(messages))
