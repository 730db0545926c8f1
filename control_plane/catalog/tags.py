"""Allergen, trace and label tags, and the diet flags derived from labels.

Only what Open Food Facts declares is kept: nothing is inferred from ingredient text.
Allergens and traces are normalised to the EU's fourteen allergen tags without the
``en:`` prefix (``peanuts``, ``milk``, ``gluten``, ``nuts``...). A declared tag in another
language or a known misspelling is mapped by :data:`ALLERGEN_ALIASES`; any other tag
(``fr:amidon``, ``en:what``) is dropped and counted in the derivation report.
"""

from __future__ import annotations

#: The EU allergen list (Regulation 1169/2011, annex II), as Open Food Facts spells it.
ALLERGENS: frozenset[str] = frozenset({
    "celery", "crustaceans", "eggs", "fish", "gluten", "lupin", "milk", "molluscs",
    "mustard", "nuts", "peanuts", "sesame-seeds", "soybeans", "sulphur-dioxide-and-sulphites",
})

#: Declared tags that mean an allergen under another spelling.
ALLERGEN_ALIASES: dict[str, tuple[str, ...]] = {
    "en:tree-nuts": ("nuts",),
    "en:suplhites": ("sulphur-dioxide-and-sulphites",),
    "en:wheat-and-soy": ("gluten", "soybeans"),
    "fr:autres-fruits-a-coque": ("nuts",),
    "fr:peut-contenir-des-traces-de-gluten": ("gluten",),
    "es:clara-de-huevo": ("eggs",),
    "de:butterol": ("milk",),
    "de:gerstenmalz": ("gluten",),
    "de:roggenvollkornmehl": ("gluten",),
    "de:weizenmaltodextrin": ("gluten",),
}

#: Label tags in other languages (or misspelt) that mean a label we keep.
LABEL_ALIASES: dict[str, str] = {
    "fr:ab-agriculture-biologique": "organic",
    "fr:aoc": "pdo",
    "fr:afdiag": "gluten-free",
    "en:gluen-free": "gluten-free",
    "en:eu-organic": "organic",
    "en:usda-organic": "organic",
    "en:fairtrade-international": "fair-trade",
    "en:fair-trade-usa": "fair-trade",
    "en:european-vegetarian-union": "vegetarian",
}

#: Diet flag -> the labels that grant it. A vegan label also makes a product vegetarian.
DIET_LABELS: dict[str, frozenset[str]] = {
    "gluten-free": frozenset({"gluten-free", "no-gluten"}),
    "organic": frozenset({"organic"}),
    "palm-oil-free": frozenset({"palm-oil-free", "no-palm-oil"}),
    "vegan": frozenset({"vegan"}),
    "vegetarian": frozenset({"vegetarian", "vegan"}),
}


def split_tags(value: str) -> list[str]:
    return [t.strip() for t in value.split(",") if t.strip()]


def allergen_tags(value: str) -> tuple[tuple[str, ...], list[str]]:
    """(sorted allergens, dropped tags) of an ``allergens_tags`` or ``traces_tags`` cell."""
    kept: set[str] = set()
    dropped: list[str] = []
    for tag in split_tags(value):
        if tag in ALLERGEN_ALIASES:
            kept.update(ALLERGEN_ALIASES[tag])
        elif tag.startswith("en:") and tag[3:] in ALLERGENS:
            kept.add(tag[3:])
        else:
            dropped.append(tag)
    return tuple(sorted(kept)), dropped


def label_tags(value: str) -> tuple[str, ...]:
    """Sorted labels: ``en:`` tags without the prefix, plus what :data:`LABEL_ALIASES` maps."""
    kept: set[str] = set()
    for tag in split_tags(value):
        if tag.startswith("en:"):
            kept.add(tag[3:])
        if tag in LABEL_ALIASES:
            kept.add(LABEL_ALIASES[tag])
    return tuple(sorted(kept))


def diet_flags(labels: tuple[str, ...]) -> tuple[str, ...]:
    """Sorted diet flags the labels grant (see :data:`DIET_LABELS`)."""
    present = set(labels)
    return tuple(sorted(flag for flag, grants in DIET_LABELS.items() if present & grants))
