"""Lint on a trigger text shared by 2,000 policies: one finding per text, code and plan
field, naming the first policies and counting the rest, instead of one per pair (about two
million pairs here). The figures at 10,000 and 100,000 policies are in bench/RESULTS.md
(``python -m bench.policy_lint``); this test bounds the findings, not the time."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from control_plane.lifecycle.lint import lint
from control_plane.loader import build_policy_set
from control_plane.policy import Governance, Policy, PolicySet

NOW = datetime(2026, 12, 10, tzinfo=UTC)
SHARING = 2000
GOVERNANCE = Governance(filterable_fields=("brand", "price"), boostable_fields=("brand",))
BRANDS = ("acme", "zenith", "orbit")


def shared(size: int = SHARING) -> PolicySet:
    """``size`` policies on ``phrase: [chocolate]`` at two priorities: brand filters that
    disagree, price floors above others' ceilings, two windows."""
    policies = []
    for number in range(size):
        rule: dict[str, Any] = (
            {"filter": {"field": "brand", "values": [BRANDS[number % 3]]}}
            if number % 2 else {"price": {"min": 20} if number % 4 else {"max": 10}}
        )
        document: dict[str, Any] = {
            "id": f"p-{number:04d}", "title": "shared", "owner": "test",
            "priority": 50 if number % 5 else 60, "trigger": {"phrase": ["chocolate"]}, "rules": [rule],
        }
        if number % 10 == 3:
            document["active"] = {"from": "2026-12-01T00:00:00Z", "until": "2027-01-01T00:00:00Z"}
        policies.append(Policy.model_validate(document))
    return build_policy_set(policies, (), GOVERNANCE)


def test_a_text_shared_by_2000_policies_gives_a_bounded_number_of_findings() -> None:
    findings = lint(shared(), now=NOW)
    codes = Counter(f.code for f in findings)
    assert set(codes) == {"overlapping_triggers", "conflicting_filters"}
    # one tie per priority level; one conflict per plan field (brand filters, price)
    assert codes == {"overlapping_triggers": 2, "conflicting_filters": 2}
    ties = sorted((f for f in findings if f.code == "overlapping_triggers"), key=lambda f: f.message)
    at_60 = sum(1 for n in range(SHARING) if n % 5 == 0)
    counted = sorted(int(re.search(r"\(([\d,]+) policies\)", f.message)[1].replace(",", "")) for f in ties)
    assert counted == [at_60, SHARING - at_60], "every policy of a level is counted"
    assert all(re.search(r"and [\d,]+ more all match 'chocolate'", f.message) for f in ties)
    assert all(len(f.message) < 1000 for f in findings), "names are capped, the rest counted"


def test_the_shared_text_finding_counts_every_policy_whose_rule_is_dropped() -> None:
    findings = lint(shared(200), now=NOW)
    brand = next(f for f in findings if f.code == "conflicting_filters" and "filter on 'brand'" in f.message)
    in_all = int(re.search(r"\(([\d,]+) policies in all\)", brand.message)[1].replace(",", ""))
    # pairwise: a brand filter with an earlier one (composer order) of another brand
    order = sorted((n for n in range(200) if n % 2), key=lambda n: (-(50 if n % 5 else 60), n))
    dropped = [n for k, n in enumerate(order) if any(BRANDS[m % 3] != BRANDS[n % 3] for m in order[:k])]
    assert in_all == len(dropped) and brand.policy_id == f"p-{dropped[0]:04d}"
