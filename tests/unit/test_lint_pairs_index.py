"""Lint's trigger index gives the findings comparing every pair gives.

``lint`` asks :class:`TriggerIndex` which pairs may meet and which policies may shadow a
text; the reference here is the exhaustive analysis (every pair in ``combinations`` order,
every live policy a shadowing candidate). Same findings, same order, on the demo set in
every season, the test fixtures and a seeded set built to meet often (shared words, ties,
consumers, exact texts inside phrases, patterns, ``always`` policies, windows).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from control_plane.catalog.profile import load_profile
from control_plane.lifecycle import lint_pairs
from control_plane.lifecycle.lint import Finding, lint
from control_plane.loader import build_policy_set, load_policy_set
from control_plane.policy import Governance, Policy, PolicySet

ROOT = Path(__file__).resolve().parents[2]
PROFILE = load_profile(ROOT / "mappings" / "catalog.profile.yaml")
GOVERNANCE = Governance(
    filterable_fields=("categories", "allergens", "labels", "brand", "price"),
    boostable_fields=("labels", "brand"),
)
WORDS = ("dark", "chocolate", "milk", "bar", "orange", "juice", "cheap", "vegan", "nuts")


def meeting_set(seed: int, size: int = 120) -> PolicySet:
    rng = random.Random(seed)
    policies = []
    for number in range(size):
        roll = rng.random()
        phrase = " ".join(rng.sample(WORDS, rng.randint(1, 2)))
        trigger: dict[str, Any]
        if roll < 0.4:
            trigger = {"phrase": [phrase], "consume": rng.random() < 0.3}
        elif roll < 0.6:
            trigger = {"any": sorted(set(rng.sample(WORDS, 2))), "consume": rng.random() < 0.3}
        elif roll < 0.8:
            trigger = {"exact": [phrase]}
        elif roll < 0.95:
            trigger = {"pattern": [f"({rng.choice(['without', 'sans'])}) {{item}}"], "consume": True}
        else:
            trigger = {"always": True}
        rule: dict[str, Any] = rng.choice([
            {"category": {"values": [rng.choice(["Sweets", "Drinks", "Dairy"])],
                          "strategy": rng.choice(["override", "intersect", "merge"])}},
            {"filter": {"field": "brand", "values": [rng.choice(["a", "b", "c"])],
                        "strategy": rng.choice(["override", "intersect"])}},
            {"exclude": {"field": "brand", "values": [rng.choice(["a", "b", "c"])]}},
            {"price": {"max": rng.choice([2, 5, 9])}},
            {"price": {"min": rng.choice([3, 6, 10])}},
        ])
        if "pattern" in trigger:
            rule = {"exclude": {"field": "allergens", "values": ["{item}"]}}
        document: dict[str, Any] = {
            "id": f"m-{number:03d}", "title": f"m {number}", "owner": "test",
            "priority": rng.choice([40, 50, 50, 60]), "trigger": trigger, "rules": [rule],
        }
        if rng.random() < 0.1:
            document["active"] = {"from": "2026-12-01T00:00:00Z", "until": "2027-01-01T00:00:00Z"}
        policies.append(Policy.model_validate(document))
    return build_policy_set(policies, (), GOVERNANCE)


def exhaustive(monkeypatch: pytest.MonkeyPatch) -> None:
    def every_pair(
        self: lint_pairs.TriggerIndex, policies: Sequence[Policy]
    ) -> Iterator[tuple[Policy, Policy]]:
        return combinations(policies, 2)

    def every_policy(self: lint_pairs.TriggerIndex, words: tuple[str, ...]) -> Iterator[Policy]:
        return iter(self.policies)

    monkeypatch.setattr(lint_pairs.TriggerIndex, "pairs", every_pair)
    monkeypatch.setattr(lint_pairs.TriggerIndex, "with_texts_in", every_policy)


def both(policy_set: PolicySet, now: datetime, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Finding], ...]:
    indexed = lint(policy_set, now=now, profile=PROFILE)
    with monkeypatch.context() as patched:
        exhaustive(patched)
        reference = lint(policy_set, now=now, profile=PROFILE)
    return indexed, reference


SEASONS = [datetime(2026, m, d, tzinfo=UTC) for m, d in ((6, 1), (12, 10), (12, 28))]


@pytest.mark.parametrize("now", SEASONS, ids=str)
@pytest.mark.parametrize("directory", ["policies", "tests/fixtures/policies_unpinned"])
def test_directories_lint_the_same(directory: str, now: datetime, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed, reference = both(load_policy_set(ROOT / directory), now, monkeypatch)
    assert indexed == reference


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_set_built_to_meet_lints_the_same(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed, reference = both(meeting_set(seed), SEASONS[1], monkeypatch)
    assert indexed == reference
    codes = {f.code for f in reference}
    assert {"overlapping_triggers", "conflicting_filters", "shadowed_policy"} <= codes


def test_the_index_compares_far_fewer_pairs_than_all() -> None:
    policies = list(meeting_set(4, size=200).policies)
    index = lint_pairs.TriggerIndex(policies)
    pairs = list(index.pairs(policies))
    assert pairs == sorted(pairs, key=lambda pair: (policies.index(pair[0]), policies.index(pair[1])))
    assert len(pairs) < len(list(combinations(policies, 2)))
