"""Shopper language in matching: what a matched trigger captured, and where its words are.

The engine says *which* phrases of a policy occur in the intent and *where* (highlighted
ranges, one list per phrase: :func:`control_plane.matcher.match`). This module turns
those ranges into a :class:`Match`: the spans to consume and, for ``pattern`` and
``vocabulary`` triggers, the captured words. No word is matched here that the engine did
not find; the words *around* a cue are read off the intent.

Patterns (:class:`control_plane.policy.Pattern`) are cue groups and captures in order:

- a capture **after** its cue (``(without|sans) {item}``) takes the words that follow,
  a capture **before** it (``{item} (free|-free)``) the words that precede, a capture
  **between** two cues (``(between) {low} (and) {high}``) the words between them (the
  next cue must follow them directly);
- a capture's bounds: leading articles and determiners of every configured language are
  dropped (:data:`ARTICLES`, elided ``l'`` / ``d'`` too) and consumed with the cue; at
  most ``max_words`` words (``{item:2}``; default 3 after a cue, 1 before one); it stops
  at punctuation, at a conjunction or preposition of any configured language
  (:data:`STOPS`) and at the next cue that starts an occurrence of a pattern;
- **coordination**: a capture at either end of a pattern reads a list, "without X or Y",
  "without X and Y", "sans X ni Y", "no X, Y or Z", "X and Y free": one capture per item
  (same name; the rule applies to each) and the connectors are spans of the match, so
  none of the list stays in the residual. Commas alone do not make a list: a list ends
  with a word conjunction ("no nuts, 100 g" captures only "nuts");
- a cue written with a leading hyphen (``-free``) is a suffix: the engine also matches it
  at the end of a word (``sugarfree``, :func:`phrase_query`), and the word's stem is the
  capture before it;
- each pattern of a trigger binds its own capture names.

``unless`` phrases (any trigger kind) are highlighted like cues; a cue span inside one of
them is dropped, and a policy left with no span (or, for ``exact`` and ``always``, any
intent containing an unless phrase) does not match. Nothing is consumed for it.

A ``vocabulary`` trigger's phrases are its vocabulary's words (the loader fills them in):
each highlighted occurrence, longest first where two overlap, is one capture named after
the trigger's capture; a preposition right before it ("in black", "en noir",
:data:`VALUE_PREPOSITIONS`) is a span of the match, consumed with it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from control_plane.plan import CapturedText, Match, Span
from control_plane.policy import DEFAULT_MAX_WORDS, DEFAULT_MAX_WORDS_BEFORE, Pattern, Policy, Trigger

#: signs that belong to an amount ("$10", "10€", "₹500", "5%"): every Unicode currency sign
AMOUNT_SIGNS = "%" + "".join(
    sign for sign in map(chr, range(0x20A0, 0x20C1)) if unicodedata.category(sign) == "Sc"
) + "$£¥¢"
#: a word: letters, digits and amount signs, with inner apostrophes or hyphens and, between
#: digits, decimal or thousands separators ("l'huile", "10.50", "1,000", "$10", "10€"), and
#: the dot of an abbreviation of up to three letters before a number ("rs. 500");
#: combining accents stay inside a word; any other non-space character is punctuation and
#: ends a capture
WORD = re.compile(
    rf"(?:[^\W_]|[{AMOUNT_SIGNS}])"
    rf"(?:[^\W_]|[{AMOUNT_SIGNS}\u0300-\u036f]|['\u2019-](?=[^\W_])|(?<=\d)[.,](?=\d)"
    rf"|(?:(?<=\b[^\W\d_])|(?<=\b[^\W\d_]{{2}})|(?<=\b[^\W\d_]{{3}}))\.(?=\s*\d))*|\S"
)
#: quotes that may open a capture: 'sans "arachide"' captures arachide
OPENING_QUOTES = frozenset("\"'\u201c\u2018\u00ab\u201e")

def _listed(*groups: str) -> frozenset[str]:
    return frozenset(word for group in groups for word in group.split())


#: conjunctions that join the items of a list, in every configured language
CONJUNCTIONS = frozenset(
    ["and", "or", "nor", "&", "et", "ou", "ni", "y", "o", "e", "u", "und", "oder", "noch"]
)
#: words that open a list ("neither X nor Y", "ni X ni Y", "weder X noch Y")
LIST_OPENERS = frozenset(["neither", "either", "ni", "weder"])
#: words that end a capture: conjunctions and prepositions of every configured language
STOPS = CONJUNCTIONS | LIST_OPENERS | _listed(
    "but with for in at by on to from than that which",  # English
    "mais avec pour dans chez par sur en que qui",  # French
    "sin con para pero",  # Spanish
    "ohne mit fur aber",  # German
)
#: articles and determiners dropped at the start of a capture
ARTICLES = _listed(
    "a an the any some",  # English
    "le la les un une des du de aucun aucune",  # French
    "el los las unos unas del ningun ninguna",  # Spanish
    "der die das ein eine einen kein keine keinen",  # German
)
#: a preposition right before a vocabulary word belongs to it ("shoes in black", "en noir")
VALUE_PREPOSITIONS = frozenset({"in", "en"})
#: elided articles at the start of a word: "d'arachide", "l'huile"
_ELIDED = re.compile(r"^(?:[ldLD]|qu|QU)['\u2019](?=[^\W_])")
_LIST_COMMAS = frozenset({",", "/"})

Ranges = Sequence[tuple[int, int]]
#: phrase -> its highlighted ranges in the intent; ``""`` holds ranges of unknown phrases
PhraseRanges = Mapping[str, Ranges]


def fold(text: str) -> str:
    """Casefolded, accents stripped (``Für`` -> ``fur``)."""
    bare = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return bare.casefold()


def is_suffix(cue: str) -> bool:
    """A cue written ``-free``: it also matches at the end of a word (``sugarfree``)."""
    return cue.startswith("-") and len(cue.strip("-").strip()) > 0


def phrase_query(phrase: str, suffix: bool = False) -> dict[str, Any]:
    """The percolator query of one phrase over the intent. A suffix cue also matches the
    end of a word: a ``regexp`` over the indexed tokens, which the minimal stemmers may
    have cut a final letter from (``sugarless`` is indexed ``sugarles``, ``sugarfree``
    ``sugarfre``); the word's own text must still end with the suffix (:func:`resolve`)."""
    query: dict[str, Any] = {"match_phrase": {"intent": phrase}}
    stem = fold(phrase.strip("-").strip())
    if suffix and stem.isalpha():
        endings = [stem] + ([stem[:-1]] if len(stem) > 3 else [])
        regexp = {"regexp": {"intent": {"value": ".+(" + "|".join(endings) + ")"}}}
        return {"bool": {"should": [query, regexp], "minimum_should_match": 1}}
    return query


