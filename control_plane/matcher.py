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
- ``pattern``: a ``match_phrase`` per cue (a suffix cue ``-free`` also a ``regexp`` on
  the end of a word, ``sugarfree``); captures before, after or between cues, their bounds
  and lists are read around the highlighted cues by :mod:`control_plane.matcher_patterns`;
- ``vocabulary``: a ``match_phrase`` per word of the vocabulary (the loader fills them in);
- ``unless`` phrases (any kind) are phrase documents too: a cue inside one does not count.
- ``always``: ``match_all``.

Both sides of a match are normalised by :mod:`control_plane.intent_text`: the intent at
the boundary that received it, and each trigger phrase and cue here, when it is compiled
(what the percolator stores is what the engine analyses of the normalised phrase).

Matching at scale (100,000 policies): the percolation is paged (``search_after`` on
``policy_id``, :data:`PAGE` hits a page, so no ``index.max_result_window`` limits it), asks
for no ``_source`` (the policy bodies come from the set in memory) and highlights nothing.
Spans come from a second percolation, in the same ``_msearch`` round trip, over the
index's *phrase* documents: one percolator query per distinct phrase or cue of the set
(:func:`phrase_documents`), highlighted. A matched policy's spans are the union of its
phrases' highlighted words, adjacent words merged, exactly what highlighting the policy's
own query gives; but each phrase is highlighted once per intent, however many policies
share it (highlighting was about 0.17 ms per matched policy). A matched policy none of
whose phrases is found there (an index written before phrase documents existed) is
highlighted the old way, in a request restricted to those policies' ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from control_plane.engine import Engine
from control_plane.intent_text import normalise
from control_plane.matcher_patterns import (
    anchors_of,
    is_suffix,
    items_after,
    phrase_query,
    resolve,
    trigger_cues,
)
from control_plane.plan import CapturedText, Match, Span
from control_plane.policy import DEFAULT_MAX_WORDS, Policy, Trigger
from control_plane.times import iso

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
        clauses = [phrase_query(cue, is_suffix(cue)) for cue in cues]
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
    stamp = iso(now)  # UTC: the engine reads no offset beyond 18 hours
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


#: hits per percolation page
PAGE = 1000


def phrase_id(phrase: str) -> str:
    """The document id of a phrase's percolator query."""
    return "phrase:" + hashlib.sha256(phrase.encode("utf-8")).hexdigest()[:32]


def trigger_phrases(trigger: Trigger) -> tuple[str, ...]:
    """The phrases whose highlighted words are a trigger's spans (none for exact, always)."""
    return trigger_cues(trigger)


def phrase_documents(policies: Iterable[Policy]) -> Iterator[tuple[str, dict[str, Any]]]:
    """One percolator document per distinct phrase of ``policies``: (id, source)."""
    phrases = sorted({
        phrase
        for policy in policies
        for phrase in (*trigger_phrases(policy.trigger), *policy.trigger.unless)
    })
    for phrase in phrases:
        yield phrase_id(phrase), {
            "doc_type": "phrase",
            "phrase": phrase,
            "query": phrase_query(phrase, is_suffix(phrase)),
        }


def _percolation(
    intent: str, filters: list[dict[str, Any]], sort: str, after: str | None, highlight: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "size": PAGE,
        "query": {
            "bool": {
                "must": [{"percolate": {"field": "query", "document": {"intent": intent}}}],
                "filter": filters,
            }
        },
        "_source": False,
        # an index published before phrase documents existed has no ``phrase`` field
        "sort": [{sort: {"order": "asc", "unmapped_type": "keyword"}}],
        "track_total_hits": False,
    }
    if after is not None:
        body["search_after"] = [after]
    if highlight:
        body["highlight"] = HIGHLIGHT
    return body


