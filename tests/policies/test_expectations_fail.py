"""Every expectation kind can fail: a deliberately wrong expectation fails its case, with
a message naming what was expected and what actually happened (real engine, demo data)."""

from __future__ import annotations

from typing import Any

import pytest

from control_plane.engine import Engine
from control_plane.lifecycle.runner import run_suite
from control_plane.lifecycle.suite import Suite
from control_plane.service import SearchService
from tests.clocks import FIXED_NOW

BEFORE_CAMPAIGN = "2026-11-15T12:00:00Z"


def suite_of(*cases: dict[str, Any]) -> Suite:
    named = [{"name": f"case {number}", "now": BEFORE_CAMPAIGN, **case} for number, case in enumerate(cases)]
    return Suite(()).with_file("tests/failing.yaml", named)


#: kind -> (intent, wrong expectation, texts the one failure message must contain)
WRONG: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    "matched": (
        "cheap chocolate", {"matched": ["oranges"]},
        ["matched: expected oranges among the matched policies", "actual matched: [", "chocolate, cheap]"],
    ),
    "not_matched": (
        "cheap chocolate", {"not_matched": ["chocolate"]},
        ["not_matched: expected chocolate not among the matched policies", "actual matched: ["],
    ),
    "applied": (
        "cheap chocolate", {"applied": ["oranges"]},
        ["applied: expected oranges among the applied policies", "actual applied: [", "cheap]"],
    ),
    "not_applied": (
        "cheap chocolate", {"not_applied": ["cheap"]},
        ["not_applied: expected cheap not among the applied policies", "actual applied: ["],
    ),
    "skipped_not_skipped": (
        "cheap chocolate", {"skipped": ["cheap"]},
        ["skipped.cheap: expected skipped; actual not skipped (applied)"],
    ),
    "skipped_other_reason": (
        "chocolate without gravel", {"skipped": {"without-allergen": "span_consumed"}},
        [
            "skipped.without-allergen: expected skipped with a reason containing 'span_consumed'",
            "actual \"capture_unmapped: vocabulary 'allergens' has no entry for 'gravel'",
        ],
    ),
    "plan_value": (
        "cheap chocolate", {"plan": {"category.values": ["Oranges"]}},
        ['plan.category.values: expected ["Oranges"]; actual ["Chocolates"]'],
    ),
    "plan_partial_mapping": (
        "cheap chocolate", {"plan": {"price.max": {"policy": "under-price"}}},
        ['plan.price.max: expected {"policy": "under-price"}; actual {"policy": "cheap", "relative": 30'],
    ),
    "plan_path": (
        "cheap chocolate", {"plan": {"filters.0.field": "allergens"}},
        ['plan.filters.0.field: expected "allergens"; actual plan.filters has 0 elements (no index 0)'],
    ),
    "dsl_contains": (
        "chocolat sans arachide", {"dsl_contains": [{"terms": {"allergens": ["milk"]}}]},
        [
            'dsl_contains.0: expected {"terms": {"allergens": ["milk"]}} in the strict DSL',
            'actual objects with terms: ',
            '"allergens": ["peanuts"]',
        ],
    ),
    "status": (
        "qwxzyv plmokn", {"status": "ok"},
        ["status: expected 'ok'; actual 'no_results' (no product satisfies"],
    ),
    "tier": (
        "cheap chocolate", {"tier": "broad"},
        ["tier: expected 'broad'; actual 'strict' (hits per tier: strict "],
    ),
    "min_hits": (
        "oranges", {"results": {"min_hits": 1000}},
        ["results.min_hits: expected at least 1000 hits; actual "],
    ),
    "max_hits": (
        "oranges", {"results": {"max_hits": 1}},
        ["results.max_hits: expected at most 1 hits; actual "],
    ),
    "top": (
        "oranges", {"results": {"top": ["demo-orange-juice-pure-1l"]}},
        ["results.top: expected demo-orange-juice-pure-1l among the first ", "actual [demo-oranges-"],
    ),
    "top_exact": (
        "orange juice",
        {"results": {"top_exact": ["demo-jus-orange-presse-1l", "demo-orange-juice-pure-1l"]}},
        [
            "results.top_exact: expected the first hits to be"
            " [demo-jus-orange-presse-1l, demo-orange-juice-pure-1l];"
            " actual [demo-orange-juice-pure-1l, demo-jus-orange-presse-1l]",
        ],
    ),
    "absent": (
        "orange juice", {"results": {"absent": ["demo-orange-juice-pure-1l"]}},
        [
            "results.absent: expected none of [demo-orange-juice-pure-1l]",
            "actual demo-orange-juice-pure-1l at position 1",
        ],
    ),
    "every": (
        "oranges", {"results": {"every": {"price": {"lte": 1}}}},
        ["results.every.price: expected every hit's price lte 1; actual demo-oranges-", " has "],
    ),
    "every_missing_field": (
        "oranges", {"results": {"every": {"vintage": {"gte": 2020}}}},
        ["results.every.vintage: no served product has a field 'vintage'"],
    ),
    "none_misspelt_field": (  # would otherwise pass without checking anything
        "chocolate", {"results": {"size": 50, "none": {"alergens": {"contains": "peanuts"}}}},
        ["results.none.alergens: no served product has a field 'alergens'"],
    ),
    "none": (
        "chocolate", {"results": {"size": 50, "none": {"allergens": {"contains": "peanuts"}}}},
        ['results.none.allergens: expected no hit whose allergens contains "peanuts"; actual ', '"peanuts"'],
    ),
    "none_catalog_field": (
        "chocolate", {"results": {"size": 50, "none": {"traces": {"contains": "nuts"}}}},
        ['results.none.traces: expected no hit whose traces contains "nuts"; actual ', '"nuts"'],
    ),
}


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_wrong_expectation_fails_naming_expected_and_actual(demo_service: SearchService, kind: str) -> None:
    intent, expect, texts = WRONG[kind]
    report = run_suite(demo_service, suite_of({"intent": intent, "expect": expect}), now=FIXED_NOW)
    assert not report.passed and report.failed == 1
    [case] = report.cases
    assert len(case.failures) == 1, case.failures
    for text in texts:
        assert text in case.failures[0]