def trigger_cues(trigger: Trigger) -> tuple[str, ...]:
    """The phrases whose highlighted words are a trigger's spans (none for exact, always)."""
    if trigger.kind == "pattern":
        return tuple(sorted({cue for pattern in trigger.patterns for cue in pattern.cues}))
    if trigger.kind in ("phrase", "any", "vocabulary"):
        return tuple(trigger.values)
    return ()


def suffix_cues(triggers: Iterable[Trigger]) -> frozenset[str]:
    return frozenset(
        cue for t in triggers for p in t.patterns for cue in p.cues if is_suffix(cue)
    )


# --- spans ---------------------------------------------------------------------------


def spans_of(text: str, ranges: Iterable[tuple[int, int]]) -> list[Span]:
    """The spans ``ranges`` cover: overlapping ranges are one, and ranges with only white
    space between them merge (adjacent words)."""
    merged: list[list[int]] = []
    for start, end in sorted(ranges):
        if merged and (start <= merged[-1][1] or text[merged[-1][1] : start].strip() == ""):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [Span(start=s, end=e, text=text[s:e]) for s, e in merged]


def _span(text: str, start: int, end: int) -> Span:
    return Span(start=start, end=end, text=text[start:end])


def _inside(span: Span, others: Sequence[Span]) -> bool:
    return any(span.overlaps(other) for other in others)


# --- one policy ---------------------------------------------------------------------


