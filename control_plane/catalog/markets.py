"""Markets: the ``countries`` column of Open Food Facts, normalised to short codes.

Codes are ISO 3166-1 alpha-2 in lowercase, except the United Kingdom, which the demo
writes ``uk`` (as shoppers and merchandisers do) rather than ISO's ``gb``.
"""

from __future__ import annotations

from control_plane.catalog.product import Language
from control_plane.catalog.text import fold

#: Folded country spellings found in the source -> market code. Unknown spellings are
#: dropped (the derivation reports none on the shipped sample).
COUNTRY_MARKETS: dict[str, str] = {
    "united states": "us", "united-states": "us", "etats-unis": "us", "en:us": "us",
    "vereinigte staaten von amerika": "us", "usa": "us",
    "france": "fr", "en:france": "fr", "en:fr": "fr", "francia": "fr", "frankreich": "fr",
    "united kingdom": "uk", "royaume-uni": "uk", "en:gb": "uk", "en:uk": "uk",
    "suisse": "ch", "switzerland": "ch", "schweiz": "ch", "en:ch": "ch",
    "canada": "ca", "belgique": "be", "belgium": "be",
    "deutschland": "de", "germany": "de", "allemagne": "de", "en:de": "de",
    "australia": "au", "australie": "au", "mexico": "mx",
    "espagne": "es", "espana": "es", "spain": "es", "italie": "it", "italy": "it",
    "japon": "jp", "japan": "jp", "pologne": "pl", "poland": "pl", "russie": "ru",
    "grece": "gr", "roumanie": "ro", "ireland": "ie", "irlande": "ie",
    "nouvelle-caledonie": "nc", "french polynesia": "pf", "polynesie francaise": "pf",
    "saint pierre and miquelon": "pm", "en:no": "no", "norway": "no",
    "العراق": "iq", "iraq": "iq",
}

#: The market a product gets when its countries say nothing we know.
DEFAULT_MARKET: dict[Language, str] = {"en": "us", "fr": "fr"}


def parse_markets(countries: str) -> tuple[str, ...]:
    """Market codes in source order, without duplicates; empty when none is known."""
    found: list[str] = []
    for part in countries.split(","):
        code = COUNTRY_MARKETS.get(fold(part).strip())
        if code and code not in found:
            found.append(code)
    return tuple(found)


def unknown_countries(countries: str) -> list[str]:
    """Spellings :func:`parse_markets` dropped (for the derivation report)."""
    parts = [p.strip() for p in countries.split(",")]
    return [p for p in parts if p and fold(p) not in COUNTRY_MARKETS]
