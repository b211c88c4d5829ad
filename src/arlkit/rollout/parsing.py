"""Extracting the action from a model reply (``<think>...</think><action>...</action>``).

Model output is untrusted: these functions never raise, whatever the input.
"""

from __future__ import annotations

import re

from arlkit.envs.protocol import ParsedAction

__all__ = ["parse_tagged_action", "quote"]

_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_OPEN_ACTION = re.compile(r"<action>", re.IGNORECASE)
_THINK = re.compile(r"<think>", re.IGNORECASE)
_STRICT = re.compile(r"\s*<think>.*?</think>\s*<action>.*?</action>\s*", re.DOTALL | re.IGNORECASE)


def quote(text: str, limit: int = 80) -> str:
    """A short, printable rendering of untrusted text for observations and logs."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text[: limit + 1])
    return repr(clean[:limit] + ("..." if len(text) > limit else ""))


def parse_tagged_action(reply: str) -> ParsedAction:
    """The content of the single ``<action>`` tag of ``reply``.

    A reply with no complete action tag, an empty action, or several action tags yields no action
    (the step is invalid). ``strict_format`` is true only when the whole reply is exactly one
    ``<think>`` block followed by one ``<action>`` block (ARLArena's strict format).
    """
    if not isinstance(reply, str):
        return ParsedAction(None, "the reply is not text")
    found = _ACTION.findall(reply)
    if not found:
        return ParsedAction(None, "no <action>...</action> tag found")
    if len(found) > 1 or len(_OPEN_ACTION.findall(reply)) > 1:
        return ParsedAction(None, f"{len(found)} <action> tags found; write exactly one action per turn")
    action = found[0].strip()
    if not action:
        return ParsedAction(None, "the <action> tag is empty")
    strict = bool(_STRICT.fullmatch(reply)) and len(_THINK.findall(reply)) == 1
    return ParsedAction(action, None, strict)