def resolve(
    policy: Policy, intent: str, ranges: PhraseRanges, anchors: Sequence[Span], cache: dict[Any, Any]
) -> Match | None:
    """The match of ``policy`` from its phrases' highlighted ``ranges``, or None when its
    ``unless`` phrases cancel it. ``anchors``: every span that starts a pattern occurrence
    in this intent (captures stop there)."""
    trigger = policy.trigger
    unless = spans_of(intent, [r for p in trigger.unless for r in ranges.get(p, ())])
    if trigger.kind == "always":
        return None if unless else Match(policy_id=policy.id)
    if trigger.kind == "exact":
        if unless:
            return None
        return Match(policy_id=policy.id, spans=(_span(intent, 0, len(intent)),))
    cue_ranges = [r for p in (*trigger_cues(trigger), "") for r in ranges.get(p, ())]
    if not cue_ranges:  # nothing highlighted: the whole intent, as for exact
        return Match(policy_id=policy.id, spans=(_span(intent, 0, len(intent)),))
    spans = [s for s in spans_of(intent, cue_ranges) if not _inside(s, unless)]
    if not spans:  # every cue is inside an unless phrase
        return None
    if trigger.kind == "vocabulary":
        return _vocabulary_match(policy, intent, ranges, unless)
    if trigger.kind != "pattern":
        return Match(policy_id=policy.id, spans=tuple(spans))
    extra: list[Span] = []
    captures: list[CapturedText] = []
    for pattern in trigger.patterns:
        groups = [
            _cached_group(cache, intent, part.cues, ranges, unless) for part in pattern.parts if part.cues
        ]
        key = (pattern.source(), tuple(tuple((s.start, s.end) for s in g) for g in groups), tuple(anchors))
        if key not in cache:
            cache[key] = _occurrences(pattern, intent, groups, anchors)
        found_spans, found_captures = cache[key]
        extra.extend(found_spans)
        captures.extend(found_captures)
    if not extra:  # no occurrence starts here: only a later cue ("and" of "between ... and")
        return None
    all_spans = spans_of(intent, [(s.start, s.end) for s in extra])
    unique = {(c.name, c.span.start, c.span.end): c for c in captures}
    return Match(
        policy_id=policy.id,
        spans=tuple(all_spans),
        captures=tuple(unique[k] for k in sorted(unique, key=lambda k: (k[1], k[2], k[0]))),
    )


def anchors_of(found: Sequence[tuple[Policy, PhraseRanges]], intent: str) -> list[Span]:
    """The spans of the first cue group of every pattern of the matched policies: where a
    pattern occurrence may start, so where a capture of another one stops."""
    anchors: dict[tuple[int, int], Span] = {}
    seen: set[tuple[str, ...]] = set()
    for policy, ranges in found:
        for pattern in policy.trigger.patterns:
            first = next(part for part in pattern.parts if part.cues)
            if "" not in ranges:  # the same phrase ranges for every policy: once per group
                if first.cues in seen:
                    continue
                seen.add(first.cues)
            for span in _group_spans(intent, first.cues, ranges, []):
                anchors[(span.start, span.end)] = span
    return [anchors[k] for k in sorted(anchors)]


def _cached_group(
    cache: dict[Any, Any], intent: str, cues: Sequence[str], ranges: PhraseRanges, unless: Sequence[Span]
) -> list[Span]:
    """:func:`_group_spans`, once per distinct cue group and unless spans: a phrase's
    ranges are the same for every policy of one intent (ranges of unknown phrases, the
    old highlighting path, are per policy and not cached)."""
    if "" in ranges:
        return _group_spans(intent, cues, ranges, unless)
    key = ("group", tuple(cues), tuple((s.start, s.end) for s in unless))
    if key not in cache:
        cache[key] = _group_spans(intent, cues, ranges, unless)
    found: list[Span] = cache[key]
    return found


def _group_spans(
    intent: str, cues: Sequence[str], ranges: PhraseRanges, unless: Sequence[Span]
) -> list[Span]:
    """The spans of one cue group: each cue's own highlighted ranges, merged per cue; a
    suffix cue highlighted at the end of a longer word keeps only the suffix; ranges of
    unknown phrases (``""``) count when their text is one of the cues."""
    found: dict[tuple[int, int], Span] = {}
    folded_cues = {fold(c.strip("-").strip()): c for c in cues}
    for cue in cues:
        for span in spans_of(intent, ranges.get(cue, ())):
            if is_suffix(cue):
                part = _suffix_part(intent, span, fold(cue.strip("-").strip()))
                if part is None:
                    continue
                span = part
            found[(span.start, span.end)] = span
    for span in spans_of(intent, ranges.get("", ())):
        if fold(span.text) in folded_cues:
            found[(span.start, span.end)] = span
    return [s for k, s in sorted(found.items()) if not _inside(s, unless)]