def _pages(
    engine: Engine, index: str, first: dict[str, Any], make: Callable[[str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every hit: ``first`` page, then ``make(last sort value)`` until a page is short."""
    hits: list[dict[str, Any]] = first["hits"]["hits"]
    page = hits
    while len(page) == PAGE:
        page = engine.search(index, make(page[-1]["sort"][0]))["hits"]["hits"]
        hits = hits + page
    return hits


def _marked_ranges(hit: dict[str, Any]) -> list[tuple[int, int]]:
    marked = (hit.get("highlight") or {}).get("intent") or []
    return highlighted_ranges(marked[0]) if marked else []


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
    policy id so the result does not depend on the engine's hit order. One ``_msearch``
    round trip (policies and phrases), more only past :data:`PAGE` hits (module docstring).
    """
    policy_filters = percolate_filters(cohorts, now)
    phrase_filters: list[dict[str, Any]] = [{"term": {"doc_type": "phrase"}}]

    def policy_page(after: str | None) -> dict[str, Any]:
        return _percolation(intent, policy_filters, "policy_id", after, highlight=False)

    def phrase_page(after: str | None) -> dict[str, Any]:
        return _percolation(intent, phrase_filters, "phrase", after, highlight=True)

    first_policies, first_phrases = engine.msearch([(index, policy_page(None)), (index, phrase_page(None))])
    policy_hits = _pages(engine, index, first_policies, policy_page)
    phrase_hits = _pages(engine, index, first_phrases, phrase_page)
    ranges = {hit["sort"][0]: _marked_ranges(hit) for hit in phrase_hits}
    found: list[tuple[Policy, dict[str, list[tuple[int, int]]]]] = []
    unseen: list[Policy] = []
    for hit in policy_hits:
        policy = policies[hit["sort"][0]]
        phrases = [p for p in trigger_phrases(policy.trigger) if p in ranges]
        if trigger_phrases(policy.trigger) and not phrases:
            unseen.append(policy)
            continue
        own = (*phrases, *(p for p in policy.trigger.unless if p in ranges))
        found.append((policy, {p: ranges[p] for p in own}))
    found += [(p, {"": marks}) for p, marks in _highlighted(engine, index, intent, unseen, policy_filters)]
    # Patterns share cues: thousands of matched patterns may have the same few cue spans,
    # so the captures are computed once per distinct pattern and cue spans (``cache``).
    anchors = anchors_of(found, intent)
    cache: dict[Any, Any] = {}
    matches = [m for policy, own in found if (m := resolve(policy, intent, own, anchors, cache))]
    return tuple(sorted(matches, key=lambda m: m.policy_id))


def _highlighted(
    engine: Engine, index: str, intent: str, policies: list[Policy], filters: list[dict[str, Any]]
) -> list[tuple[Policy, list[tuple[int, int]]]]:
    """The old way, for policies without phrase documents: highlight their own queries."""
    found: list[tuple[Policy, list[tuple[int, int]]]] = []
    for start in range(0, len(policies), PAGE):
        chunk = policies[start : start + PAGE]
        only = [*filters, {"terms": {"policy_id": [p.id for p in chunk]}}]
        body = _percolation(intent, only, "policy_id", None, highlight=True)
        for hit in engine.search(index, body)["hits"]["hits"]:
            found.append((next(p for p in chunk if p.id == hit["sort"][0]), _marked_ranges(hit)))
    return found


def highlighted_ranges(marked: str) -> list[tuple[int, int]]:
    """Offsets ``[start, end)`` in the plain text of each tagged run of ``marked``."""
    ranges: list[tuple[int, int]] = []
    position = 0
    start = -1
    for char in marked:
        if char == PRE_TAG:
            start = position
        elif char == POST_TAG:
            if start >= 0:
                ranges.append((start, position))
            start = -1
        else:
            position += 1
    return ranges


def spans_of(text: str, ranges: Iterable[tuple[int, int]]) -> tuple[Span, ...]:
    """The spans of ``text`` the highlighted ``ranges`` cover: overlapping ranges are one,
    and ranges with only white space between them merge (adjacent words)."""
    spans: list[list[int]] = []
    for start, end in sorted(ranges):
        if spans and (start <= spans[-1][1] or text[spans[-1][1] : start].strip() == ""):
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    return tuple(Span(start=s, end=e, text=text[s:e]) for s, e in spans)


def spans_from_highlight(marked: str) -> tuple[Span, ...]:
    """Offsets of the highlighted words in the original text; adjacent words merge."""
    text = marked.replace(PRE_TAG, "").replace(POST_TAG, "")
    return spans_of(text, highlighted_ranges(marked))


def capture_after(intent: str, cue: Span, cues: Sequence[Span], name: str) -> CapturedText | None:
    """The first item after ``cue``, up to the next cue, with the bounds of
    :mod:`control_plane.matcher_patterns` (articles dropped, at most 3 words, stops)."""
    limit = min([c.start for c in cues if c.start >= cue.end] + [len(intent)])
    items, _ = items_after(intent, cue.end, limit, DEFAULT_MAX_WORDS)
    if not items:
        return None
    start, end = items[0]
    return CapturedText(
        name=name, text=intent[start:end], span=Span(start=start, end=end, text=intent[start:end])
    )
