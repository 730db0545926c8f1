"""A step whose one category rule loses to the holder, taken without a draft (ADR 0040).

The cascade asks ``composer_fields.lost_to_holder`` before drafting a step: when a
policy's only rule is a category rule on a held category that it cannot narrow (it does
not consume its words, its strategy is ``merge``, or it has no value in common with the
held one), the step notes the contest and changes nothing, so no draft is made. The
reference path (``composer_state.REFERENCE``) never asks. Here: random contests on a held
category, every strategy, consuming or not, values in common or not, words that overlap,
a second rule, an ``always`` policy -- composed as the reference, cold and warm -- and the cases
where the answer must be None.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import control_plane.composer_state as composer_state
from control_plane.composer import ComposeContext, compose
from control_plane.composer_fields import lost_to_holder
from control_plane.composer_state import Actor, State
from control_plane.plan import Constraint, Match, Plan, Span
from control_plane.policy import Governance, Policy, PolicySet
from tests.composer.casefile import policy_set
from tests.composer.test_properties import LinearStats

CATEGORIES = ["a", "b", "c"]
WORDS = ["tea", "green", "cheap", "organic", "loose"]
CONTEXT = ComposeContext(category_field="categories", price_stats={"_all": LinearStats()})


@st.composite
def contests(draw: st.DrawFn) -> tuple[PolicySet, str, list[Match]]:
    """A holder (an override, highest priority) and policies meeting it on the category."""
    intent = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=6)))
    raw: list[dict[str, Any]] = [
        {
            "id": "holder",
            "priority": 100,
            "trigger": {"always": True},
            "rules": [{"category": {"values": draw(st.lists(st.sampled_from(CATEGORIES), min_size=1))}}],
        }
    ]
    for number in range(draw(st.integers(1, 6))):
        rules: list[dict[str, Any]] = [
            {
                "category": {
                    "values": draw(st.lists(st.sampled_from(CATEGORIES), min_size=1)),
                    "strategy": draw(st.sampled_from(["override", "merge", "intersect"])),
                }
            }
        ]
        if draw(st.booleans()) and number == 0:  # a second rule: never taken without a draft
            rules.append({"boost": {"field": "labels", "values": ["organic"], "weight": 2.0}})
        word = draw(st.sampled_from(intent.split()))
        always = draw(st.integers(0, 5)) == 0  # no words: never consumes
        raw.append({
            "id": f"p{number}",
            "priority": draw(st.integers(1, 99)),
            "trigger": {"always": True} if always else {"phrase": [word], "consume": draw(st.booleans())},
            "rules": rules,
        })
    policies = policy_set({"policies": raw, "governance": {"boostable_fields": ["labels"]}})
    matches = []
    for policy in policies.policies:
        if policy.trigger.kind == "always":
            continue
        word = policy.trigger.values[0]
        start = intent.find(word)
        found = Span(start=start, end=start + len(word), text=word)
        matches.append(Match(policy_id=policy.id, spans=(found,)))
    return policies, intent, matches


def _reference(policies: PolicySet, intent: str, matches: list[Match]) -> str:
    composer_state.REFERENCE = True
    try:
        return compose(policies, intent, matches, CONTEXT).model_dump_json()
    finally:
        composer_state.REFERENCE = False


@settings(max_examples=300, deadline=None)
@given(contests())
def test_contests_on_a_held_category_compose_as_the_reference(
    contest: tuple[PolicySet, str, list[Match]],
) -> None:
    policies, intent, matches = contest
    expected = _reference(policies, intent, matches)
    for _ in range(2):  # cold, then from what the first compose kept
        assert compose(policies, intent, matches, CONTEXT).model_dump_json() == expected


def _policy(category: dict[str, Any], consume: bool) -> Policy:
    return Policy.model_validate({
        "id": "p", "title": "p", "owner": "o", "trigger": {"phrase": ["tea"], "consume": consume},
        "rules": [{"category": category}],
    })


def _state(holder: Policy, held: bool) -> State:
    actor = Actor(holder, 0, 0)
    category = Constraint(field="categories", values=("a", "b"), policies=(holder.id,))
    return State(
        plan=Plan(residual="tea", category=category),
        governance=Governance(filterable_fields=[], boostable_fields=[]),
        category_field="categories",
        setters={"category": actor},
        holds={"category": actor} if held else {},
    )


def test_a_rule_that_may_change_the_category_is_never_taken_for_lost() -> None:
    holder = _policy({"values": ["a", "b"]}, consume=False)
    narrowing = Actor(_policy({"values": ["b", "c"]}, consume=True), 1, 3)
    assert lost_to_holder(_state(holder, held=True), narrowing, narrowing.policy.rules[0].body) is None
    assert lost_to_holder(_state(holder, held=False), narrowing, narrowing.policy.rules[0].body) is None
    plain = Actor(_policy({"values": ["c"]}, consume=False), 1, 3)
    assert lost_to_holder(_state(holder, held=False), plain, plain.policy.rules[0].body) is None
    lost = lost_to_holder(_state(holder, held=True), plain, plain.policy.rules[0].body)
    assert lost is not None and lost.winner == "p" and lost.strategy == "override"
    disjoint = Actor(_policy({"values": ["c"], "strategy": "intersect"}, consume=True), 1, 3)
    lost = lost_to_holder(_state(holder, held=True), disjoint, disjoint.policy.rules[0].body)
    assert lost is not None and lost.strategy == "intersect" and lost.reason.startswith("['c'] has nothing")
