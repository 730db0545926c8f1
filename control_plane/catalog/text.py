"""Text cleaning, accent folding and the language decision for one product."""

from __future__ import annotations

import html
import re
import unicodedata

from control_plane.catalog.product import Language

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
#: Open Food Facts marks allergens in ingredient lists as ``_milk_``.
_ALLERGEN_MARK = re.compile(r"_([^_\s][^_]*?)_")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Function words and kitchen words that only one of the two languages uses. Matched on
#: folded (lowercase, accent-free) words; each hit scores one point for its language.
FRENCH_WORDS = _wordset(
    "le la les l de du des d au aux et avec sans pour sur en un une sel sucre lait "
    "fromage fromages yaourt yaourts vin vins biere bieres chocolat noir creme fraiche "
    "beurre jambon saucisse saucisson moutarde poulet porc boeuf oeufs farine pates "
    "nature bio frais fraise poire pomme pommes terre tomates jus epices herbes "
    "gratin brebis chevre vache lardons cuit cuite doux douce fume fumes ble"
)
ENGLISH_WORDS = _wordset(
    "the and with of for in style classic original french cheese cream bread dressing "
    "sauce vanilla chocolate milk butter sweet sour green beans fried potatoes onion "
    "dip creamer coffee toast sticks rolls mix drink ice soup seasoning spicy light "
    "organic natural premium red white wine beer peanuts soda sparkling cut crispy "
    "honey salad mustard yellow burnt truffles cookies baked"
)
#: Markets whose shoppers a tied language decision treats as French-speaking.
FRENCH_SPEAKING = frozenset({"fr", "be", "ch", "lu", "mc", "nc", "pf", "pm", "re"})


def clean_text(value: str) -> str:
    """Unescape HTML entities, drop OFF allergen underscores, collapse whitespace."""
    text = html.unescape(value)
    text = _ALLERGEN_MARK.sub(r"\1", text)
    return _SPACE.sub(" ", text).strip()


def fold(value: str) -> str:
    """Lowercase and strip accents (``Chocolat à l'Orange`` -> ``chocolat a l'orange``)."""
    decomposed = unicodedata.normalize("NFKD", value.replace("\u2019", "'"))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def words(value: str) -> list[str]:
    """Folded words; elided articles (``d'orange``) count as the article."""
    found: list[str] = []
    for word in _WORD.findall(fold(value)):
        head, _, tail = word.partition("'")
        found.append(head)
        if tail:
            found.append(tail)
    return found


def detect_language(title: str, generic_name: str, markets: tuple[str, ...]) -> Language:
    """``fr`` or ``en``, from the product's own words, then its first market.

    Score one point per French-only word and one per English-only word of the title and
    generic name, and two per accented letter (English product names here have none).
    The higher score wins; a tie goes to ``fr`` when the first market is French-speaking
    (``fr``, ``ch``, ``be``, ``ca``...), else ``en``.
    """
    text = f"{title} {generic_name}"
    tokens = words(text)
    french = sum(1 for w in tokens if w in FRENCH_WORDS)
    french += 2 * sum(1 for c in text if c in "éèêëàâçîïôûùœÉÈÊÀÂÇÎÔÛ")
    english = sum(1 for w in tokens if w in ENGLISH_WORDS)
    if french != english:
        return "fr" if french > english else "en"
    return "fr" if markets and markets[0] in FRENCH_SPEAKING else "en"

