"""Matching: which policies does an intent trigger? (percolation in the engine)

Each policy's trigger is compiled into a query over the percolated document's ``intent``
field, analysed with ``govsearch_text`` -- the catalog's analyzer, so stemming, elision and
accent folding agree with what full-text retrieval will see. One ``percolate`` request per
intent returns every matched trigger query (below: one per distinct query, not per policy);
the policies behind them are then filtered by ``enabled``, cohorts and the active window at
``now`` in memory. Matched spans come from the engine's highlighter, never from
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

Matching at scale (100,000 policies, ADR 0015): a version index holds one percolator
document per distinct trigger query (:func:`index_documents`): a phrase of a ``phrase``,
``any`` or ``vocabulary`` trigger, a pattern's cue (a suffix cue its own kind), an
``exact`` phrase with its token count, an ``unless`` phrase; never one per policy.
Synthetic and real sets share their phrases (thousands of policies on "without"), so an
intent matches tens of documents, not thousands of policies. The percolation asks for no
``_source`` (the hit ids are the documents), highlights those few documents (their words
are the spans: a trigger's spans are the union of its phrases' highlighted words, adjacent
words merged, exactly what highlighting the policy's own ``bool.should`` of
``match_phrase`` gave) and is paged with ``search_after`` on the ``trigger`` keyword, so
no ``index.max_result_window`` limits it. Which policies a document serves, and the
filters the engine applied before (``enabled``, cohorts, the active window at ``now``),
are in memory: :class:`Triggers`, built once per loaded version, groups the policies
sharing one trigger query; their spans are computed once per group. Patterns, vocabularies
and triggers with ``unless`` phrases are grouped by their (equal) trigger and read once per
group around their phrases' highlighted ranges (:func:`~control_plane.matcher_patterns.resolve`,
cached per distinct pattern). A group's match is built once (ADR 0022) and handed on with
the ids of its applying members, no object per policy (:class:`~control_plane.matches.Matches`,
ADR 0028).

Indices written by earlier releases (one percolator document per policy, with or without
phrase documents) carry no :data:`LAYOUT_ID` marker: they are matched the old way
(:func:`_match_legacy`: policies filtered in the engine and paged, spans from the phrase
documents or from the policies' own highlighted queries), at the old cost.

Which layout an index has is read once, when its version is loaded (:func:`layout_of`,
``LivePolicySet.layout``); a caller that passes it (``layout=``) sends the percolation
without the marker's ``ids`` clause, and a legacy index goes straight to the old way. A
caller that does not know asks for the marker in every percolation, as before (ADR 0037).
The ``intent`` field is indexed with offsets (``mappings/policies.json``): the highlighter
reads each matched document's spans from the percolated document's postings instead of
analysing the intent again per hit; the spans are the same (ADR 0037).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain, combinations
from typing import Any, Literal, TypeVar

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
from control_plane.matches import Matches, MatchGroup
from control_plane.plan import CapturedText, Span
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


# --- the trigger layout: one percolator document per distinct trigger query ----------

#: ``doc_type`` of a trigger document
TRIGGER_DOC = "trigger"
#: the id of the document that marks an index of the trigger layout
LAYOUT_ID = "__layout_triggers__"


Layout = Literal["triggers", "legacy"]
"""how a policies index stores its triggers: ``triggers`` (one document per distinct trigger
query, the :data:`LAYOUT_ID` marker) or ``legacy`` (an earlier release's, no marker)"""


def layout_of(engine: Engine, index: str) -> Layout:
    """The layout of ``index``: one read of the marker document (done when a version is
    loaded, so that a percolation need not ask for the marker)."""
    marker = engine.get_document(index, LAYOUT_ID, source=["doc_type"])
    return "triggers" if marker is not None else "legacy"


def trigger_id(kind: str, phrase: str) -> str:
    """The document id of a (normalised) phrase's query: ``phrase:...`` (the phrase
    anywhere in the intent) or ``exact:...`` (the phrase and the intent's token count)."""
    return f"{kind}:" + hashlib.sha256(phrase.encode("utf-8")).hexdigest()[:32]


def index_documents(
    policies: Iterable[Policy], count_tokens: TokenCounter
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The percolator documents of a version index: one per distinct (kind, phrase) of
    ``policies``' triggers, sorted by id, then the layout marker. No policy is stored
    here: which policies a trigger serves is kept in memory (:class:`Triggers`)."""
    normalised: dict[str, str] = {}  # a few thousand distinct phrases in 100,000 policies

    def text(phrase: str) -> str:
        if phrase not in normalised:
            normalised[phrase] = normalise(phrase)
        return normalised[phrase]

    queries: set[tuple[str, str]] = set()
    for policy in policies:
        queries.update((kind, t) for kind, phrase in _queries_of(policy.trigger) if (t := text(phrase)))
    documents: list[tuple[str, dict[str, Any]]] = []
    for kind, phrase in sorted(queries):
        query = phrase_query(phrase, suffix=kind == "suffix")
        if kind == "exact":
            query = {"bool": {"must": [query], "filter": [{"term": {"intent.tokens": count_tokens(phrase)}}]}}
        doc_id = trigger_id(kind, phrase)
        source = {"doc_type": TRIGGER_DOC, "trigger": doc_id, "phrase": phrase, "query": query}
        documents.append((doc_id, source))
    yield from sorted(documents, key=lambda document: document[0])
    yield LAYOUT_ID, {"doc_type": "layout", "trigger": ""}


def _query_kind(trigger: Trigger, phrase: str) -> str:
    """The document kind of one of ``trigger``'s own phrases: ``exact``, ``suffix`` (a
    ``-free`` cue, :func:`~control_plane.matcher_patterns.phrase_query`) or ``phrase``."""
    if trigger.kind == "exact":
        return "exact"
    return "suffix" if trigger.kind == "pattern" and is_suffix(phrase) else "phrase"


def _queries_of(trigger: Trigger) -> list[tuple[str, str]]:
    """(kind, phrase) of every query a trigger needs: its own phrases (cues, values,
    vocabulary words, exact phrases) and its ``unless`` phrases."""
    own = trigger.values if trigger.kind == "exact" else trigger_cues(trigger)
    return [
        *((_query_kind(trigger, phrase), phrase) for phrase in own),
        *(("phrase", phrase) for phrase in trigger.unless),
    ]


Condition = tuple[frozenset[str], datetime | None, datetime | None]
"""when a policy with cohorts or an active window applies: (cohorts, start, until)"""


def _applies(condition: Condition, cohorts: frozenset[str], now: datetime) -> bool:
    """A member with this condition applies to a request of ``cohorts`` at ``now``: one of
    its cohorts (if any) is the request's, and ``now`` is in ``[start, until)``."""
    wanted, start, until = condition
    return (
        (not wanted or not wanted.isdisjoint(cohorts))
        and (start is None or start <= now)
        and (until is None or now < until)
    )


@dataclass(frozen=True)
class _Members:
    """Policies matched together: the same trigger query, hence the same spans and captures."""

    everyone: tuple[str, ...]
    """ids of the members with neither cohorts nor an active window"""
    conditional: tuple[tuple[Condition, tuple[str, ...]], ...]
    """the other members by condition: each distinct condition is tested once"""

    def applying(self, cohorts: frozenset[str], now: datetime) -> Sequence[str]:
        if not self.conditional:  # most groups: nothing to filter
            return self.everyone
        applying = (ids for condition, ids in self.conditional if _applies(condition, cohorts, now))
        return [*self.everyone, *chain.from_iterable(applying)]

    def members(self) -> Iterator[str]:
        """Every member's id, whatever the request."""
        yield from self.everyone
        for _, ids in self.conditional:
            yield from ids


@dataclass(frozen=True)
class _Group(_Members):
    """The enabled policies that share one trigger query (the union of ``documents``)."""

    kind: str
    """``phrases`` (phrase, any, pattern), ``exact`` or ``always``"""
    documents: tuple[str, ...]


@dataclass(frozen=True)
class _Read(_Members):
    """The enabled policies of one trigger that is read around its highlighted phrases by
    :func:`~control_plane.matcher_patterns.resolve` (patterns, vocabularies, ``unless``):
    read once, for ``policy``, and the match given to every applying member (the reading
    depends on the trigger only; thousands of synthetic patterns share two triggers)."""

    policy: Policy
    """the first member: whose trigger is read"""
    documents: tuple[str, ...]
    """the documents of the trigger's own phrases: one of them must match"""
    phrases: tuple[tuple[str, str], ...]
    """(phrase as the trigger writes it, its document id): own phrases and unless phrases"""


@dataclass(frozen=True)
class _Bundle:
    """Every plain group one document serves, merged (built once, at load): the members of
    all of them get the same match when this document is the only one of their documents
    the intent matched, which is nearly always (a median of one group per bench intent at
    100,000 policies is matched by two documents). Members with cohorts or a window are
    kept by condition, so a request tests each distinct condition once, not each member."""

    kind: str
    everyone: tuple[str, ...]
    """every group's members with neither cohorts nor a window"""
    conditional: tuple[tuple[Condition, tuple[str, ...]], ...]
    """every group's other members, by condition"""


def _bundle(kind: str, groups: Sequence[_Group]) -> _Bundle:
    by_condition: dict[Condition, list[str]] = {}
    for group in groups:
        for condition, ids in group.conditional:
            by_condition.setdefault(condition, []).extend(ids)
    return _Bundle(
        kind,
        tuple(chain.from_iterable(group.everyone for group in groups)),
        tuple((condition, tuple(ids)) for condition, ids in by_condition.items()),
    )


def _spans(
    kind: str, intent: str, marks: Sequence[tuple[int, int]], whole: tuple[Span, ...]
) -> tuple[Span, ...]:
    """The spans of a plain group's match: none for ``always``, the whole intent for
    ``exact``, else the highlighted ranges of its matched documents (the whole intent when
    none was marked)."""
    if kind == "always":
        return ()
    if kind == "exact":
        return whole
    return spans_of(intent, marks) or whole


def _members(
    policies: Sequence[Policy],
) -> tuple[tuple[str, ...], tuple[tuple[Condition, tuple[str, ...]], ...]]:
    everyone = tuple(p.id for p in policies if not p.cohorts and p.active is None)
    by_condition: dict[Condition, list[str]] = {}
    for policy in policies:
        if policy.cohorts or policy.active is not None:
            by_condition.setdefault(_condition(policy), []).append(policy.id)
    return everyone, tuple((condition, tuple(ids)) for condition, ids in by_condition.items())


E = TypeVar("E")


def _indexed(
    entries: Iterable[tuple[tuple[str, ...], E]], always: Callable[[E], bool]
) -> tuple[tuple[E, ...], dict[str, tuple[E, ...]]]:
    """The entries that apply to every intent, and every entry by each of its documents."""
    every: list[E] = []
    by_document: dict[str, list[E]] = {}
    for documents, entry in entries:
        if always(entry):
            every.append(entry)
        for document in documents:
            by_document.setdefault(document, []).append(entry)
    return tuple(every), {d: tuple(e) for d, e in by_document.items()}


class Triggers:
    """Per version: which policies each trigger document serves (built once, at load).
    Plain phrase, any, exact and always triggers are grouped by their documents and
    expanded without reading the intent; the others are grouped by their (equal) trigger
    and read once per group (:class:`_Read`). A group's match is built once per request
    and given with the ids of its applying members (a :class:`~control_plane.matches.MatchGroup`)."""

    def __init__(
        self,
        groups: Iterable[_Group],
        read: Iterable[_Read] = (),
        words: frozenset[str] | None = None,
        documents: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self.words = words
        """every word (and sign) of every phrase the trigger documents are made of, casefolded
        (:func:`words_of`); None: not known (:meth:`may_match` then says yes)"""
        self.documents: Mapping[str, tuple[str, str]] = documents or {}
        """each trigger document's id -> its kind (``phrase``, ``suffix``, ``exact``) and its
        normalised text: what the engine stores a query of (:func:`index_documents`), read by
        :mod:`control_plane.percolation_guess`"""
        self.always, by_document = _indexed(((g.documents, g) for g in groups), lambda g: g.kind == "always")
        self.bundles: dict[str, tuple[_Bundle, ...]] = {}
        """each document's groups merged, per group kind (:class:`_Bundle`)"""
        for document, served in by_document.items():
            kinds: dict[str, list[_Group]] = {}
            for group in served:
                kinds.setdefault(group.kind, []).append(group)
            self.bundles[document] = tuple(_bundle(kind, members) for kind, members in kinds.items())
        shared: dict[str, dict[str, list[_Group]]] = {}
        for group in {id(g): g for served in by_document.values() for g in served}.values():
            for first, second in combinations(sorted(group.documents), 2):
                shared.setdefault(first, {}).setdefault(second, []).append(group)
        self.shared: dict[str, dict[str, tuple[_Group, ...]]] = {
            first: {second: tuple(g) for second, g in later.items()} for first, later in shared.items()
        }
        """document -> a later document (by id) -> the groups of both: the only groups that
        two matched documents can share, found per pair of matched documents"""
        self.read_always, self.read_by_document = _indexed(
            ((r.documents, r) for r in read), lambda r: r.policy.trigger.kind == "always"
        )

    @classmethod
    def of(cls, policies: Iterable[Policy]) -> Triggers:
        members: dict[tuple[str, tuple[str, ...]], list[Policy]] = {}
        readers: dict[Trigger, list[Policy]] = {}
        plain: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}
        # 100,000 policies share a few thousand phrases: normalise and hash each once
        ids: dict[tuple[str, str], str | None] = {}
        words: set[str] = set()
        stored: dict[str, tuple[str, str]] = {}  # every document the index holds

        def document(kind: str, phrase: str) -> str | None:
            if (kind, phrase) not in ids:
                text = normalise(phrase)
                ids[(kind, phrase)] = doc_id = trigger_id(kind, text) if text else None
                words.update(words_of(text))
                if doc_id is not None:
                    stored[doc_id] = (kind, text)
            return ids[(kind, phrase)]

        def own_documents(trigger: Trigger) -> tuple[str, ...]:
            own = trigger.values if trigger.kind == "exact" else trigger_cues(trigger)
            return tuple(dict.fromkeys(d for p in own if (d := document(_query_kind(trigger, p), p))))

        for policy in policies:
            if not policy.enabled:  # never matched; its documents are in the index all the same
                for kind, phrase in _queries_of(policy.trigger):
                    document(kind, phrase)
                continue
            trigger = policy.trigger
            if trigger.kind in ("pattern", "vocabulary") or trigger.unless:
                readers.setdefault(trigger, []).append(policy)  # equal triggers read alike
                continue
            kind = {"always": "always", "exact": "exact"}.get(trigger.kind, "phrases")
            documents = plain.get((kind, trigger.values))  # a function of kind and values
            if documents is None:
                documents = plain[(kind, trigger.values)] = own_documents(trigger)
            members.setdefault((kind, documents), []).append(policy)
        groups = [_Group(*_members(p), kind, documents) for (kind, documents), p in members.items()]
        read = [
            _Read(
                *_members(p),
                p[0],
                own_documents(trigger),
                tuple(
                    (phrase, d) for kind_, phrase in _queries_of(trigger) if (d := document(kind_, phrase))
                ),
            )
            for trigger, p in readers.items()
        ]
        return cls(groups, read, frozenset(words), stored)

    def may_match(self, intent: str) -> bool:
        """A guess, pure and per version: False when ``intent`` shares no word (nor sign) with
        any phrase of the trigger documents, so its percolation will likely find none. It
        compares words, not the analyzer's terms, so it is wrong where different words make
        one term (``chocolats`` and ``chocolat``, once stemmed) and at the edges of its word
        splitting (the tokenizer's word boundaries are Unicode's, UAX #29); the percolation
        is still what decides, and a wrong guess costs a search sent for nothing (ADR 0048;
        the learned guess of ADR 0049 reads terms)."""
        return self.words is None or not self.words.isdisjoint(words_of(intent))

    def expand(
        self, intent: str, ranges: Mapping[str, list[tuple[int, int]]], cohorts: frozenset[str], now: datetime
    ) -> Matches:
        """The matches of the policies whose trigger documents matched (``ranges``: each
        matched document's highlighted ranges), filtered by cohorts and window at ``now``,
        as one :class:`~control_plane.matches.MatchGroup` per distinct set of matched
        documents (hence per distinct spans): no object per policy (ADR 0028).

        A group whose documents the intent matched only one of gets that document's match:
        those are the document's :class:`_Bundle`, merged at load. The few groups two or
        more matched documents serve (:attr:`shared`, looked up per pair of matched
        documents) are taken out of their documents' bundles and expanded one by one,
        their spans the union of their matched documents' ranges."""
        matched = [document for document in ranges if document in self.bundles]
        shared: dict[int, _Group] = {}
        if len(matched) > 1:
            for first, second in combinations(sorted(matched), 2):
                for group in self.shared.get(first, {}).get(second, ()):
                    shared.setdefault(id(group), group)
        taken: set[str] = set()  # the members of shared groups: not in their bundles' matches
        touched: set[str] = set()  # the documents of shared groups
        for group in shared.values():
            taken.update(group.members())
            touched.update(group.documents)
        whole = (Span(start=0, end=len(intent), text=intent),)
        applies: dict[Condition, bool] = {}  # each distinct condition tested once
        found: list[MatchGroup] = []
        for document in matched:
            for bundle in self.bundles[document]:
                parts = [bundle.everyone]
                for condition, conditional in bundle.conditional:
                    ok = applies.get(condition)
                    if ok is None:
                        ok = applies[condition] = _applies(condition, cohorts, now)
                    if ok:
                        parts.append(conditional)
                ids = parts[0] if len(parts) == 1 else tuple(chain.from_iterable(parts))
                if document in touched:
                    ids = tuple(i for i in ids if i not in taken)
                if ids:
                    found.append(MatchGroup(ids, _spans(bundle.kind, intent, ranges[document], whole)))
        # shared and always groups: one match group per distinct (kind, matched documents)
        members: dict[tuple[str, ...], list[Sequence[str]]] = {}
        for group in [*shared.values(), *self.always]:
            applying = group.applying(cohorts, now)
            if applying:
                key = (group.kind, *(d for d in group.documents if d in ranges))
                members.setdefault(key, []).append(applying)
        for key, lists in members.items():
            marks = [r for document in key[1:] for r in ranges[document]]
            found.append(MatchGroup(tuple(chain.from_iterable(lists)), _spans(key[0], intent, marks, whole)))
        found += self._read(intent, ranges, cohorts, now)
        return Matches(found)

    def _read(
        self, intent: str, ranges: Mapping[str, list[tuple[int, int]]], cohorts: frozenset[str], now: datetime
    ) -> list[MatchGroup]:
        """The matches of patterns, vocabularies and triggers with ``unless`` phrases whose
        own documents matched: each distinct trigger read once around its phrases' ranges."""
        candidates: dict[int, _Read] = {id(e): e for e in self.read_always}
        for document in ranges:
            for entry in self.read_by_document.get(document, ()):
                candidates.setdefault(id(entry), entry)
        found = [
            (entry, ids, {phrase: ranges[d] for phrase, d in entry.phrases if d in ranges})
            for entry in candidates.values()
            if (ids := entry.applying(cohorts, now))
        ]
        # Patterns share cues: the captures are computed once per distinct pattern and cue
        # spans (``cache``); the anchors depend on the distinct triggers only.
        anchors = anchors_of([(entry.policy, own) for entry, _, own in found], intent)
        cache: dict[Any, Any] = {}
        matched: list[MatchGroup] = []
        for entry, ids, own in found:
            template = resolve(entry.policy, intent, own, anchors, cache)
            if template is not None:
                matched.append(MatchGroup(tuple(ids), template.spans, template.captures))
        return matched


def _condition(policy: Policy) -> Condition:
    window = policy.active
    start, until = (window.start, window.until) if window else (None, None)
    return frozenset(policy.cohorts), start, until


class PolicyMap(dict[str, Policy]):
    """Policies by id, with the :class:`Triggers` of exactly these policies (built once)."""

    def __init__(self, policies: Iterable[Policy]) -> None:
        super().__init__((policy.id, policy) for policy in policies)
        self.triggers = Triggers.of(self.values())


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
    engine: Engine, index: str, first: Mapping[str, Any], make: Callable[[str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every hit: ``first`` page, then ``make(last sort value)`` until a page is short."""
    hits: list[dict[str, Any]] = first["hits"]["hits"]
    page = hits
    while len(page) == PAGE:
        page = engine.search(index, make(page[-1]["sort"][0]))["hits"]["hits"]
        hits = hits + page
    return hits


def _marked_ranges(hit: Mapping[str, Any]) -> list[tuple[int, int]]:
    marked = (hit.get("highlight") or {}).get("intent") or []
    return highlighted_ranges(marked[0]) if marked else []


def match(
    engine: Engine,
    index: str,
    intent: str,
    policies: Mapping[str, Policy],
    *,
    cohorts: Sequence[str] = (),
    now: datetime,
    first: Mapping[str, Any] | None = None,
    layout: Layout | None = None,
) -> Matches:
    """Percolate ``intent`` (already cleaned) against the triggers stored in ``index``.

    ``policies`` is the policy set the index was built from (by id): a :class:`PolicyMap`
    carries its :class:`Triggers`, built once when the version was loaded; any other
    mapping has them built here. The matches come grouped by equal match
    (:class:`~control_plane.matches.Matches`, what the composer reads); as a sequence they
    are one ``Match`` per policy, sorted by policy id, so the result does not depend on the
    engine's hit order. One round trip, more only past :data:`PAGE` matched
    triggers; an index of an earlier layout (no :data:`LAYOUT_ID` marker) is matched the
    old way, one more round trip (module docstring).

    ``first``: the answer to :func:`percolation`'s request when the caller sent it itself
    (in one ``_msearch`` with another search, checked as ``_msearch`` items are: a failed
    item or a missing shard raised there); the next pages, if any, are asked here.

    ``layout``: the index's, when the caller read it (:func:`layout_of`, once per loaded
    version): the percolation then asks for no marker, and a ``legacy`` index is matched
    the old way at once; ``first`` must then be the answer to ``percolation(...,
    layout=layout)``'s request. Without it, every percolation finds the marker or not.
    """
    if layout == "legacy":
        return _match_legacy(engine, index, intent, policies, cohorts=cohorts, now=now)
    marked = layout is None
    hits = _trigger_hits(engine, index, intent, first, marked=marked)
    if marked and not any(hit["_id"] == LAYOUT_ID for hit in hits):
        return _match_legacy(engine, index, intent, policies, cohorts=cohorts, now=now)
    return expanded(intent, _ranges_of(hits), policies, cohorts=cohorts, now=now)


_ONE_BY_ONE = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
"""ideographs, kana and hangul: the standard tokenizer may cut between any two of them, or
between one of them and a letter, so each is a word of its own here"""
_WORDS = re.compile(rf"[{_ONE_BY_ONE}]|[^\W{_ONE_BY_ONE}]+|[^\w\s]")


def words_of(text: str) -> set[str]:
    """The words of ``text`` (runs of word characters, each ideograph, kana or hangul
    apart) and its other signs, casefolded."""
    return set(_WORDS.findall(text.casefold()))


Percolated = Mapping[str, list[tuple[int, int]]]
"""what percolating an intent found on a ``triggers`` index: each matched trigger document
(by id) and its highlighted ranges in the intent. A function of the index and the intent
alone: cohorts and active windows are applied after it (:func:`expanded`)."""


def percolated(
    engine: Engine, index: str, intent: str, *, first: Mapping[str, Any] | None = None
) -> Percolated:
    """Percolate ``intent`` on ``index``, of the ``triggers`` layout (known: no marker asked
    for): every page, paged by ``search_after``; ``first`` as in :func:`match`."""
    return _ranges_of(_trigger_hits(engine, index, intent, first, marked=False))


def expanded(
    intent: str,
    found: Percolated,
    policies: Mapping[str, Policy],
    *,
    cohorts: Sequence[str] = (),
    now: datetime,
) -> Matches:
    """The matches of ``intent`` from what its percolation ``found`` (:func:`percolated`),
    for ``cohorts`` at ``now``: pure, no engine call (``policies`` as in :func:`match`)."""
    triggers = policies.triggers if isinstance(policies, PolicyMap) else Triggers.of(policies.values())
    return triggers.expand(intent, found, frozenset(cohorts), now)


def _trigger_hits(
    engine: Engine, index: str, intent: str, first: Mapping[str, Any] | None, *, marked: bool
) -> list[dict[str, Any]]:
    def page(after: str | None) -> dict[str, Any]:
        return _trigger_percolation(intent, after, marked=marked)

    if first is None:
        first = engine.search(index, page(None))
    return _pages(engine, index, first, page)


def _ranges_of(hits: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, int]]]:
    return {hit["_id"]: _marked_ranges(hit) for hit in hits}


def percolation(index: str, intent: str, layout: Layout | None = None) -> tuple[str, dict[str, Any]]:
    """The first request :func:`match` sends, as (index, body): for a caller that sends it
    together with another search and hands the answer to :func:`match` (``first``, with
    the same ``layout``)."""
    return index, _trigger_percolation(intent, None, marked=layout is None)


def _trigger_percolation(intent: str, after: str | None, *, marked: bool = True) -> dict[str, Any]:
    """A page of the trigger documents ``intent`` matches (highlighted), and, ``marked``,
    the layout marker (an ``ids`` query: found whatever the intent)."""
    percolate = {"percolate": {"field": "query", "document": {"intent": intent}}}
    triggers = {"bool": {"must": [percolate], "filter": [{"term": {"doc_type": TRIGGER_DOC}}]}}
    query = (
        {"bool": {"should": [triggers, {"ids": {"values": [LAYOUT_ID]}}], "minimum_should_match": 1}}
        if marked
        else triggers
    )
    body: dict[str, Any] = {
        "size": PAGE,
        "query": query,
        "_source": False,
        # an index of an earlier layout has no ``trigger`` field (and finds no marker)
        "sort": [{"trigger": {"order": "asc", "unmapped_type": "keyword"}}],
        "track_total_hits": False,
        "highlight": HIGHLIGHT,
    }
    if after is not None:
        body["search_after"] = [after]
    return body


def _match_legacy(
    engine: Engine,
    index: str,
    intent: str,
    policies: Mapping[str, Policy],
    *,
    cohorts: Sequence[str] = (),
    now: datetime,
) -> Matches:
    """The layouts of earlier releases: one percolator document per policy (filtered in the
    engine, paged), spans from phrase documents or, before those, from the policies' own
    highlighted queries (module docstring)."""
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
    return Matches.of(sorted(matches, key=lambda m: m.policy_id))


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
