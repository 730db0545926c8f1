"""suggest_rules' choices, with a catalog given as a table of hit counts (the engine-backed
probe is exercised in test_suggest_rules)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from control_plane.lifecycle.suggest import Signal, policy_id, suggest_rules
from control_plane.loader import load_policy_set
from control_plane.policy import Policy, PolicySet

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo() -> PolicySet:
    return load_policy_set(ROOT / "policies")


def targets(drafts: list[Policy]) -> dict[str, str]:
    return {p.trigger.values[0]: p.rules[0].to_yaml()["rewrite"]["to"] for p in drafts}


def table(**hits: int) -> Callable[[str], int]:
    counts = {key.replace("_", " "): value for key, value in hits.items()}
    return lambda text: counts.get(text, 0)


def test_longest_run_then_most_hits_then_leftmost(demo: PolicySet) -> None:
    probe = table(red_apple=2, apple_pie=5, red=9, apple=9, pie=9, green_tea=3, tea_bags=3)
    signals = [
        Signal("zero_results", "red apple pie", 1),
        Signal("zero_results", "green tea bags", 1),
    ]
    drafts = suggest_rules(signals, probe=probe, existing=demo)
    assert targets(drafts) == {"red apple pie": "apple pie", "green tea bags": "green tea"}


def test_a_fallback_rewrite_must_find_more_than_the_whole_intent(demo: PolicySet) -> None:
    probe = table(oat_milk_barista=2, oat_milk=2, milk_barista=2, oat=2, milk=40, barista=2)
    drafts = suggest_rules(
        [Signal("fallback_tier", "oat milk barista", 3)], probe=probe, existing=demo
    )
    assert targets(drafts) == {"oat milk barista": "milk"}


def test_single_words_and_long_intents_get_no_narrower_rewrite(demo: PolicySet) -> None:
    long_intent = "a b c d e f g h i"
    signals = [Signal("zero_results", "qwxzyv", 1), Signal("zero_results", long_intent, 1)]
    assert suggest_rules(signals, probe=lambda text: 1, existing=demo) == []


def test_exact_triggers_are_skipped_whatever_the_case_and_accents(demo: PolicySet) -> None:
    signals = [
        Signal("reformulation", "NOEL", 1, "christmas chocolate"),
        Signal("reformulation", "Orange", 1, "oranges navel"),
    ]
    assert suggest_rules(signals, probe=lambda text: 1, existing=demo) == []


def test_an_intent_no_policy_can_hold_gets_no_suggestion(demo: PolicySet) -> None:
    signals = [Signal("zero_results", "{amount} bars", 2), Signal("zero_results", "zzz bars", 2)]
    drafts = suggest_rules(signals, probe=lambda text: 4 if text == "bars" else 0, existing=demo)
    assert [p.id for p in drafts] == ["suggested-zzz-bars"]


def test_ids_are_slugs_with_a_hash_when_taken() -> None:
    taken = {"suggested-creme-brulee"}
    assert policy_id("crème brûlée", taken).startswith("suggested-creme-brulee-")
    assert policy_id("pâte à tartiner", taken) == "suggested-pate-a-tartiner"
    assert policy_id("抹茶", taken).startswith("suggested-") and len(policy_id("x" * 200, taken)) <= 80
    assert len(taken) == 5
