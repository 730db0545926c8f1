"""The matcher hands the composer its matches grouped (ADR 0028), with nothing lost.

- ``Triggers.expand`` (per-document bundles merged at load, the groups two matched
  documents share taken out of them) gives, policy by policy, what an independent
  per-policy expansion gives: each enabled policy that applies (cohorts, window at
  ``now``) with the spans of its own matched phrases, patterns read with their captures;
  on random sets with groups of equal triggers, conditional members, multi-phrase
  triggers whose phrases overlap in the intent, exact, always, pattern and ``unless``
  triggers, at several instants and cohorts. The highlighted ranges stand in for the
  engine's (every occurrence of a document's words in the intent); the integration tests
  (``tests/integration/test_percolation_scale.py``) compare against the engine's own.
- The composer reads the groups: the composition of a :class:`Matches` equals, byte for
  byte, the composition of the same matches one policy per match, on those sets and on
  the composer's random requests; its input checks (unknown policy, a policy twice, a span
  outside the intent) hold inside and across groups.
- The per-policy view: sorted by policy id, its length the number of policies, equal to
  the tuple of the same matches.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane import matcher
from control_plane.composer import ComposeContext, compose
from control_plane.loader import build_policy_set
from control_plane.matcher_patterns import anchors_of, resolve, trigger_cues
from control_plane.matches import Matches, MatchGroup
from control_plane.plan import CapturedText, Match, Span
from control_plane.policy import Governance, Policy, PolicySet
from tests.clocks import FIXED_NOW
from tests.composer.test_properties import requests

GOVERNANCE = Governance(filterable_fields=("brand",), boostable_fields=("brand",))
WORDS = ["dark", "chocolate", "milk", "oat", "bar", "tea", "green", "without", "sans", "lait", "noix"]
PHRASES = ["dark", "chocolate", "dark chocolate", "milk", "oat milk", "green tea", "tea", "bar"]
TRIGGERS: list[dict[str, Any]] = [
    {"phrase": ["dark chocolate"]},
    {"phrase": ["dark", "chocolate"]},
    {"phrase": ["chocolate", "bar", "green tea"]},
    {"any": ["oat milk", "milk"], "consume": True},
    {"any": ["tea", "dark"], "consume": True},
    {"exact": ["dark chocolate"]},
    {"exact": ["tea"]},
    {"always": True},
    {"pattern": ["(without|sans) {item}"], "consume": True},
    {"pattern": ["(sans|without) {item}"], "consume": True},
    {"phrase": ["chocolate"], "unless": ["milk"]},
]
WINDOWS: list[dict[str, Any]] = [
    {},
    {"active": {"from": (FIXED_NOW - timedelta(days=1)).isoformat()}},
    {"active": {"until": (FIXED_NOW - timedelta(hours=1)).isoformat()}},
    {"active": {"from": FIXED_NOW.isoformat(), "until": (FIXED_NOW + timedelta(days=3)).isoformat()}},
]
COHORTS: list[list[str]] = [[], [], ["vegan"], ["gold", "vegan"], ["gold"]]
INSTANTS = (FIXED_NOW, FIXED_NOW - timedelta(days=2), FIXED_NOW + timedelta(days=1))
REQUEST_COHORTS: tuple[frozenset[str], ...] = (frozenset(), frozenset({"vegan"}), frozenset({"gold"}))


def random_set(seed: int, count: int) -> PolicySet:
    """``count`` policies on a few triggers (so many share one), random phrase triggers
    too, a fifth with cohorts, a third with a window, some disabled."""
    rng = random.Random(seed)
    policies = []
    for number in range(count):
        if rng.random() < 0.3:
            trigger: dict[str, Any] = {"phrase": rng.sample(PHRASES, rng.randint(1, 3))}
        else:
            trigger = rng.choice(TRIGGERS)
        capture = "pattern" in trigger
        rules = (
            [{"filter": {"field": "brand", "values": ["{item}"]}}]
            if capture
            else [{"boost": {"field": "brand", "values": [f"b{number}"], "weight": 1.5}}]
        )
        policies.append(Policy.model_validate({
            "id": f"p-{number:04d}",
            "title": f"policy {number}",
            "owner": "test",
            "priority": rng.randint(1, 5),
            "enabled": rng.random() > 0.05,
            "cohorts": rng.choice(COHORTS),
            "trigger": trigger,
            "rules": rules,
            **rng.choice(WINDOWS),
        }))
    return build_policy_set(policies, (), GOVERNANCE)


def highlighted(intent: str, policies: Sequence[Policy]) -> dict[str, list[tuple[int, int]]]:
    """What the engine would answer: each trigger document the intent matches, with the
    ranges of the words of every occurrence of its phrase (an exact document only when the
    phrase is the whole intent)."""
    words: list[tuple[int, int]] = []
    position = 0
    for word in intent.split(" "):
        words.append((position, position + len(word)))
        position += len(word) + 1
    texts = [intent[s:e] for s, e in words]
    found: dict[str, list[tuple[int, int]]] = {matcher.LAYOUT_ID: []}
    for doc_id, source in matcher.index_documents(policies, lambda phrase: len(phrase.split())):
        if doc_id == matcher.LAYOUT_ID:
            continue
        phrase = source["phrase"].split()
        marks = [
            r
            for at in range(len(texts) - len(phrase) + 1)
            if texts[at : at + len(phrase)] == phrase
            for r in words[at : at + len(phrase)]
        ]
        if marks and (not doc_id.startswith("exact:") or len(phrase) == len(texts)):
            found[doc_id] = marks
    return found


def per_policy(
    policies: Sequence[Policy],
    intent: str,
    ranges: Mapping[str, list[tuple[int, int]]],
    cohorts: frozenset[str],
    now: datetime,
) -> tuple[Match, ...]:
    """The expansion done policy by policy, from the policies alone (the oracle)."""
    whole = (Span(start=0, end=len(intent), text=intent),)

    def document(kind: str, phrase: str) -> str:
        return matcher.trigger_id(kind, matcher.clean_intent(phrase))

    matches: list[Match] = []
    read: list[tuple[Policy, dict[str, list[tuple[int, int]]]]] = []
    for policy in policies:
        window = policy.active
        if not policy.enabled or (policy.cohorts and not set(policy.cohorts) & cohorts):
            continue
        if window and ((window.start and now < window.start) or (window.until and now >= window.until)):
            continue
        trigger = policy.trigger
        if trigger.kind == "pattern" or trigger.unless:
            own = {p: ranges[document("phrase", p)] for p in (*trigger_cues(trigger), *trigger.unless)
                   if document("phrase", p) in ranges}
            if any(p in own for p in trigger_cues(trigger)):
                read.append((policy, own))
        elif trigger.kind == "always":
            matches.append(Match(policy_id=policy.id))
        elif trigger.kind == "exact":
            if any(document("exact", p) in ranges for p in trigger.values):
                matches.append(Match(policy_id=policy.id, spans=whole))
        else:
            marks = [r for p in trigger.values for r in ranges.get(document("phrase", p), [])]
            if any(document("phrase", p) in ranges for p in trigger.values):
                matches.append(Match(policy_id=policy.id, spans=matcher.spans_of(intent, marks) or whole))
    anchors = anchors_of(read, intent)
    cache: dict[Any, Any] = {}
    matches += [m for policy, own in read if (m := resolve(policy, intent, own, anchors, cache))]
    return tuple(sorted(matches, key=lambda m: m.policy_id))


def random_intents(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(count)] + [
        "dark chocolate",
        "tea",
        "dark chocolate bar without lait",
        "green tea sans noix and oat milk",
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_grouped_expansion_equals_the_per_policy_expansion(seed: int) -> None:
    policy_set = random_set(seed, 400)
    policies = policy_set.policies
    triggers = matcher.Triggers.of(policies)
    compared = grouped = 0
    for intent in random_intents(seed, 40):
        ranges = highlighted(intent, policies)
        for cohorts in REQUEST_COHORTS:
            for now in INSTANTS:
                found = triggers.expand(intent, ranges, cohorts, now)
                expected = per_policy(policies, intent, ranges, cohorts, now)
                assert found == expected, (intent, cohorts, now)
                assert len(found) == len(expected)
                ids = [i for group in found.groups for i in group.policy_ids]
                assert len(ids) == len(set(ids))  # a policy in one group only
                compared += len(expected)
                grouped += len(found.groups)
    assert compared > 5 * grouped  # groups, not one per policy


def test_a_group_two_matched_documents_share_gets_the_spans_of_both() -> None:
    policy_set = random_set(4, 200)
    triggers = matcher.Triggers.of(policy_set.policies)
    intent = "dark milk chocolate"
    ranges = highlighted(intent, policy_set.policies)
    found = triggers.expand(intent, ranges, frozenset(), FIXED_NOW)
    both = {
        tuple(s.text for s in group.spans)
        for group in found.groups
        if any(policy_set.policy(i).trigger.values == ("dark", "chocolate") for i in group.policy_ids)
    }
    assert both == {("dark", "chocolate")}
    assert found == per_policy(policy_set.policies, intent, ranges, frozenset(), FIXED_NOW)


def _context(cohorts: frozenset[str]) -> ComposeContext:
    return ComposeContext(cohorts=tuple(sorted(cohorts)), category_field="categories")


@pytest.mark.parametrize("seed", [5, 6])
def test_composing_the_groups_equals_composing_one_match_per_policy(seed: int) -> None:
    policy_set = random_set(seed, 300)
    triggers = matcher.Triggers.of(policy_set.policies)
    for intent in random_intents(seed, 15):
        ranges = highlighted(intent, policy_set.policies)
        for cohorts in REQUEST_COHORTS:
            found = triggers.expand(intent, ranges, cohorts, FIXED_NOW)
            context = _context(cohorts)
            grouped = compose(policy_set, intent, found, context).model_dump_json()
            assert grouped == compose(policy_set, intent, tuple(found), context).model_dump_json()
            assert grouped == compose(policy_set, intent, list(reversed(found)), context).model_dump_json()


@st.composite
def grouped_requests(draw: st.DrawFn) -> tuple[PolicySet, str, list[Match], Matches, ComposeContext]:
    """The composer's random requests, the policies with the same capture names put in
    random groups sharing the spans and captures of the group's first."""
    policies, intent, matches, context = draw(requests())
    by_names: dict[tuple[str, ...], list[Match]] = {}
    for found in matches:
        by_names.setdefault(policies.policy(found.policy_id).trigger.captures, []).append(found)
    each: list[Match] = []
    groups: list[MatchGroup] = []
    for same in by_names.values():
        while same:
            size = draw(st.integers(1, len(same)))
            part, same = same[:size], same[size:]
            first = part[0]
            groups.append(MatchGroup(tuple(m.policy_id for m in part), first.spans, first.captures))
            each += [Match(policy_id=m.policy_id, spans=first.spans, captures=first.captures) for m in part]
    return policies, intent, each, Matches(groups), context


