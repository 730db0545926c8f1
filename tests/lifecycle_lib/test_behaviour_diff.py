"""The behavioural diff, on the real engine: the demo set against a modified copy, each
published to its own index and served by a pinned service."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from control_plane.lifecycle.regression import Side, behaviour_diff, compare
from control_plane.loader import build_policy_set
from control_plane.policy import Policy, PolicySet
from control_plane.service import SearchRequest
from tests.lifecycle_lib.pinning import Pin

BEFORE_CAMPAIGN = datetime(2026, 11, 15, 12, tzinfo=UTC)

INTENTS = [
    "oranges",
    "cheap chocolate",
    "chocolat pas cher",
    "chocolate",
    "baby formula",
    "soda",
    "chocolate without peanuts",
    "christmas",
]


def requests() -> list[SearchRequest]:
    plain = [SearchRequest(intent=intent) for intent in INTENTS]
    return [*plain, SearchRequest(intent="chocolate", cohorts=("vegan",)), SearchRequest(intent="oranges")]


def edited(policy: Policy, **changes: Any) -> Policy:
    return Policy.model_validate({**policy.model_dump(by_alias=True), **changes})


def modified(demo: PolicySet) -> PolicySet:
    """cheap: bottom 10% instead of 30%; vegan shoppers: boost 4 instead of 2; oranges removed."""
    policies = []
    for policy in demo.policies:
        if policy.id == "cheap":
            policy = edited(policy, rules=[{"price": {"max": {"percentile": 10}}}])
        elif policy.id == "vegan-shoppers":
            policy = edited(policy, rules=[{"boost": {"field": "diet", "values": ["vegan"], "weight": 4.0}}])
        if policy.id != "oranges":
            policies.append(policy)
    return build_policy_set(policies, demo.vocabularies, demo.governance)


def test_same_set_on_both_sides_changes_nothing(pin: Pin, demo_set: PolicySet) -> None:
    before, after = pin(demo_set), pin(demo_set)
    result = behaviour_diff(before, after, requests(), now=BEFORE_CAMPAIGN)
    assert result.changed == []
    assert result.total == len(INTENTS) + 1  # the repeated "oranges" is replayed once
    assert result.before_version == result.after_version == demo_set.version
    assert result.human().startswith(f"policy set {demo_set.version[:12]} -> {demo_set.version[:12]}:")


def test_exactly_the_affected_intents_are_reported(pin: Pin, demo_set: PolicySet) -> None:
    after_set = modified(demo_set)
    result = behaviour_diff(pin(demo_set), pin(after_set), requests(), now=BEFORE_CAMPAIGN)
    assert (result.before_version, result.after_version) == (demo_set.version, after_set.version)
    changed = {(c.intent, c.cohorts) for c in result.changed}
    assert changed == {
        ("cheap chocolate", ()),
        ("chocolat pas cher", ()),
        ("chocolate", ("vegan",)),
        ("oranges", ()),
    }
    assert [c.intent for c in result.changed] == sorted(c.intent for c in result.changed)
    assert result.as_json()["unchanged_count"] == result.total - 4


def test_each_change_says_what_and_why(pin: Pin, demo_set: PolicySet) -> None:
    result = behaviour_diff(pin(demo_set), pin(modified(demo_set)), requests(), now=BEFORE_CAMPAIGN)
    by_intent = {(c.intent, c.cohorts): c for c in result.changed}

    oranges = by_intent[("oranges", ())]
    assert oranges.plan_changed and oranges.results_changed
    assert oranges.policies == {"added": [], "removed": ["oranges"]}
    assert {d["field"] for d in oranges.plan_diff} == {"applied", "category"}
    assert oranges.entered and set(oranges.entered) <= set(oranges.top_after)
    assert set(oranges.left).isdisjoint(oranges.top_after)
    assert oranges.explanation.startswith("no longer applies oranges; category [Oranges] -> none; ")
    assert "entered the top 10" in oranges.explanation

    cheap = by_intent[("cheap chocolate", ())]
    assert cheap.policies == {"added": [], "removed": []}
    price = {d["field"]: d for d in cheap.plan_diff}
    assert (price["price.max.relative"]["before"], price["price.max.relative"]["after"]) == (30, 10)
    assert price["price.max.value"]["after"] < price["price.max.value"]["before"]
    assert cheap.explanation.startswith("price.max percentile 30 -> 10; price.max ")
    assert cheap.results_changed and "left the top 10" in cheap.explanation

    vegan = by_intent[("chocolate", ("vegan",))]
    assert [d["field"] for d in vegan.plan_diff] == ["boosts"]
    assert "boosts [diet=[vegan] x2] -> [diet=[vegan] x4]" in vegan.explanation


def test_output_is_json_and_deterministic(pin: Pin, demo_set: PolicySet) -> None:
    before, after = pin(demo_set), pin(modified(demo_set))
    first = behaviour_diff(before, after, requests(), now=BEFORE_CAMPAIGN)
    second = behaviour_diff(before, after, list(reversed(requests())), now=BEFORE_CAMPAIGN)
    assert json.dumps(first.as_json(), sort_keys=True) == json.dumps(second.as_json(), sort_keys=True)
    assert first.as_json()["changed_count"] == 4
    lines = first.human().splitlines()
    assert lines[0].endswith(f"4 of {first.total} intent(s) changed")
    assert lines[1].startswith('- "cheap chocolate": ')
    assert '- "chocolate" (cohorts=vegan): ' in first.human()


def test_top_bounds_the_compared_results(pin: Pin, demo_set: PolicySet) -> None:
    result = behaviour_diff(
        pin(demo_set), pin(modified(demo_set)), [SearchRequest(intent="oranges")], now=BEFORE_CAMPAIGN, top=3
    )
    (change,) = result.changed
    assert len(change.top_before) <= 3 and len(change.top_after) <= 3
    with pytest.raises(ValueError, match="top"):
        behaviour_diff(pin(demo_set), pin(demo_set), [], now=BEFORE_CAMPAIGN, top=0)


def side(price: float, policy: str, top: tuple[str, ...]) -> Side:
    plan = {"price": {"max": {"value": price, "policy": policy, "relative": None}}, "applied": [policy]}
    return Side(plan=plan, applied=(policy,), skipped=(), status="ok", tier="strict", total=9, top=top)


def test_explanation_reads_like_a_merchandiser_would_say_it() -> None:
    before = side(4.0, "cheap", ("a", "b", "c", "d"))
    after = side(3.0, "cheap-chocolate-v2", ("a", "d", "e"))
    change = compare(SearchRequest(intent="cheap chocolate"), before, after, 10)
    assert change is not None
    assert change.explanation == (
        "applied cheap-chocolate-v2 instead of cheap; price.max 4.0 -> 3.0;"
        " 2 product(s) left the top 10: b, c; 1 product(s) entered the top 10: e"
    )
    assert compare(SearchRequest(intent="x"), before, before, 10) is None
    reordered = compare(SearchRequest(intent="x"), before, side(4.0, "cheap", ("d", "c", "b", "a")), 10)
    assert reordered is not None and reordered.explanation == "the top 10 was reordered"
    assert not reordered.plan_changed and reordered.results_changed
