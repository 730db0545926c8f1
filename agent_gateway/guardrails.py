"""Input guardrails: what a user message goes through before anything logs it or a model
reads it.

1. size cap: a message longer than ``max_chars`` is refused (:class:`MessageTooLarge`);
2. the message is normalised by :mod:`control_plane.intent_text`, like every intent:
   NFKC, invisible characters (control, format, zero-width, bidi, private-use) removed,
   mixed-script words mapped to their Latin look-alikes, white space collapsed; the flags
   ``control_characters`` and ``mixed_script`` say when it had to. The size cap holds for
   the normalised text too: NFKC expands compatibility characters (U+3316 is six
   katakana), and the patterns below are quadratic in the length of one word (2,000 U+3316
   made a 12,000-character word that took 0.7 s to screen);
3. PII is redacted: e-mail addresses become ``[email]``, phone numbers (9 digits or more,
   with the usual separators) become ``[phone]``;
4. injection heuristics are recorded as ``flags``. They are evidence for the audit trail,
   never a defence: the defence is the air gap (the model only ever produces an intent
   string, which is validated and then governed like any other search).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from control_plane.intent_text import NormalisedIntent, normalise_intent

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<![\w.,])\+?\(?\d[\d\s().-]{7,}\d(?![\w]|[.,]\d)")

#: flag -> pattern (case-insensitive); the order is the order flags are reported in
INJECTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ignore_instructions", re.compile(
        r"\b(ignore|disregard|forget|override|bypass)\b.{0,40}\b(instructions?|rules?|prompts?|guidelines?)\b"
        r"|\b(ignor\w*|oubli\w*)\b.{0,40}\b(instructions?|consignes?|r[eè]gles?)\b",
        re.IGNORECASE)),
    ("system_prompt", re.compile(
        r"\b(system|developer)\s+(prompt|message|instructions?)\b|\bprompt\s+syst[eè]me\b|\bsystem\s*:",
        re.IGNORECASE)),
    ("role_play", re.compile(
        r"\byou\s+are\s+now\b|\bact\s+as\b|\bpretend\b|\brole[\s-]?play\b|\bjailbreak\b|\bDAN\b"
        r"|\bfais\s+semblant\b|\btu\s+es\s+maintenant\b|\bjoue\s+le\s+r[oô]le\b",
        re.IGNORECASE)),
    ("structured_input", re.compile(
        r"[{}\[\]]|\"\s*:|\b(match_all|bool|must_not|function_score|_source|query_string)\b"
        r"|\b\w+\.?\w*:\S",
        re.IGNORECASE)),
    ("boolean_operators", re.compile(r"\b(AND|OR|NOT)\b|&&|\|\|")),
    ("markup", re.compile(r"</?\w+[^>]*>|```", re.IGNORECASE)),
    ("url", re.compile(r"\bhttps?://|\bwww\.", re.IGNORECASE)),
)


class MessageTooLarge(ValueError):
    def __init__(self, length: int, limit: int, normalised: bool = False) -> None:
        once = " once normalised" if normalised else ""
        super().__init__(f"the message has {length} characters{once}; messages are limited to {limit}")
        self.length, self.limit = length, limit


@dataclass(frozen=True)
class Screened:
    """A message after the guardrails: safe to log and to send to the model."""

    text: str
    flags: tuple[str, ...]


def redact(text: str) -> tuple[str, tuple[str, ...]]:
    """E-mails and phone numbers replaced; the flags say what was redacted."""
    flags: list[str] = []
    redacted, emails = _EMAIL.subn("[email]", text)
    if emails:
        flags.append("pii_email")
    phones = 0

    def _phone(found: re.Match[str]) -> str:
        nonlocal phones
        if sum(ch.isdigit() for ch in found.group(0)) < 9:
            return found.group(0)
        phones += 1
        return "[phone]"

    redacted = _PHONE.sub(_phone, redacted)
    if phones:
        flags.append("pii_phone")
    return redacted, tuple(flags)


def normalisation_flags(normalised: NormalisedIntent) -> tuple[str, ...]:
    """``control_characters``: invisible characters were removed; ``mixed_script``: a word
    mixing scripts was mapped to its Latin look-alikes."""
    return (("control_characters",) if normalised.removed else ()) + (
        ("mixed_script",) if normalised.mixed_script else ()
    )


def injection_flags(text: str) -> tuple[str, ...]:
    return tuple(flag for flag, pattern in INJECTION_PATTERNS if pattern.search(text))


def screen(message: str, *, max_chars: int = 2000) -> Screened:
    if len(message) > max_chars:
        raise MessageTooLarge(len(message), max_chars)
    normalised = normalise_intent(message)
    if len(normalised.text) > max_chars:  # before any pattern reads it (module docstring)
        raise MessageTooLarge(len(normalised.text), max_chars, normalised=True)
    flags = list(normalisation_flags(normalised))
    cleaned, pii = redact(normalised.text)
    flags.extend(pii)
    flags.extend(injection_flags(cleaned))
    return Screened(text=cleaned, flags=tuple(flags))
