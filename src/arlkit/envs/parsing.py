"""Extracting the action from a model reply (``<think>...</think><action>...</action>``).

Model output is untrusted: these functions never raise, whatever the input.
"""

from __future__ import annotations

import re

from arlkit.envs.protocol import ParsedAction

__all__ = ["parse_tagged_action", "quote", "valid_utf8"]

_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_OPEN_ACTION = re.compile(r"<action>", re.IGNORECASE)
_THINK = re.compile(r"<think>", re.IGNORECASE)
_STRICT = re.compile(r"\s*<think>.*?</think>\s*<action>.*?</action>\s*", re.DOTALL | re.IGNORECASE)


def valid_utf8(text: str) -> tuple[str, int]:
    """``(text, replaced)``: ``text`` with every code point UTF-8 cannot encode replaced by U+FFFD.

    Python strings may hold surrogates (a JSON ``"\\ud800"`` decodes to one); a lone surrogate
    becomes U+FFFD and counts in ``replaced``; a high/low pair becomes the character it encodes
    (UTF-16 semantics) and does not count.
    """
    if text.isascii():
        return text, 0
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return fixed, fixed.count("\ufffd") - text.count("\ufffd")
    return text, 0


def quote(text: str, limit: int = 80) -> str:
    """A short, printable rendering of untrusted text for observations and logs."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text[: limit + 1])
    return repr(clean[:limit] + ("..." if len(text) > limit else ""))


def parse_tagged_action(reply: str) -> ParsedAction:
    """The content of the single ``<action>`` tag of ``reply``.

    A reply with no complete action tag, an empty action, or several action tags yields no action
    (the step is invalid). ``strict_format`` is true only when the whole reply is exactly one
    ``<think>`` block followed by one ``<action>`` block (ARLArena's strict format). The action is
    valid UTF-8 (see :func:`valid_utf8`), so environments can encode it for programs and queries.
    """
    if not isinstance(reply, str):
        return ParsedAction(None, "the reply is not text")
    found = _ACTION.findall(reply)
    if not found:
        return ParsedAction(None, "no <action>...</action> tag found")
    if len(found) > 1 or len(_OPEN_ACTION.findall(reply)) > 1:
        return ParsedAction(None, f"{len(found)} <action> tags found; write exactly one action per turn")
    action = valid_utf8(found[0].strip())[0]
    if not action:
        return ParsedAction(None, "the <action> tag is empty")
    strict = bool(_STRICT.fullmatch(reply)) and len(_THINK.findall(reply)) == 1
    return ParsedAction(action, None, strict)