def _suffix_part(intent: str, span: Span, suffix: str) -> Span | None:
    """The suffix of a highlighted word that ends with it, the word itself when it is the
    suffix, else None (the stem-tolerant query found a word that does not end with it)."""
    text = fold(span.text)
    if text == suffix:
        return span
    if len(span.text) > len(suffix) and text.endswith(suffix) and len(text) == len(span.text):
        return _span(intent, span.end - len(suffix), span.end)
    return None


def _vocabulary_match(
    policy: Policy, intent: str, ranges: PhraseRanges, unless: Sequence[Span]
) -> Match | None:
    candidates = {
        (s.start, s.end): s
        for phrase in (*policy.trigger.values, "")
        for s in spans_of(intent, ranges.get(phrase, ()))
        if not _inside(s, unless)
    }
    chosen: list[Span] = []
    for span in sorted(candidates.values(), key=lambda s: (s.start - s.end, s.start)):
        if not _inside(span, chosen):
            chosen.append(span)
    if not chosen:
        return None
    chosen.sort(key=lambda s: s.start)
    name = policy.trigger.vocabulary_capture
    leading = []
    for span in chosen:  # "shoes in black": the "in" goes with "black"
        before = list(WORD.finditer(intent, 0, span.start))
        if before and fold(before[-1].group()) in VALUE_PREPOSITIONS:
            leading.append(_span(intent, before[-1].start(), before[-1].end()))
    return Match(
        policy_id=policy.id,
        spans=tuple(spans_of(intent, [(s.start, s.end) for s in (*chosen, *leading)])),
        captures=tuple(CapturedText(name=name, text=s.text, span=s) for s in chosen),
    )


# --- pattern occurrences ------------------------------------------------------------


def _occurrences(
    pattern: Pattern, intent: str, groups: Sequence[Sequence[Span]], anchors: Sequence[Span]
) -> tuple[list[Span], list[CapturedText]]:
    """The spans (cues, articles, list connectors) and captures of every occurrence of
    ``pattern``, each occurrence starting at a span of its first cue group."""
    spans: list[Span] = []
    captures: list[CapturedText] = []
    parts = pattern.parts
    if not groups:
        return spans, captures
    for first in groups[0]:
        if _within_longer(first, anchors):  # "free" inside the cue "free of"
            continue
        cue = first
        spans.append(first)
        group = 0
        index = next(i for i, part in enumerate(parts) if part.cues)
        if index == 1:  # a capture before the first cue
            lead = parts[0]
            lower = max([a.end for a in anchors if a.end <= cue.start] + [0])
            items, function = _backward(intent, lower, cue.start, lead.max_words or DEFAULT_MAX_WORDS_BEFORE)
            captures.extend(_captured(lead.capture, intent, items))
            spans.extend(function)
        position = index + 1
        while position < len(parts):
            part = parts[position]
            limit = min([a.start for a in anchors if a.start >= cue.end] + [len(intent)])
            if position == len(parts) - 1:  # a capture after the last cue: may be a list
                items, function = items_after(intent, cue.end, limit, part.max_words or DEFAULT_MAX_WORDS)
                captures.extend(_captured(part.capture, intent, items))
                spans.extend(function)
                break
            group += 1
            following = next((s for s in groups[group] if s.start >= cue.end), None)
            if following is None:
                break
            item, function = _between(intent, cue.end, following.start, part.max_words or DEFAULT_MAX_WORDS)
            if item is None:
                break
            captures.extend(_captured(part.capture, intent, [item]))
            spans.extend([*function, following])
            cue = following
            position += 2
    return spans, captures


def _within_longer(span: Span, anchors: Sequence[Span]) -> bool:
    return any(
        a.start <= span.start and span.end <= a.end and a.end - a.start > span.end - span.start
        for a in anchors
    )


def _captured(name: str | None, intent: str, items: Sequence[tuple[int, int]]) -> list[CapturedText]:
    if name is None:
        return []
    return [
        CapturedText(name=name, text=intent[s:e], span=_span(intent, s, e)) for s, e in items
    ]


def _words(intent: str, start: int, end: int) -> list[re.Match[str]]:
    return list(WORD.finditer(intent, start, end))


def _is_word(text: str) -> bool:
    return text[0].isalnum() or text[0] in AMOUNT_SIGNS


