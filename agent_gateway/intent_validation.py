"""What an extracted intent may be: one short line of words, never structure.

The intent is first normalised by :mod:`control_plane.intent_text` (NFKC, invisible
characters removed, mixed-script words mapped to their Latin look-alikes, white space
collapsed): the rules below read the normalised text, which is what is forwarded. An intent
that breaks a rule is refused with the rule's reason and never forwarded. The rules, in the
order they are checked:

- ``empty``: nothing left once normalised (the message asked for no product);
- ``too_long``: more than ``max_chars`` characters once normalised (120 by default), or,
  before it is normalised at all, more than :data:`RAW_FACTOR` times ``max_chars`` as
  received (1,920 by default; see :func:`validate_intent`);
- ``multiline``: the intent as produced holds a line break or another control character
  (format characters such as a zero-width space are removed, not refused);
- ``structure``: braces, brackets, angle brackets, backticks or a JSON-looking ``"key":``;
- ``field_syntax``: ``word:value`` query-string syntax (``brand:acme``, ``price:<3``);
- ``operators``: upper-case ``AND``/``OR``/``NOT``, ``&&``, ``||``;
- ``url``: ``http://``, ``https://`` or ``www.``;
- ``instruction``: the intent reads like an instruction to the system (the input
  guardrails' ``ignore_instructions``, ``system_prompt`` and ``role_play`` heuristics).

Language is kept: nothing is translated or case-folded here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_gateway.guardrails import INJECTION_PATTERNS
from control_plane.intent_text import NormalisedIntent, normalise_intent

_MULTILINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("structure", re.compile(r"[{}\[\]<>`]|\"\s*:"), "the intent contains structure (JSON, markup)"),
    ("url", re.compile(r"\bhttps?://|\bwww\.", re.IGNORECASE), "the intent contains a URL"),
    ("field_syntax", re.compile(r"\b[\w.]+:\S"), "the intent contains field:value query syntax"),
    ("operators", re.compile(r"\b(AND|OR|NOT)\b|&&|\|\|"), "the intent contains query operators"),
)
_INSTRUCTION = tuple(p for flag, p in INJECTION_PATTERNS
                     if flag in ("ignore_instructions", "system_prompt", "role_play"))

RAW_FACTOR = 16
"""how many times its bound an intent may be as received. Normalising shrinks a text by
composing characters (at most 4 code points make one: U+1FAF, and 3 a Hangul syllable) and
by removing invisible characters and runs of white space: an intent written decomposed and
loosely spaced is a few times its normalised length, never 16 times; what is past that is
padding, refused before any of it is normalised (ADR 0058)"""


@dataclass(frozen=True)
class Verdict:
    intent: str | None
    """the intent to forward (normalised), or ``None`` when refused"""
    code: str | None = None
    reason: str | None = None
    normalisation: NormalisedIntent | None = None
    """what normalising the intent as produced did"""

    @property
    def accepted(self) -> bool:
        return self.intent is not None


def validate_intent(raw: str, *, max_chars: int = 120) -> Verdict:
    """The verdict on an intent as produced (the rules of the module's docstring). An intent
    of more than ``RAW_FACTOR * max_chars`` characters as received is refused ``too_long``
    without being normalised: that costs time in proportion to its size, and the MCP tool's
    argument has no other bound (a JSON-RPC message of any length)."""
    if len(raw) > RAW_FACTOR * max_chars:
        return Verdict(None, "too_long",
                       f"the intent has {len(raw)} characters as received (limit {RAW_FACTOR * max_chars})")
    normalised = normalise_intent(raw)
    intent = normalised.text
    if not intent:
        return Verdict(None, "empty", "the message asks for no product", normalised)
    if len(intent) > max_chars:
        return Verdict(None, "too_long", f"the intent has {len(intent)} characters (limit {max_chars})",
                       normalised)
    if _MULTILINE.search(raw.strip(" \t")):
        return Verdict(None, "multiline", "the intent is not one line", normalised)
    for code, pattern, reason in _RULES:
        if pattern.search(intent):
            return Verdict(None, code, reason, normalised)
    if any(p.search(intent) for p in _INSTRUCTION):
        return Verdict(None, "instruction", "the intent reads like an instruction, not a product search",
                       normalised)
    return Verdict(intent, normalisation=normalised)
