"""Matching: which policies does an intent trigger? (percolation in the engine)

Each policy's trigger is compiled into a query over the percolated document's ``intent``
field, analysed with ``govsearch_text`` -- the catalog's analyzer, so stemming, elision and
accent folding agree with what full-text retrieval will see. One ``percolate`` request per
intent returns every candidate, already filtered by ``enabled``, cohorts and the active
window at ``now``. Matched spans come from the engine's highlighter, never from
re-analysing text in Python.

Trigger compilation:

- ``phrase`` / ``any``: a ``match_phrase`` per listed phrase (``any`` terms may be
  multi-word, like ``pas cher``); any one suffices.
- ``exact``: ``match_phrase`` of the phrase **and** the intent's token count equal to the
  phrase's (a ``token_count`` sub-field). An intent cannot fake it by containing a
  sentinel word: there is no sentinel, only the analysed length. The span is the whole
  intent.
- ``pattern``: a ``match_phrase`` per cue; the captured words are taken after the cue's
  span up to the next cue, conjunction, punctuation or the end of the intent.
- ``always``: ``match_all``.

Both sides of a match are normalised by :mod:`control_plane.intent_text`: the intent at
the boundary that received it, and each trigger phrase and cue here, when it is compiled
(what the percolator stores is what the engine analyses of the normalised phrase).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from control_plane.engine import Engine
from control_plane.intent_text import normalise
from control_plane.plan import CapturedText, Match, Span
from control_plane.policy import Policy, Trigger

#: private-use code points: never in a cleaned intent, and not trimmed by the engine
PRE_TAG = "\ue000"
POST_TAG = "\ue001"
HIGHLIGHT = {
    "fields": {
        "intent": {
            "type": "unified",
            "number_of_fragments": 0,
            "pre_tags": [PRE_TAG],
            "post_tags": [POST_TAG],
        }
    }
}
#: words that end a capture (English and French conjunctions and prepositions)
CAPTURE_STOPS = frozenset(
    [
        "and",
        "or",
        "but",
        "with",
        "for",
        "in",
        "at",
        "by",
        "et",
        "ou",
        "mais",
        "avec",
        "pour",
        "dans",
        "chez",
        "par",
    ]
)
#: signs that belong to an amount ("$10", "10€", "5%")
_AMOUNT_SIGNS = "$€£¥%"
#: a word: letters, digits and amount signs, with inner apostrophes or hyphens and, between
#: digits, decimal or thousands separators ("l'huile", "10.50", "1,000", "$10", "10€");
#: combining accents stay inside a word; any other non-space character is punctuation and
#: ends a capture
_WORD = re.compile(
    rf"(?:[^\W_]|[{_AMOUNT_SIGNS}])"
    rf"(?:[^\W_]|[{_AMOUNT_SIGNS}\u0300-\u036f]|['\u2019-](?=[^\W_])|(?<=\d)[.,](?=\d))*|\S"
)
#: quotes that may open a capture: 'sans "arachide"' captures arachide
_OPENING_QUOTES = frozenset("\"'\u201c\u2018\u00ab\u201e")

TokenCounter = Callable[[str], int]


def clean_intent(intent: str) -> str:
    """The normalised intent: :func:`control_plane.intent_text.normalise` (NFKC, invisible
    characters removed, mixed-script words mapped to Latin look-alikes, white space
    collapsed). Private-use code points, such as the highlight tags, never survive it."""
    return normalise(intent)


# --- compiling triggers ---------------------------------------------------------


def compile_trigger(trigger: Trigger, count_tokens: TokenCounter) -> dict[str, Any]:
    """The percolator query for a trigger. ``count_tokens`` analyses a phrase in the engine."""
    if trigger.kind == "always":
        return {"match_all": {}}
    if trigger.kind == "exact":
        clauses = [
            {
                "bool": {
                    "must": [{"match_phrase": {"intent": value}}],
                    "filter": [{"term": {"intent.tokens": count_tokens(value)}}],
                }
            }
            for value in _normalised(trigger.values)
        ]
    elif trigger.kind == "pattern":
        cues = sorted(set(_normalised(cue for pattern in trigger.patterns for cue in pattern.cues)))
        clauses = [{"match_phrase": {"intent": cue}} for cue in cues]
    else:
        clauses = [{"match_phrase": {"intent": value}} for value in _normalised(trigger.values)]
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


def _normalised(phrases: Iterable[str]) -> list[str]:
    """Trigger phrases through the intent normaliser, in order, without duplicates."""
    return list(dict.fromkeys(text for phrase in phrases if (text := normalise(phrase))))


def percolator_document(policy: Policy, version: str, count_tokens: TokenCounter) -> dict[str, Any]:
    window = policy.active
    return {
        "doc_type": "policy",
        "query": compile_trigger(policy.trigger, count_tokens),
        "policy_id": policy.id,
        "policy_set_version": version,
        "priority": policy.priority,
        "enabled": policy.enabled,
        "kind": policy.kind,
        "trigger_kind": policy.trigger.kind,
        "cohorts": list(policy.cohorts) or ["_all"],
        "active_from": window.start.isoformat() if window and window.start else None,
        "active_until": window.until.isoformat() if window and window.until else None,
        "policy": policy.model_dump(mode="json", by_alias=True),
    }


# --- matching -------------------------------------------------------------------


def percolate_filters(cohorts: Iterable[str], now: datetime) -> list[dict[str, Any]]:
    stamp = now.isoformat()
    return [
        {"term": {"doc_type": "policy"}},
        {"term": {"enabled": True}},
        {"terms": {"cohorts": sorted({"_all", *cohorts})}},
        {
            "bool": {
                "should": [
                    {"bool": {"must_not": [{"exists": {"field": "active_from"}}]}},
                    {"range": {"active_from": {"lte": stamp}}},
                ],
                "minimum_should_match": 1,
            }
        },
        {
            "bool": {
                "should": [
                    {"bool": {"must_not": [{"exists": {"field": "active_until"}}]}},
                    {"range": {"active_until": {"gt": stamp}}},
                ],
                "minimum_should_match": 1,
            }
        },
    ]


def match(
    engine: Engine,
    index: str,
    intent: str,
    policies: dict[str, Policy],
    *,
    cohorts: Sequence[str] = (),
    now: datetime,
) -> tuple[Match, ...]:
    """Percolate ``intent`` (already cleaned) against the policies stored in ``index``.

    ``policies`` is the policy set the index was built from (by id); matches are sorted by
    policy id so the result does not depend on the engine's hit order.
    """
    response = engine.percolate(
        index,
        {"intent": intent},
        filters=percolate_filters(cohorts, now),
        highlight=HIGHLIGHT,
        size=max(len(policies), 1),
        source=["policy_id"],
    )
    hits = response["hits"]["hits"]
    found: list[tuple[Policy, tuple[Span, ...]]] = []
    for hit in hits:
        policy = policies[hit["_source"]["policy_id"]]
        marked = (hit.get("highlight") or {}).get("intent") or []
        found.append((policy, spans_from_highlight(marked[0]) if marked else ()))
    cue_spans = [span for policy, spans in found if policy.trigger.kind == "pattern" for span in spans]
    matches = [_to_match(policy, spans, intent, cue_spans) for policy, spans in found]
    return tuple(sorted(matches, key=lambda m: m.policy_id))


def _to_match(policy: Policy, spans: tuple[Span, ...], intent: str, cues: list[Span]) -> Match:
    kind = policy.trigger.kind
    if kind == "always":
        return Match(policy_id=policy.id)
    if kind == "exact" or not spans:
        return Match(policy_id=policy.id, spans=(Span(start=0, end=len(intent), text=intent),))
    if kind != "pattern":
        return Match(policy_id=policy.id, spans=spans)
    name = policy.trigger.patterns[0].capture
    captures = tuple(capture for span in spans if (capture := capture_after(intent, span, cues, name)))
    return Match(policy_id=policy.id, spans=spans, captures=captures)


def spans_from_highlight(marked: str) -> tuple[Span, ...]:
    """Offsets of the highlighted words in the original text; adjacent words merge."""
    spans: list[list[int]] = []
    plain: list[str] = []
    position = 0
    start = -1
    for char in marked:
        if char == PRE_TAG:
            start = position
        elif char == POST_TAG:
            if spans and start >= 0 and "".join(plain[spans[-1][1] : start]).strip() == "":
                spans[-1][1] = position
            else:
                spans.append([start, position])
            start = -1
        else:
            plain.append(char)
            position += 1
    text = "".join(plain)
    return tuple(Span(start=s, end=e, text=text[s:e]) for s, e in spans)


def capture_after(intent: str, cue: Span, cues: Sequence[Span], name: str) -> CapturedText | None:
    """The words after ``cue`` up to the next cue, conjunction, punctuation or the end."""
    limit = min([c.start for c in cues if c.start >= cue.end] + [len(intent)])
    words: list[re.Match[str]] = []
    for word in _WORD.finditer(intent, cue.end, limit):
        text = word.group()
        if not words and text in _OPENING_QUOTES:
            continue
        if text.casefold() in CAPTURE_STOPS or not (text[0].isalnum() or text[0] in _AMOUNT_SIGNS):
            break
        words.append(word)
    if not words:
        return None
    start, end = words[0].start(), words[-1].end()
    return CapturedText(
        name=name, text=intent[start:end], span=Span(start=start, end=end, text=intent[start:end])
    )