def test_the_same_expectations_pass_when_right(demo_service: SearchService) -> None:
    """The control for the table above: right values of the same kinds pass."""
    report = run_suite(demo_service, suite_of(
        {"intent": "chocolat sans arachide", "expect": {
            "skipped": [], "dsl_contains": [{"terms": {"allergens": ["peanuts"]}}],
            "plan": {"price.max": None, "category": {"values": ["Chocolates"]}},
        }},
        {
            "intent": "chocolate without gravel",
            "expect": {"skipped": {"without-allergen": "CAPTURE_unmapped"}},
        },
        {"intent": "orange juice", "expect": {"results": {
            "top_exact": ["demo-orange-juice-pure-1l", "demo-jus-orange-presse-1l"],
            "top": ["demo-jus-orange-presse-1l"],
            "top_n": 2, "min_hits": 2, "max_hits": 2, "every": {"price": {"gt": 0, "lte": 10}},
        }}},
    ), now=FIXED_NOW)
    assert report.passed, report.human()


def test_an_unknown_policy_fails_the_case_alone(demo_service: SearchService) -> None:
    report = run_suite(demo_service, suite_of(
        {"intent": "oranges", "expect": {"applied": ["ghost"], "not_matched": ["oranges"]}}
    ), now=FIXED_NOW)
    version = demo_service.snapshot()[0].policy_set.version
    assert report.cases[0].failures == [f"policy 'ghost' is not in policy set {version[:12]}"]


def test_a_report_names_failures_under_their_case(demo_service: SearchService) -> None:
    report = run_suite(demo_service, suite_of(
        {"intent": "oranges", "expect": {"applied": ["oranges"]}},
        {"intent": "oranges", "expect": {"plan": {"category.values": ["Sodas"]}}},
    ), now=FIXED_NOW)
    assert (report.passed, report.total, report.failed) == (False, 2, 1)
    assert report.human().splitlines()[1:] == [
        "PASS  tests/failing.yaml:0  case 0",
        "FAIL  tests/failing.yaml:0  case 1",
        '      plan.category.values: expected ["Sodas"]; actual ["Oranges"]',
        "FAILED: 1 passed, 1 failed",
    ]
    data = report.as_json()
    assert data["cases"][1] == {
        "name": "case 1", "file": "tests/failing.yaml", "line": 0, "passed": False,
        "failures": ['plan.category.values: expected ["Sodas"]; actual ["Oranges"]'],
    }
    assert (data["passed"], data["total"], data["failed"]) == (False, 2, 1)


def test_an_empty_suite_passes_with_no_case(demo_service: SearchService) -> None:
    report = run_suite(demo_service, Suite(()), now=FIXED_NOW)
    assert (report.passed, report.total, report.failed, report.cases) == (True, 0, 0, [])
    assert report.policy_set_version == demo_service.snapshot()[0].policy_set.version


def test_an_engine_failure_fails_the_case_with_the_engine_message(
    engine: Engine, demo_service: SearchService
) -> None:
    no_catalog = demo_service.profile.model_copy(update={"alias": "gstest-no-such-catalog"})
    service = SearchService(demo_service.settings, engine, no_catalog, index=demo_service.index)
    try:
        case = {"intent": "oranges", "expect": {"applied": ["oranges"]}}
        report = run_suite(service, suite_of(case), now=FIXED_NOW)
    finally:
        service.close()
    [failure] = report.cases[0].failures
    assert failure.startswith("engine: expected an answer; actual error: ")
    assert "gstest-no-such-catalog" in failure
