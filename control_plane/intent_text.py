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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import _CacheInfo, lru_cache

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


def refusal(normalised: str) -> str | None:
    """Why a search request refuses an intent that normalises to ``normalised`` (nothing
    visible, or :func:`too_long`), or None when it does not."""
    if not normalised:
        return "intent is empty once invisible characters and spaces are removed"
    return too_long(normalised)


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
    """The steps (:func:`normalise_intent` shortcuts printable ASCII). The per-character
    and per-word work is done once per *distinct* character and word, and the word step is
    skipped when the text's scripts cannot make a mixed word: NFKC expands a compatibility
    character up to 18 times (512 U+FDFA are 9,216 characters, 2,048 words), so a hostile
    intent refused for its normalised length cost 5.5 ms done character by character
    (bench/RESULTS.md, 2026-12-07). It gives what the steps give done one by one (the hostile
    tests hold it to that, ``tests/hostile/test_refused_intents.py``)."""
    folded = unicodedata.normalize("NFKC", raw)
    distinct = set(folded)
    invisible = _invisible_table(distinct)
    visible = folded.translate(invisible) if invisible else folded
    removed = len(folded) - len(visible)
    mixed: list[str] = []
    kept = (char for char in distinct if ord(char) not in invisible)
    mapped = visible if visible.isascii() or not _may_mix(kept) else _WORD.sub(_word_mapper(mixed), visible)
    text = " ".join(unicodedata.normalize("NFKC", mapped).split())
    return NormalisedIntent(text=text, changed=text != raw, removed=removed, mixed_script=tuple(mixed))


class SearchIntents:
    """:func:`normalise_intent` of search requests' intents (at most 512 characters, the
    request's bound), the accepted ones remembered for the last ``size``: a request's
    intent is normalised when it is validated and again when it is compiled, and a cached
    plan's intents repeat (the result is immutable).

    An intent the request refuses (:func:`refusal`) is answered and never remembered: it
    is never compiled, so remembering it saved nothing, and a stream of refused intents
    would have pushed the intents being served out of the cache.

    For search intents only: an agent's chat message holds what its redaction removes
    after normalising (e-mails, phone numbers), and is never kept."""

    def __init__(self, size: int) -> None:
        self._remembered = lru_cache(maxsize=size)(_accepted)

    def __call__(self, raw: str) -> NormalisedIntent:
        try:
            return self._remembered(raw)
        except _Refused as refused:  # (lru_cache keeps no call that raises)
            return refused.normalised

    def cache_info(self) -> _CacheInfo:
        return self._remembered.cache_info()

    def cache_clear(self) -> None:
        self._remembered.cache_clear()


class _Refused(Exception):
    def __init__(self, normalised: NormalisedIntent) -> None:
        super().__init__(normalised.text[:40])
        self.normalised = normalised


def _accepted(raw: str) -> NormalisedIntent:
    """``raw`` normalised; raises :class:`_Refused` (with it) when a request refuses it."""
    normalised = normalise_intent(raw)
    if refusal(normalised.text) is not None:
        raise _Refused(normalised)
    return normalised


search_intent = SearchIntents(4096)
"""the process's search intents (:class:`SearchIntents`)"""


def normalise(raw: str) -> str:
    """The normalised text only (trigger phrases, validation, lookups)."""
    return normalise_intent(raw).text


# --- invisible characters ---------------------------------------------------------


def _invisible_table(chars: Iterable[str]) -> dict[int, str]:
    """A :meth:`str.translate` table for a text of ``chars``: each character that
    :func:`_visible` changes, to what it becomes (built per text: nothing is kept)."""
    return {ord(char): seen for char in chars if (seen := _visible(char)) != char}


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


def _may_mix(chars: Iterable[str]) -> bool:
    """Some word of a text of ``chars`` could mix scripts: the characters come from scripts
    :func:`is_mixed_script` would call mixed (a word's scripts are a subset of its text's,
    so when the text's do not mix, no word's do)."""
    scripts = {_script(char) for char in chars} - _NEUTRAL_SCRIPTS
    if len(scripts) < 2:
        return False
    return not any(scripts <= allowed for allowed in _ALLOWED_MIXES)


def _word_mapper(mixed: list[str]) -> Callable[[re.Match[str]], str]:
    """The replacement :data:`_WORD` substitutes with: :func:`_latin_word`, once per
    distinct word of one text (a mixed word is appended to ``mixed`` at each occurrence)."""
    done: dict[str, tuple[str, bool]] = {}

    def mapped(match: re.Match[str]) -> str:
        word = match.group()
        known = done.get(word)
        if known is None:
            found: list[str] = []
            known = done[word] = (_latin_word(word, found), bool(found))
        if known[1]:
            mixed.append(word)
        return known[0]

    return mapped


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
