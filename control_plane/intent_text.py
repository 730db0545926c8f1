"""Intent text: the one normaliser every intent and every trigger phrase goes through.

:func:`normalise_intent` is applied at each boundary where text enters the pipeline
(``/v1/search`` and ``/v1/compile``, the agent gateway's messages and extracted intents,
the MCP tool, policy tests, replay) and to each policy's trigger phrases when they are
compiled into percolator queries, so both sides of a match went through the same steps:

1. **NFKC**: compatibility forms fold (fullwidth ``\uff57``, mathematical ``\U0001d430``,
   ligatures ``\ufb01`` are ``w``, ``w``, ``fi``) and accents compose (``é`` is one code
   point, as the engine's folding expects);
2. **invisible characters removed**: control characters other than white space (NUL,
   BEL, ...), format characters (category Cf: zero-width space and joiners, the byte
   order mark, bidi embeddings, overrides and isolates, the soft hyphen), private-use
   code points, lone surrogates, unassigned code points, and the default-ignorable marks
   and fillers that are not Cf (variation selectors, the combining grapheme joiner,
   Hangul fillers). They are removed, not turned into spaces: ``pea\\u200bnuts`` is
   ``peanuts`` on screen, so it is ``peanuts`` here;
3. **mixed-script words mapped to Latin look-alikes**: a word (letters, digits and marks,
   with inner apostrophes and full stops, as the engine's tokenizer reads one) whose
   letters come from more than one script -- beyond what TR39's *highly restrictive* level
   allows (Latin with Han, Hiragana, Katakana, Bopomofo or Hangul) -- has each letter of
   another script that the Unicode TR39 confusables data (``confusable-homoglyphs``) lists
   as a look-alike of a Latin letter replaced by that letter: ``w\u0456thout`` (a Cyrillic
   ``i``) is ``without``, ``arachid\u0435`` (a Cyrillic ``e``) is ``arachide``. A word
   written in a single script (French ``thé``, Russian ``чай``, Greek ``τσάι``) is kept as
   it is: nothing a real word spells is rewritten;
4. NFKC again (a mapped letter may compose with a following accent), then white space
   collapsed and the ends trimmed.

The result is idempotent (``normalise(normalise(x)) == normalise(x)``). See
``docs/adr/0008-intent-normalisation.md`` for why the skeleton is not applied to whole
intents.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from confusable_homoglyphs import categories, confusables

#: categories removed outright (``Cc`` only when it is not white space)
_REMOVED_CATEGORIES = frozenset({"Cf", "Co", "Cs", "Cn"})
#: default-ignorable code points outside ``Cf`` / ``Cc``, by their Unicode names
_IGNORABLE_NAMES = re.compile(r"VARIATION SELECTOR|^COMBINING GRAPHEME JOINER$|HANGUL (?:\w+ )?FILLER")
#: scripts that never decide whether a word mixes scripts (digits, punctuation, accents)
_NEUTRAL_SCRIPTS = frozenset({"COMMON", "INHERITED", "Unknown"})
#: script sets TR39's "highly restrictive" level accepts within one word
_ALLOWED_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)


MAX_INTENT = 512
"""characters a search intent may have, as received and once normalised: NFKC expands
compatibility characters (U+FDFA is 18 characters and four words), so a bound on the text
received alone let 512 of them become 9,216 characters for the engine to search"""


def too_long(normalised: str) -> str | None:
    """Why a normalised intent is longer than :data:`MAX_INTENT`, or None when it is not."""
    if len(normalised) <= MAX_INTENT:
        return None
    return (
        f"intent has {len(normalised):,} characters once normalised (compatibility characters"
        f" such as \ufdfa expand); at most {MAX_INTENT}"
    )


@dataclass(frozen=True)
class NormalisedIntent:
    """An intent after :func:`normalise_intent`, with what normalisation did to it."""

    text: str
    """what is matched, composed, searched and recorded"""
    changed: bool
    """``text`` differs from the text as received"""
    removed: int
    """how many invisible (control, format, private-use, ...) characters were removed"""
    mixed_script: tuple[str, ...]
    """the words that mixed scripts, as received (after NFKC), in order of appearance"""


def normalise_intent(raw: str) -> NormalisedIntent:
    """``raw`` normalised (see the module's docstring for the steps)."""
    if raw.isascii() and raw.isprintable():  # what the steps do to printable ASCII: this
        text = " ".join(raw.split())  # (NFKC leaves ASCII as it is; nothing is invisible)
        return NormalisedIntent(text=text, changed=text != raw, removed=0, mixed_script=())
    return _normalised(raw)


def _normalised(raw: str) -> NormalisedIntent:
    """The steps, one by one (:func:`normalise_intent` shortcuts printable ASCII)."""
    folded = unicodedata.normalize("NFKC", raw)
    visible = "".join(_visible(char) for char in folded)
    removed = len(folded) - len(visible)
    mixed: list[str] = []
    mapped = visible if visible.isascii() else _WORD.sub(lambda m: _latin_word(m.group(), mixed), visible)
    text = " ".join(unicodedata.normalize("NFKC", mapped).split())
    return NormalisedIntent(text=text, changed=text != raw, removed=removed, mixed_script=tuple(mixed))


@lru_cache(maxsize=4096)
def search_intent(raw: str) -> NormalisedIntent:
    """:func:`normalise_intent` of a search request's intent (at most 512 characters, the
    request's bound), remembered for the last 4096: a request's intent is normalised when
    it is validated and again when it is compiled, and a cached plan's intents repeat (the
    result is immutable). For search intents only: an agent's chat message holds what its
    redaction removes after normalising (e-mails, phone numbers), and is never kept."""
    return normalise_intent(raw)


def normalise(raw: str) -> str:
    """The normalised text only (trigger phrases, validation, lookups)."""
    return normalise_intent(raw).text


# --- invisible characters ---------------------------------------------------------


def _visible(char: str) -> str:
    """``char``, a space for white-space controls, or nothing for an invisible character."""
    if char.isascii():
        if char.isprintable():
            return char
        return " " if char.isspace() else ""
    category = unicodedata.category(char)
    if category == "Cc":
        return " " if char.isspace() else ""
    if category in _REMOVED_CATEGORIES:
        return ""
    if category in ("Mn", "Lo") and _IGNORABLE_NAMES.search(unicodedata.name(char, "")):
        return ""
    return char


# --- mixed-script words ------------------------------------------------------------

#: a word, as the engine's standard tokenizer (UAX #29) sees one: letters, digits and
#: combining marks, joined by an apostrophe, a full stop, a colon or a middle dot between
#: them (``d'orange`` is one word: a look-alike ``d`` cannot hide behind the apostrophe)
_LETTERS = r"(?:[^\W_]|[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f])+"
_WORD = re.compile(rf"{_LETTERS}(?:['\u2018\u2019.:\u00b7\u2024\ufe52\uff07\uff0e]{_LETTERS})*")


@lru_cache(maxsize=4096)
def _script(char: str) -> str:
    return str(categories.alias(char))


def is_mixed_script(word: str) -> bool:
    """The word's letters come from scripts TR39's highly restrictive level does not
    allow together (``w\u0456thout`` with a Cyrillic ``i``; not ``thé``, not ``東京タワー``)."""
    scripts = {_script(char) for char in word} - _NEUTRAL_SCRIPTS
    if len(scripts) < 2:
        return False
    return not any(scripts <= allowed for allowed in _ALLOWED_MIXES)


def _latin_word(word: str, mixed: list[str]) -> str:
    if word.isascii() or not is_mixed_script(word):
        return word
    mixed.append(word)
    return "".join(char if _script(char) in ("LATIN", *_NEUTRAL_SCRIPTS) else latin_look_alike(char)
                   for char in word)


@lru_cache(maxsize=4096)
def latin_look_alike(char: str) -> str:
    """The Latin letter the TR39 confusables data says ``char`` looks like, else ``char``.

    The data links each character to its prototype (Cyrillic ``\u0456`` -> ``i``, Cyrillic
    ``\u0406`` -> ``l``), so the candidates are the single Latin letters within two links
    (``\u0406`` -> ``l`` -> ``I``).
    Among them: the NFKC-stable ones of the same case as ``char``, ASCII first, then the
    lowest code point (deterministic for one version of the data).
    """
    data = confusables.confusables_data
    seen = {char}
    frontier = [char]
    candidates: set[str] = set()
    for _ in range(2):
        reached: list[str] = []
        for node in frontier:
            for glyph in data.get(node, ()):
                other = str(glyph["c"])
                if other in seen:
                    continue
                seen.add(other)
                reached.append(other)
                if len(other) == 1 and _script(other) == "LATIN":
                    candidates.add(other)
        frontier = reached
    usable = [c for c in candidates if unicodedata.normalize("NFKC", c) == c and _same_case(c, char)]
    if not usable:
        return char
    return min(usable, key=lambda c: (not c.isascii(), ord(c)))


def _same_case(candidate: str, char: str) -> bool:
    if char.isupper():
        return candidate.isupper()
    if char.islower():
        return candidate.islower()
    return True
