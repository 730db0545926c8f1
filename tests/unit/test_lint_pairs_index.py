"""Lint's trigger index and its per-text findings against references.

``lint`` asks :class:`TriggerIndex` which policies may fire on a text and which may shadow
it; the first reference is the exhaustive analysis (every indexed policy a candidate on
every text): same findings, same order, on the demo set in every season, the test fixtures
and a seeded set built to meet often (shared words, ties, consumers, exact texts inside
phrases, patterns, ``always`` policies, windows). The second is the pairwise analysis lint
had before it reported per shared text (ADR 0023), written out here: every pair it found
is in a finding, and every pair a finding names is one it finds on some text.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from control_plane.catalog.profile import load_profile
from control_plane.lifecycle import lint as lint_module
from control_plane.lifecycle import lint_pairs
from control_plane.lifecycle.lint import Finding, lint
from control_plane.lifecycle.lint_facts import bounds, constraints, crossed, disjoint_on_one_key, excluded
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
    def every_indexed(self: lint_pairs.TriggerIndex, words: tuple[str, ...]) -> Iterator[Policy]:
        return iter([p for p in self.policies if p.trigger.kind != "always"])

    def every_policy(self: lint_pairs.TriggerIndex, words: tuple[str, ...]) -> Iterator[Policy]:
        return iter(self.policies)

    monkeypatch.setattr(lint_pairs.TriggerIndex, "firing_on", every_indexed)
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


# --- the pairwise analysis before ADR 0023, as the reference for what pairs meet ----------


def _meetings(
    one: Policy, other: Policy, now: datetime
) -> Iterator[tuple[str, Policy, int, Policy, int]]:
    """(text shown, first, its length, second, its length) on every text of either that fires both."""
    if not lint_pairs._windows_meet(one, other, now):
        return
    texts = {t.words: t for t in [*lint_pairs._texts(one), *lint_pairs._texts(other)]}
    if one.trigger.kind == "always" and other.trigger.kind == "always":
        texts = {(): lint_pairs.EVERY_INTENT}
    for words in sorted(texts, key=lambda w: (len(w), w)):
        lengths = [lint_pairs._matched_length(p, words) for p in (one, other)]
        if None in lengths:
            continue
        (a, la), (b, lb) = sorted(
            zip((one, other), lengths, strict=True), key=lambda x: lint_pairs._rank(x[0], x[1] or 0)
        )
        yield texts[words].shown, a, la or 0, b, lb or 0


def _clash_codes(first: Policy, second: Policy) -> set[tuple[str, str]]:
    found = set()
    for mine in constraints(second, PROFILE.category):
        for other in constraints(first, PROFILE.category):
            if disjoint_on_one_key(other, mine) and lint_pairs._composer_drops(other, mine):
                found.add(("conflicting_filters", second.id))
            if excluded(mine, other) or excluded(other, mine):
                found.add(("contradictory_filters", second.id))
    for mine_bound in bounds(second):
        for other_bound in bounds(first):
            if None not in (mine_bound.value, other_bound.value) and (
                crossed(mine_bound, other_bound) or crossed(other_bound, mine_bound)
            ):
                found.add(("conflicting_filters", second.id))
    return found


Pairs = set[frozenset[str]]
Clashes = set[tuple[str, str]]


def pairwise(policies: Sequence[Policy], now: datetime) -> tuple[Pairs, Clashes, Clashes]:
    """Tied pairs, clashes on each pair's first text where both apply (what lint reported
    before), clashes on any text where both apply (the most a per-text finding may name)."""
    ties: Pairs = set()
    first_clashes: Clashes = set()
    any_clashes: Clashes = set()
    for one, other in combinations(policies, 2):
        applying = []
        for _, a, la, b, lb in _meetings(one, other, now):
            level_a, level_b = (a.priority, a.trigger.kind, la), (b.priority, b.trigger.kind, lb)
            if a.trigger.kind != "always" and level_a == level_b:
                ties.add(frozenset({a.id, b.id}))
            if not (a.trigger.consume and b.trigger.kind != "always"):
                applying.append(_clash_codes(a, b))
        if applying:
            first_clashes |= applying[0]
            any_clashes |= set().union(*applying)
    return ties, first_clashes, any_clashes


def named(finding: Finding) -> list[str]:
    return re.findall(r"'(m-\d{3})'", finding.message.split(": ")[0] if finding.code == "overlapping_triggers"
                      else finding.message)


@pytest.mark.parametrize("seed", [1, 2, 3, 5])
def test_per_text_findings_name_the_pairs_the_pairwise_analysis_found(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lint_pairs, "LISTED", 10_000)
    policy_set = meeting_set(seed)
    findings = lint(policy_set, now=SEASONS[1], profile=PROFILE)
    shadowed = {f.policy_id for f in findings if f.code == "shadowed_policy"}
    reachable = [p for p in sorted(policy_set.policies, key=lambda p: p.id)
                 if lint_module._can_fire(p, SEASONS[1]) and p.id not in shadowed]
    ties, first_clashes, any_clashes = pairwise(reachable, SEASONS[1])
    reported_ties = {
        frozenset(pair)
        for f in findings if f.code == "overlapping_triggers"
        for pair in combinations(named(f), 2)
    }
    assert ties and ties <= reported_ties
    assert all(frozenset(pair) in ties for pair in reported_ties), "every pair named is tied on some text"
    reported = set()
    for f in findings:  # between policies: quoting the text where they meet
        if f.code in ("conflicting_filters", "contradictory_filters") and "(e.g. on " in f.message:
            later = f.message.partition("; the same on ")[2]
            reported |= {(f.code, f.policy_id or "")}
            reported |= {(f.code, i) for i in re.findall(r"'(m-\d{3})'", later)}
    assert first_clashes and first_clashes <= reported <= any_clashes


def test_a_pair_tied_on_two_texts_is_one_finding() -> None:
    twins = [
        Policy.model_validate({
            "id": i, "title": i, "owner": "t", "trigger": {"phrase": ["milk", "dark chocolate"]},
            "rules": [{"boost": {"field": "brand", "values": ["a"], "weight": 2}}],
        })
        for i in ("a-one", "b-two")
    ]
    findings = lint(build_policy_set(twins, (), GOVERNANCE), now=SEASONS[1])
    assert [(f.code, f.policy_id) for f in findings] == [("overlapping_triggers", "b-two")]
    assert "both match 'milk'" in findings[0].message, "the shortest text is the witness"
