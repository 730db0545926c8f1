"""The deterministic extractor used when no model is configured (or as its fallback).

It removes greetings, politeness and filler in English and French, then the articles left
at the start, and keeps everything else in the shopper's words and language::

    "Bonjour, je cherche du chocolat pas cher sans arachide s'il vous plait"
        -> "chocolat pas cher sans arachide"
    "Hi! I'm looking for some cheap chocolate please" -> "cheap chocolate"

Politeness is matched in the spellings shoppers type: "s'il vous plaît", "s il vous plait",
"sil vous plait", "s'il-vous-plaît", "svp", "s.v.p", "stp", "merci (d'avance)", "bonjour",
"bjr"...; "please", "pls", "thanks (in advance)", "thx"... (typographic apostrophes are
plain apostrophes first).

It reads one message; conversation history is ignored (a follow-up such as "cheaper ones"
stays what it is). Punctuation other than decimal separators and hyphens inside words
becomes a space, and the guardrails' redaction placeholders (``[email]``, ``[phone]``) are
dropped: they are not part of what the shopper wants.
"""

from __future__ import annotations

import re
import unicodedata

_E = r"[eéèê]"
_I = r"[iî]"

#: filler phrases, removed wherever they stand (longest first within each language)
_FILLER_EN = (
    r"good (?:morning|afternoon|evening|day)", r"hello there", r"hi there", r"hey there",
    r"thank (?:you|u)(?: very much| so much)?(?: in advance)?", r"thanks(?: a lot)?(?: in advance)?",
    r"many thanks", r"cheers", r"thx", r"(?:kind |best )?regards",
    r"i(?:'m| am) (?:looking|searching|hunting|shopping) for", r"(?:looking|searching) for",
    r"i(?:'d| would) (?:like|love)(?: to (?:buy|find|get|have|see))?",
    r"i (?:want|need)(?: to (?:buy|find|get|see))?", r"i(?:'m| am) after",
    r"(?:could|can|would|will) you(?: please)?(?: (?:show|find|get|give|recommend|suggest)(?: me)?)?",
    r"(?:please )?(?:show|find|get|give|recommend|suggest) me",
    r"help me (?:find|get|choose)", r"do you (?:have|sell|carry)(?: any)?",
    r"have you got(?: any)?", r"(?:is|are) there(?: any)?", r"any chance of",
    r"please", r"pls", r"plz", r"kindly", r"for me", r"if possible", r"if you can",
    r"hi", r"hello", r"hey", r"dear", r"ok", r"okay", r"well", r"um+", r"uh+", r"hmm+",
    r"maybe", r"perhaps", r"just", r"actually", r"something like",
)
_FILLER_FR = (
    rf"s(?:'|\s)?il[\s-](?:vous|te)[\s-]pla{_I}t", r"svp", r"stp", r"s v p", r"s t p",
    r"merci(?: beaucoup| bien)?(?: d'avance| par avance)?", r"je vous remercie(?: d'avance)?",
    rf"bonne (?:journ{_E}e|soir{_E}e)", r"cordialement",
    r"bonjour", r"bonsoir", r"salut", r"coucou", r"hello", r"bjr", r"slt",
    r"je (?:re)?cherche", r"je voudrais(?: acheter| trouver| avoir)?",
    r"j'aimerais(?: acheter| trouver| avoir)?",
    r"je veux(?: acheter| trouver)?", r"il me faut", r"j'ai besoin d'", r"j'ai besoin de",
    r"est-ce que vous avez", r"avez-vous", r"vous avez", r"auriez-vous", r"as-tu", r"tu as",
    r"(?:pourriez|pouvez)-vous(?: me)?(?: (?:montrer|trouver|proposer|conseiller))?",
    r"(?:montrez|trouvez|proposez|conseillez)-moi", r"je souhaite(?: acheter| trouver)?",
    r"quelque chose comme", rf"peut-{_E}tre", r"euh+", r"alors", r"bon",
)


def _phrases(*alternatives: str) -> re.Pattern[str]:
    """Any of ``alternatives`` as whole words (a phrase ending with an apostrophe, ``d'``,
    may run into the next word)."""
    return re.compile(r"(?<![\w'-])(?:" + "|".join(alternatives) + r")(?:(?<=')|(?![\w'-]))", re.IGNORECASE)


#: redaction placeholders the input guardrails leave (``[email]``, ``[phone]``): not wishes
_PLACEHOLDER = re.compile(r"\[(?:email|phone)\]")
_FILLER = _phrases(*_FILLER_EN, *_FILLER_FR)
#: the filler of one language (``language.language_of`` counts them)
FILLER_EN = _phrases(*_FILLER_EN)
FILLER_FR = _phrases(*_FILLER_FR)
#: articles and quantifiers dropped only at the start of what is left
_LEADING = re.compile(
    r"^(?:(?:some|any|a few|a|an|the|du|de la|de|des|un|une|le|la|les|quelques|un peu de)(?:\s+|$)"
    r"|(?:de l'|d'|l')\s*)+",
    re.IGNORECASE,
)
#: apostrophes as shoppers' keyboards type them: typographic, modifier letter, accents
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00b4": "'", "`": "'"})
_PUNCT = re.compile(r"(?<!\d)[.,]|[.,](?!\d)|[!?;:()\"«»…]|(?<!\w)-|-(?!\w)")


def normalise(text: str) -> str:
    """NFC, typographic apostrophes made plain, punctuation made spaces, spaces collapsed."""
    text = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    return " ".join(_PUNCT.sub(" ", text).split())


def extract_by_rules(message: str) -> str:
    """The shopper's intent: the message without greetings, politeness and filler."""
    text = normalise(_PLACEHOLDER.sub(" ", message))
    previous = None
    while previous != text:
        previous = text
        text = " ".join(_FILLER.sub(" ", text).split())
        text = _LEADING.sub("", text).strip()
    return text.strip(" '-")