def _item(
    intent: str, words: Sequence[re.Match[str]], i: int, max_words: int
) -> tuple[tuple[int, int] | None, list[Span], int]:
    """One item read forward from ``words[i]``: (its range, function-word spans, next index)."""
    function: list[Span] = []
    while i < len(words):
        text = words[i].group()
        if text in OPENING_QUOTES:
            i += 1
        elif fold(text) in ARTICLES or fold(text) in LIST_OPENERS:
            function.append(_span(intent, words[i].start(), words[i].end()))
            i += 1
        else:
            break
    taken: list[re.Match[str]] = []
    while i < len(words) and len(taken) < max_words:
        text = words[i].group()
        if not _is_word(text) or fold(text) in STOPS:
            break
        taken.append(words[i])
        i += 1
    if not taken:
        return None, function, i
    start = taken[0].start()
    elided = _ELIDED.match(taken[0].group())
    if elided and len(taken[0].group()) > elided.end():
        function.append(_span(intent, start, start + elided.end()))
        start += elided.end()
    return (start, taken[-1].end()), function, i


def _connectors(intent: str, words: Sequence[re.Match[str]], i: int) -> tuple[list[Span], bool, int]:
    """List connectors from ``words[i]``: their spans, whether a word conjunction is among
    them, and the next index."""
    spans: list[Span] = []
    conjunction = False
    while i < len(words):
        text = words[i].group()
        if fold(text) in CONJUNCTIONS:
            conjunction = True
        elif text not in _LIST_COMMAS:
            break
        spans.append(_span(intent, words[i].start(), words[i].end()))
        i += 1
    return spans, conjunction, i


def items_after(
    intent: str, start: int, limit: int, max_words: int
) -> tuple[list[tuple[int, int]], list[Span]]:
    """The items after a cue (a list when joined by conjunctions) and the function words."""
    words = _words(intent, start, limit)
    first, function, i = _item(intent, words, 0, max_words)
    if first is None:
        return [], []
    items = [first]
    accepted_items, accepted_function = 1, len(function)
    while True:
        joints, conjunction, j = _connectors(intent, words, i)
        if not joints:
            break
        if j == len(words) and limit < len(intent) and conjunction:
            # "sans gluten et sans sel": the conjunction joins this occurrence to the next
            function.extend(joints)
            accepted_items, accepted_function = len(items), len(function)
            break
        item, more, j = _item(intent, words, j, max_words)
        if item is None:
            break
        items.append(item)
        function.extend(joints + more)
        i = j
        if conjunction:  # commas count once a conjunction closes the list
            accepted_items, accepted_function = len(items), len(function)
    return items[:accepted_items], function[:accepted_function]


def _backward(intent: str, lower: int, end: int, max_words: int) -> tuple[list[tuple[int, int]], list[Span]]:
    """The items before a postfix cue ("gluten free", "sugar-free", "nut and dairy free")."""
    function: list[Span] = []
    if end > lower and intent[end - 1] == "-":  # "sugar-free": the hyphen goes with the cue
        function.append(_span(intent, end - 1, end))
        end -= 1
    words = _words(intent, lower, end)
    items: list[tuple[int, int]] = []
    i = len(words) - 1
    seen_conjunction = False
    while True:
        taken: list[re.Match[str]] = []
        while i >= 0 and len(taken) < max_words:
            text = words[i].group()
            folded = fold(text)
            if not _is_word(text) or folded in STOPS or folded in ARTICLES:
                break
            taken.insert(0, words[i])
            i -= 1
        if not taken:
            break
        items.insert(0, (taken[0].start(), taken[-1].end()))
        joints: list[Span] = []
        conjunction = False
        while i >= 0 and (fold(words[i].group()) in CONJUNCTIONS or words[i].group() in _LIST_COMMAS):
            conjunction = conjunction or fold(words[i].group()) in CONJUNCTIONS
            joints.insert(0, _span(intent, words[i].start(), words[i].end()))
            i -= 1
        if not joints or not (conjunction or seen_conjunction):
            break
        seen_conjunction = True
        lookahead = i
        if lookahead < 0 and lower > 0 and conjunction:
            function.extend(joints)  # "sugar free and fat free": joins two occurrences
            break
        if lookahead < 0 or not _is_word(words[lookahead].group()):
            break
        if fold(words[lookahead].group()) in STOPS | ARTICLES:
            break
        function.extend(joints)
    return (items, function) if items else ([], [])


def _between(intent: str, start: int, end: int, max_words: int) -> tuple[tuple[int, int] | None, list[Span]]:
    """The words between two cues of one occurrence ("between {low} and"), all of them."""
    words = _words(intent, start, end)
    item, function, i = _item(intent, words, 0, max_words)
    if item is None or i != len(words):
        return None, []
    return item, function
