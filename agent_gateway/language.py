"""The shopper's language, French or English, so the deterministic answer speaks it.

A deterministic count, no model and no dictionary download. Each language scores:

- every greeting, politeness or filler phrase of that language the rules extractor knows
  (``bonjour``, ``je cherche``, ``s'il vous plait`` / ``hi``, ``I'm looking for``,
  ``please``): 2 points;
- every common function or shopping word of that language (``du``, ``sans``, ``pas``,
  ``cher`` / ``the``, ``without``, ``cheap``): 1 point;
- French only: every word with a French accent or cedilla (``crème``, ``pâtes``): 1 point.

French wins when it scores more than English; a tie (``chocolate``, ``tofu``) is English,
the language of the rest of the API.
"""

from __future__ import annotations

import re
from typing import Literal

from agent_gateway.rules_extractor import FILLER_EN, FILLER_FR, normalise

Language = Literal["en", "fr"]

_WORDS_FR = frozenset({
    "le", "la", "les", "l", "un", "une", "des", "du", "de", "d", "au", "aux", "et", "ou", "sans",
    "avec", "pour", "pas", "cher", "chers", "chère", "chères", "moins", "très", "je", "j", "moi",
    "vous", "nous", "est", "sont", "bon", "bonne", "quelque", "quelques", "qui", "que", "qu",
})
_WORDS_EN = frozenset({
    "the", "a", "an", "some", "any", "and", "or", "without", "with", "for", "cheap", "cheaper",
    "under", "less", "than", "more", "very", "i", "my", "you", "we", "is", "are", "good",
    "please", "want", "need", "looking",
})
_ACCENTED = re.compile(r"[àâäçéèêëîïôöùûüÿœæ]")
_WORD = re.compile(r"[^\W\d_]+")


def language_of(text: str) -> Language:
    """``fr`` when ``text`` reads as French, else ``en``."""
    plain = normalise(text)
    words = [w.casefold() for w in _WORD.findall(plain.replace("'", " "))]
    french = 2 * len(FILLER_FR.findall(plain)) + sum(w in _WORDS_FR for w in words)
    french += sum(bool(_ACCENTED.search(w)) for w in words)
    english = 2 * len(FILLER_EN.findall(plain)) + sum(w in _WORDS_EN for w in words)
    return "fr" if french > english else "en"
