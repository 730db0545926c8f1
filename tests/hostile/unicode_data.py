"""Hostile characters for the hostile-input tests, derived from the Unicode data Python and
the normaliser's TR39 package ship (no hand-written table)."""

from __future__ import annotations

import sys
import unicodedata
from collections import defaultdict

from confusable_homoglyphs import confusables

from control_plane.intent_text import is_mixed_script, latin_look_alike

#: every assigned format character (Cf: zero-width, joiners, BOM, bidi controls, soft
#: hyphen, ...), every control character that is not white space (NUL, BEL, ESC, DEL, ...),
#: and the variation selectors and combining grapheme joiner
FORMAT_AND_CONTROL: tuple[str, ...] = tuple(
    char
    for char in map(chr, range(sys.maxunicode + 1))
    if (category := unicodedata.category(char)) == "Cf"
    or (category == "Cc" and not char.isspace())
    or (category == "Mn" and ("VARIATION SELECTOR" in unicodedata.name(char, "")
                              or unicodedata.name(char, "") == "COMBINING GRAPHEME JOINER"))
)


def _look_alikes() -> dict[str, tuple[str, ...]]:
    """Latin letter -> the letters of other scripts the TR39 data says look like it."""
    found: defaultdict[str, list[str]] = defaultdict(list)
    for char in confusables.confusables_data:
        if len(char) != 1 or not unicodedata.category(char).startswith("L"):
            continue
        if unicodedata.normalize("NFKC", char) != char:
            continue
        latin = latin_look_alike(char)
        if latin != char and latin.isascii() and is_mixed_script(f"{latin}{char}"):
            found[latin].append(char)
    return {latin: tuple(sorted(chars)) for latin, chars in sorted(found.items())}


#: ASCII letter -> look-alikes from other scripts (Cyrillic, Greek, Armenian, Cherokee, ...)
LOOK_ALIKES: dict[str, tuple[str, ...]] = _look_alikes()
