"""Deterministic suggestions, probed against the real catalog; the drafts join the demo set
under its governance, and a published draft does what it says."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from control_plane.engine import Engine
from control_plane.lifecycle.suggest import Signal, catalog_probe, suggest_rules
from control_plane.loader import build_policy_set, dump_policy_yaml
from control_plane.policy import Policy, PolicySet
from control_plane.service import SearchRequest, SearchService
from tests.lifecycle_lib.pinning import Pin

NOW = datetime(2026, 11, 15, 12, tzinfo=UTC)

SIGNALS = [
    Signal("fallback_tier", "chocolate zzyzx", 2, None, ("r3", "r4")),
    Signal("reformulation", "chocolat noire", 2, "chocolat noir", ("r5",)),
    Signal("reformulation", "chocolat noire", 1, "chocolat", ("r6",)),
    Signal("zero_results", "chocolat noire", 4, None, ("r7", "r8", "r9")),
    Signal("zero_results", "vegan dark chocolate qwxzyv", 3, None, ("r1", "r2")),
    Signal("zero_results", "qwxzyv plmokn", 9, None, ("r10",)),
    Signal("zero_results", "Oranges", 5, None, ("r11",)),
]


@pytest.fixture()
def drafts(engine: Engine, service: SearchService, demo_set: PolicySet) -> list[Policy]:
    return suggest_rules(SIGNALS, probe=catalog_probe(engine, service.profile), existing=demo_set)


def rewrites(policies: list[Policy]) -> dict[str, tuple[str, str]]:
    out = {}
    for policy in policies:
        (rule,) = policy.rules
        body = rule.to_yaml()["rewrite"]
        out[policy.id] = (body["from"], body["to"])
    return out


def test_rewrites_come_from_reformulations_and_narrower_phrasings(drafts: list[Policy]) -> None:
    assert rewrites(drafts) == {
        "suggested-chocolat-noire": ("chocolat noire", "chocolat noir"),  # what shoppers typed next
        "suggested-chocolate-zzyzx": ("chocolate zzyzx", "chocolate"),
        "suggested-vegan-dark-chocolate-qwxzyv": ("vegan dark chocolate qwxzyv", "vegan dark chocolate"),
    }
    # "qwxzyv plmokn" has no phrase with products; "oranges" is the oranges policy's exact trigger


def test_drafts_are_marked_and_cite_their_evidence(drafts: list[Policy]) -> None:
    noire = next(p for p in drafts if p.id == "suggested-chocolat-noire")
    assert (noire.origin, noire.owner, noire.priority, noire.enabled) == ("rules", "suggestions", 100, True)
    assert (noire.trigger.kind, noire.trigger.values) == ("exact", ("chocolat noire",))
    assert noire.description == (
        'Mined from the decision log: 4 search(es) with no results, 2 reformulation(s) to'
        ' "chocolat noir", 1 reformulation(s) to "chocolat" (sample requests: r7, r8, r9, r5, r6).'
    )
    for policy in drafts:
        assert Policy.model_validate(yaml.safe_load(dump_policy_yaml(policy))) == policy


def test_drafts_are_valid_under_the_sets_governance(drafts: list[Policy], demo_set: PolicySet) -> None:
    combined = build_policy_set(
        [*demo_set.policies, *drafts], demo_set.vocabularies, demo_set.governance
    )
    assert len(combined.policies) == len(demo_set.policies) + len(drafts)


def test_same_signals_same_drafts_in_any_order(
    engine: Engine, service: SearchService, demo_set: PolicySet, drafts: list[Policy]
) -> None:
    again = suggest_rules(
        list(reversed(SIGNALS)), probe=catalog_probe(engine, service.profile), existing=demo_set
    )
    assert again == drafts and [p.id for p in drafts] == sorted(p.id for p in drafts)


def test_an_intent_already_suggested_is_not_suggested_again(
    engine: Engine, service: SearchService, demo_set: PolicySet, drafts: list[Policy]
) -> None:
    combined = build_policy_set([*demo_set.policies, *drafts], demo_set.vocabularies, demo_set.governance)
    probe = catalog_probe(engine, service.profile)
    assert suggest_rules(SIGNALS, probe=probe, existing=combined) == []


def test_a_published_draft_turns_a_fallback_into_a_strict_answer(
    pin: Pin, demo_set: PolicySet, drafts: list[Policy]
) -> None:
    request = SearchRequest(intent="chocolate zzyzx")
    before = pin(demo_set).search(request, NOW)
    assert before.execution.tier != "strict"
    combined = build_policy_set([*demo_set.policies, *drafts], demo_set.vocabularies, demo_set.governance)
    after = pin(combined).search(request, NOW)
    plan = after.compiled.composition.plan
    assert "suggested-chocolate-zzyzx" in plan.applied and plan.residual == "chocolate"
    assert after.execution.tier == "strict" and after.execution.total >= 3


def test_probe_counts_products_with_every_word(engine: Engine, service: SearchService) -> None:
    probe = catalog_probe(engine, service.profile)
    assert probe("chocolate") > probe("dark chocolate") > 0
    assert probe("chocolate zzyzx") == 0
