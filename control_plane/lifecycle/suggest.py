"""Suggested policies, mined from the decision log.

:func:`mine` reads decision records and finds three signals, aggregated per normalised
intent (clean, casefolded):

- ``zero_results``: the search found nothing (status ``no_results``, or 0 hits);
- ``fallback_tier``: the search was served by a tier other than ``strict``;
- ``reformulation``: in one session (``session_id``), a zero-result or fallback search was
  followed within :data:`REFORMULATION_WINDOW` by a different intent served by ``strict``.

Two drafters turn signals into draft policies (``enabled``, priority :data:`PRIORITY`,
owner ``suggestions``, an ``exact`` trigger on the intent, ids ``suggested-<slug>``, a
description citing the evidence). Both write ``rewrite`` and ``synonyms`` rules only, and
both skip an intent an existing policy already triggers on exactly:

- :func:`suggest_rules` (``origin: rules``) is deterministic: a reformulation becomes a
  rewrite to what the shoppers typed next; a zero-result or fallback intent a rewrite to
  its longest run of words that ``probe`` finds more products for than the whole intent;
- :func:`~control_plane.lifecycle.suggest_llm.suggest_llm` (``origin: llm``, in
  :mod:`control_plane.lifecycle.suggest_llm`) asks a Chat Completions model. The model sees
  the intents, their counts and reformulations only: never mappings, fields, prices or other
  policies. Its output is validated item by item; an invalid item is dropped with a reason
  (``llm_drafts`` returns them).

Nothing here publishes: suggestions are drafts for staging, reviewed and tested like any
other policy.
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import ValidationError

from control_plane.catalog.profile import CatalogProfile
from control_plane.engine import Engine
from control_plane.matcher import clean_intent
from control_plane.policy import Policy, PolicySet
from control_plane.times import parse_time

log = logging.getLogger("govsearch.suggest")

SignalKind = Literal["zero_results", "fallback_tier", "reformulation"]
KINDS: tuple[SignalKind, ...] = ("zero_results", "fallback_tier", "reformulation")
"""the order signals are listed in"""
REFORMULATION_WINDOW = timedelta(minutes=5)
SAMPLE = 3
"""request ids kept per signal"""
PRIORITY = 100
OWNER = "suggestions"
MAX_WORDS = 8
"""longer intents get no sub-phrase rewrite (the probes grow with the square of the words)"""
NO_RESULTS = ("no_results", "zero_results")
NOT_SEARCHED = ("error", "abstained")


# --- mining -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Signal:
    kind: SignalKind
    intent: str
    """normalised: clean, casefolded"""
    count: int
    followed_by: str | None = None
    """for a reformulation: the intent typed next (normalised)"""
    request_ids: tuple[str, ...] = ()
    """a sample (the earliest) of the records behind the signal"""

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "intent": self.intent,
            "count": self.count,
            "followed_by": self.followed_by,
            "request_ids": list(self.request_ids),
        }


@dataclass(frozen=True)
class _Search:
    """One searched decision record, as mining needs it."""

    request_id: str
    intent: str
    time: datetime | None
    session: str | None
    failed: SignalKind | None
    strict: bool


def normalize(intent: str) -> str:
    return clean_intent(intent).casefold()


def mine(records: Iterable[Mapping[str, Any]]) -> list[Signal]:
    """The signals in decision records (dicts), sorted by kind (as in :data:`KINDS`), count
    (descending), intent and the intent that followed. Records without a raw intent, failed requests and
    abstentions are ignored."""
    searches = sorted(
        (s for s in map(_search, records) if s is not None),
        key=lambda s: (s.time or datetime.min.replace(tzinfo=UTC), s.request_id),
    )
    found: dict[tuple[SignalKind, str, str | None], list[str]] = defaultdict(list)
    for search in searches:
        if search.failed is not None:
            found[(search.failed, search.intent, None)].append(search.request_id)
    for (before, after) in _reformulations(searches):
        found[("reformulation", before.intent, after.intent)].append(before.request_id)
    signals = [
        Signal(kind, intent, len(ids), followed_by, tuple(ids[:SAMPLE]))
        for (kind, intent, followed_by), ids in found.items()
    ]
    return sorted(signals, key=lambda s: (KINDS.index(s.kind), -s.count, s.intent, s.followed_by or ""))


def _search(record: Mapping[str, Any]) -> _Search | None:
    intent = record.get("intent")
    if record.get("kind", "decision") != "decision" or not isinstance(intent, str):
        return None
    status = record.get("status", "ok")
    if status in NOT_SEARCHED or not normalize(intent):
        return None
    hits, tier = int(record.get("hits") or 0), record.get("tier")
    failed: SignalKind | None = None
    if status in NO_RESULTS or hits == 0:
        failed = "zero_results"
    elif tier is not None and tier != "strict":
        failed = "fallback_tier"
    session = record.get("session_id")
    return _Search(
        request_id=str(record.get("request_id", "")),
        intent=normalize(intent),
        time=_time(record.get("time")),
        session=str(session) if session else None,
        failed=failed,
        strict=failed is None and tier == "strict",
    )


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def _reformulations(searches: Sequence[_Search]) -> list[tuple[_Search, _Search]]:
    """(failed search, the first later strict search of another intent in the same session
    within the window) pairs."""
    sessions: dict[str, list[_Search]] = defaultdict(list)
    for search in searches:
        if search.session is not None and search.time is not None:
            sessions[search.session].append(search)
    pairs = []
    for session in sessions.values():
        for index, before in enumerate(session):
            if before.failed is None:
                continue
            after = _followed_by(before, session[index + 1 :])
            if after is not None:
                pairs.append((before, after))
    return pairs


def _followed_by(before: _Search, later: Sequence[_Search]) -> _Search | None:
    assert before.time is not None
    for candidate in later:
        assert candidate.time is not None
        if candidate.time - before.time > REFORMULATION_WINDOW:
            return None
        if candidate.strict and candidate.intent != before.intent:
            return candidate
    return None


# --- evidence and drafts ----------------------------------------------------------------


def match_key(text: str) -> str:
    """What an ``exact`` trigger compares: casefolded, accents stripped, spaces collapsed."""
    bare = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(bare.casefold().split())


def triggered_exactly(existing: PolicySet) -> set[str]:
    """The match keys of every phrase an existing ``exact`` trigger fires on."""
    return {
        match_key(value)
        for policy in existing.policies
        if policy.trigger.kind == "exact"
        for value in policy.trigger.values
    }


def by_intent(signals: Iterable[Signal]) -> dict[str, list[Signal]]:
    """Signals per normalised intent, both sorted (kind, count descending, what followed)."""
    grouped: dict[str, list[Signal]] = defaultdict(list)
    for signal in signals:
        grouped[normalize(signal.intent)].append(signal)
    return {intent: sorted(grouped[intent], key=_evidence_order) for intent in sorted(grouped)}


def _evidence_order(signal: Signal) -> tuple[int, int, str, tuple[str, ...]]:
    return (KINDS.index(signal.kind), -signal.count, signal.followed_by or "", signal.request_ids)


def evidence_text(evidence: Sequence[Signal]) -> str:
    """"12 searches with no results, 2 reformulations to "x" (requests r1, r2, r3)"."""
    parts = []
    for signal in evidence:
        if signal.kind == "zero_results":
            parts.append(f"{signal.count} search(es) with no results")
        elif signal.kind == "fallback_tier":
            parts.append(f"{signal.count} search(es) served by a fallback tier")
        else:
            parts.append(f'{signal.count} reformulation(s) to "{signal.followed_by}"')
    samples = list(dict.fromkeys(i for signal in evidence for i in signal.request_ids if i))
    listed = f" (sample requests: {', '.join(samples[:5])})" if samples else ""
    return "Mined from the decision log: " + ", ".join(parts) + listed + "."


def policy_id(intent: str, taken: set[str]) -> str:
    """``suggested-<slug>``; a hash suffix when the slug is taken; recorded in ``taken``."""
    digest = hashlib.sha256(intent.encode("utf-8")).hexdigest()[:8]
    slug = re.sub(r"[^a-z0-9]+", "-", match_key(intent)).strip("-")[:70].strip("-") or digest
    candidate = f"suggested-{slug}"
    if candidate in taken:
        candidate = f"suggested-{slug[:60].strip('-')}-{digest}"
    taken.add(candidate)
    return candidate


def draft(
    pid: str,
    intent: str,
    rule: dict[str, Any],
    evidence: Sequence[Signal],
    origin: Literal["rules", "llm"],
    note: str = "",
) -> Policy:
    """A draft policy in the YAML shape an author writes, validated by the model."""
    kind, body = next(iter(rule.items()))
    title = (
        f'Suggested: "{intent}" searches for "{body["to"]}"'
        if kind == "rewrite"
        else f'Suggested: "{intent}" also searches {", ".join(body["terms"])}'
    )
    return Policy.model_validate({
        "id": pid,
        "title": title[:200],
        "description": evidence_text(evidence) + (f" {note}" if note else ""),
        "owner": OWNER,
        "priority": PRIORITY,
        "enabled": True,
        "trigger": {"exact": [intent]},
        "rules": [rule],
        "explain": f"Suggested ({origin}) from searches that found little or nothing.",
        "origin": origin,
    })


# --- deterministic suggestions ----------------------------------------------------------


Probe = Callable[[str], int]


def suggest_rules(signals: Iterable[Signal], *, probe: Probe, existing: PolicySet) -> list[Policy]:
    """Rewrites from reformulations and from narrower phrasings that find products,
    sorted by id. ``probe(text)``: the strict hit count of a plain search for ``text``."""
    skip = triggered_exactly(existing)
    taken = {p.id for p in existing.policies}
    counted = _counting(probe)
    drafts = []
    for intent, evidence in by_intent(signals).items():
        if match_key(intent) in skip:
            continue
        target = _reformulated_to(evidence) or _narrower(intent, counted)
        if target is None or match_key(target) == match_key(intent):
            continue
        rule = {"rewrite": {"from": intent, "to": target}}
        try:
            drafts.append(draft(policy_id(intent, taken), intent, rule, evidence, "rules"))
        except ValidationError as error:  # e.g. an intent holding a "{capture}"
            log.warning("no suggestion for %r: %s", intent, error.errors()[0]["msg"])
    return sorted(drafts, key=lambda p: p.id)


def _counting(probe: Probe) -> Probe:
    seen: dict[str, int] = {}

    def counted(text: str) -> int:
        if text not in seen:
            seen[text] = probe(text)
        return seen[text]

    return counted


def _reformulated_to(evidence: Sequence[Signal]) -> str | None:
    """The most frequent reformulation (ties: alphabetical)."""
    targets = [s for s in evidence if s.kind == "reformulation" and s.followed_by]
    if not targets:
        return None
    best = min(targets, key=lambda s: (-s.count, s.followed_by or ""))
    return best.followed_by


def _narrower(intent: str, probe: Probe) -> str | None:
    """The longest run of contiguous words that finds more products than the whole intent
    (ties: more products, then leftmost)."""
    words = intent.split()
    if not 1 < len(words) <= MAX_WORDS:
        return None
    floor = probe(intent)
    for length in range(len(words) - 1, 0, -1):
        runs = [" ".join(words[start : start + length]) for start in range(len(words) - length + 1)]
        found = [(probe(run), -start, run) for start, run in enumerate(runs)]
        best = max(found)
        if best[0] > floor:
            return best[2]
    return None


def catalog_probe(engine: Engine, profile: CatalogProfile) -> Probe:
    """A probe for :func:`suggest_rules`: products in stock and visible whose full-text
    fields hold every word of the text (the ``strict`` tier's text clause)."""
    fields = [f"{f.field}^{f.weight:g}" for f in profile.fulltext]

    def probe(text: str) -> int:
        every_word = {"query": text, "fields": fields, "type": "cross_fields", "operator": "and"}
        body = {
            "size": 0,
            "track_total_hits": True,
            "query": {
                "bool": {
                    "must": [{"multi_match": every_word}],
                    "filter": [
                        {"term": {field: True}}
                        for field in (profile.availability, profile.visibility)
                        if field is not None
                    ],
                }
            },
        }
        return int(engine.search(profile.alias, body)["hits"]["total"]["value"])

    return probe