@settings(max_examples=200, deadline=None)
@given(grouped_requests())
def test_random_groups_compose_as_their_matches(
    request: tuple[PolicySet, str, list[Match], Matches, ComposeContext],
) -> None:
    policies, intent, each, groups, context = request
    assert groups == each or sorted(each, key=lambda m: m.policy_id) == list(groups)
    expected = compose(policies, intent, each, context).model_dump_json()
    assert compose(policies, intent, groups, context).model_dump_json() == expected


def test_the_composer_checks_every_member_of_a_group() -> None:
    policy_set = random_set(7, 20)
    known = [p.id for p in policy_set.policies]
    intent = "dark chocolate"
    span = (Span(start=0, end=4, text="dark"),)
    context = _context(frozenset())
    with pytest.raises(ValueError, match="two matches for 'p-0001'"):
        compose(policy_set, intent, Matches([MatchGroup((known[0], known[1], known[1]), span)]), context)
    with pytest.raises(ValueError, match="two matches for 'p-0002'"):
        groups = [MatchGroup((known[2], known[3]), span), MatchGroup((known[4], known[2]), span)]
        compose(policy_set, intent, Matches(groups), context)
    with pytest.raises(ValueError, match="match for 'nope'"):
        compose(policy_set, intent, Matches([MatchGroup((known[0], "nope"), span)]), context)
    outside = (Span(start=10, end=20, text="x"),)
    with pytest.raises(ValueError, match=r"span \[10, 20\) of 'p-0000'"):
        compose(policy_set, intent, Matches([MatchGroup((known[0], known[1]), outside)]), context)
    captured = (CapturedText(name="item", text="x", span=Span(start=3, end=3, text="")),)
    with pytest.raises(ValueError, match="empty or outside"):
        compose(policy_set, intent, Matches([MatchGroup((known[5],), span, captured)]), context)


def test_the_per_policy_view() -> None:
    spans = (Span(start=0, end=4, text="dark"),)
    found = Matches([MatchGroup(("c", "a"), spans), MatchGroup(("b",)), MatchGroup(())])
    assert len(found) == 3
    assert [m.policy_id for m in found] == ["a", "b", "c"]
    assert found[0] == Match(policy_id="a", spans=spans) and found[-1].spans == spans
    a, b, c = Match(policy_id="a", spans=spans), Match(policy_id="b"), Match(policy_id="c", spans=spans)
    assert found == (a, b, c) and found == [a, b, c] and (a, b, c) == found
    assert found != (a, b) and found != (Match(policy_id="a"), b, c) and found != (b, a, c)
    assert Matches.of(list(found)) == found and Matches.of(list(found)).groups != found.groups
    assert Matches() == () and len(Matches()) == 0
