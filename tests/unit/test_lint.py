"""Lint: each code on a case that triggers it and a near miss that does not, load errors
located, deterministic output, and a demo set without errors. Pure: no engine."""

from __future__ import annotations

import json
import random
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from control_plane.catalog.profile import load_profile
from control_plane.errors import ERROR_CODES
from control_plane.lifecycle.lint import (
    COHORT,
    LINT_CODES,
    Finding,
    has_errors,
    lint,
    lint_directory,
    mapping_fields_of,
)
from control_plane.loader import build_policy_set, load_policy_set, policy_locations
from control_plane.policy import Governance, Policy, PolicySet

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
MAPPING = json.loads((ROOT / "mappings" / "catalog.json").read_text(encoding="utf-8"))
PROFILE = load_profile(ROOT / "mappings" / "catalog.profile.yaml")
FIELDS = mapping_fields_of(MAPPING)
NOW = datetime(2026, 6, 1, tzinfo=UTC)

GOVERNANCE = Governance(
    filterable_fields=(
        "categories", "allergens", "traces", "labels", "diet", "brand", "margin", "colour",
        "in_stock", "price", "title",
    ),
    boostable_fields=("diet", "labels", "brand"),
    protected_fields=("in_stock",),
)


def policy(policy_id: str, *rules: dict[str, Any], **fields: Any) -> Policy:
    """A policy from its YAML form: ``phrase: [chocolate]`` and a boost unless given."""
    data: dict[str, Any] = {
        "id": policy_id,
        "title": policy_id,
        "owner": "merch",
        "trigger": {"phrase": ["chocolate"]},
        "rules": list(rules) or [{"boost": {"field": "brand", "values": ["acme"], "weight": 2}}],
        **fields,
    }
    return Policy.model_validate(data)


def policy_set(*policies: Policy) -> PolicySet:
    return build_policy_set(policies, (), GOVERNANCE)


def run(*policies: Policy, **options: Any) -> list[Finding]:
    return lint(policy_set(*policies), now=options.pop("now", NOW), **options)


def found(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def one(findings: list[Finding], code: str) -> Finding:
    matching = found(findings, code)
    assert len(matching) == 1, findings
    return matching[0]


def brand(*values: str, strategy: str = "intersect") -> dict[str, Any]:
    return {"filter": {"field": "brand", "values": list(values), "strategy": strategy}}


# --- the demo set ----------------------------------------------------------------------


def test_the_demo_set_lints_without_findings_before_christmas() -> None:
    findings = lint_directory(
        POLICIES, mapping=MAPPING, now=datetime(2026, 11, 30, tzinfo=UTC), profile=PROFILE
    )
    assert findings == []


def test_the_demo_set_has_no_error_in_any_season_and_reports_the_ended_campaign() -> None:
    for month in range(1, 13):
        now = datetime(2026, month, 15, tzinfo=UTC)
        assert not has_errors(lint_directory(POLICIES, mapping=MAPPING, now=now, profile=PROFILE))
    after = lint_directory(POLICIES, mapping=MAPPING, now=datetime(2027, 1, 1, tzinfo=UTC))
    assert [(f.code, f.severity, f.location) for f in after] == [
        ("window_expired", "warning", "campaigns/christmas-chocolate.yaml:2"),
    ]
    assert after[0].message.startswith("active.until: the active window ended 2026-12-26")


def test_every_demo_policy_is_untested_when_no_test_names_it() -> None:
    demo = load_policy_set(POLICIES)
    findings = lint(demo, now=NOW, tested_policy_ids={"cheap"})
    untested = {f.policy_id for f in found(findings, "untested_policy")}
    assert untested == {p.id for p in demo.policies} - {"cheap"}
    assert not has_errors(findings)


# --- codes: each triggered, each with a near miss ----------------------------------------


def test_unmapped_field() -> None:
    findings = run(policy("p", {"filter": {"field": "colour", "values": ["red"]}}), mapping_fields=FIELDS)
    finding = one(findings, "unmapped_field")
    assert (finding.severity, finding.location) == ("error", "policy:p:rules.0.filter.field")
    assert "'colour'" in finding.message
    assert run(policy("p", brand("acme")), mapping_fields=FIELDS) == []
    assert run(policy("p", {"filter": {"field": "colour", "values": ["red"]}})) == [], "no mapping, no check"


def test_unmapped_field_of_a_role_comes_from_the_profile() -> None:
    fields = {k: v for k, v in FIELDS.items() if k != "categories"}
    chocolates = policy("p", {"category": {"values": ["Chocolates"]}})
    finding = one(run(chocolates, mapping_fields=fields, profile=PROFILE), "unmapped_field")
    assert finding.location == "policy:p:rules.0.category"
    assert "category field 'categories'" in finding.message
    assert run(chocolates, mapping_fields=FIELDS, profile=PROFILE) == []


def guard(policy_id: str, *rules: dict[str, Any]) -> Policy:
    return policy(policy_id, *rules, kind="guard", trigger={"always": True}, priority=1000)


def test_field_type_mismatch() -> None:
    findings = run(guard("p", {"filter": {"field": "margin", "values": ["high"]}}), mapping_fields=FIELDS)
    finding = one(findings, "field_type_mismatch")
    assert (finding.severity, finding.location) == ("error", "policy:p:rules.0.filter.field")
    assert "'margin' is float" in finding.message and "'high'" in finding.message
    near = policy("p", {"filter": {"field": "margin", "values": [0.5, "0.25"]}})
    assert run(near, mapping_fields=FIELDS) == []
    stock = guard("g", {"filter": {"field": "in_stock", "values": ["yes"]}})
    assert "'in_stock' is boolean" in one(run(stock, mapping_fields=FIELDS), "field_type_mismatch").message
    fine = guard("g", {"filter": {"field": "in_stock", "values": [True, "false"]}})
    assert run(fine, mapping_fields=FIELDS) == []


def test_contradictory_filters_within_one_policy() -> None:
    both = policy("p", {"filter": {"field": "diet", "values": ["vegan"]}},
                  {"exclude": {"field": "diet", "values": ["vegan", "halal"]}})
    finding = one(run(both), "contradictory_filters")
    assert (finding.severity, finding.location) == ("error", "policy:p:rules.0.filter")
    assert "excluded by exclusion on 'diet'" in finding.message and "nothing can match" in finding.message
    near = policy("p", {"filter": {"field": "diet", "values": ["vegan", "vegetarian"]}},
                  {"exclude": {"field": "diet", "values": ["vegan"]}})
    assert run(near) == []


def test_contradictory_filters_two_rules_on_one_field() -> None:
    finding = one(run(policy("p", brand("acme"), brand("zenith"))), "contradictory_filters")
    assert finding.location == "policy:p:rules.1.filter"
    assert "nothing in common with filter on 'brand' ['acme'] (rules.0)" in finding.message
    assert run(policy("p", brand("acme", "zenith"), brand("zenith"))) == []
    merged = policy("p", {"category": {"values": ["A"], "strategy": "intersect"}},
                    {"category": {"values": ["B"], "strategy": "merge"}})
    assert run(merged) == [], "a merge after an intersect unions"


def test_contradictory_price_bounds_within_one_policy() -> None:
    finding = one(run(policy("p", {"price": {"min": 20, "max": 10}})), "contradictory_filters")
    assert finding.location == "policy:p:rules.0.price"
    assert "floor 20 (rules.0) is never below ceiling 10 (rules.0)" in finding.message
    relative = policy("p", {"price": {"min": {"percentile": 70}}}, {"price": {"max": {"percentile": 30}}})
    assert "floor p70" in one(run(relative), "contradictory_filters").message
    assert run(policy("p", {"price": {"min": 10, "max": 20}})) == []
    mixed = policy("p", {"price": {"min": 20, "max": {"percentile": 30}}})
    assert run(mixed) == [], "an absolute floor and a relative ceiling are not compared"


def test_contradictory_filters_between_policies_that_apply_together() -> None:
    safety = policy("safety", {"exclude": {"field": "diet", "values": ["vegan"]}}, priority=80)
    vegan = policy("vegan", {"filter": {"field": "diet", "values": ["vegan"]}}, priority=50)
    finding = one(run(safety, vegan), "contradictory_filters")
    assert (finding.severity, finding.policy_id) == ("error", "vegan")
    assert finding.location == "policy:vegan:rules.0.filter"
    assert "excluded by exclusion on 'diet' ['vegan'] of 'safety'" in finding.message
    assert "'chocolate'" in finding.message
    consuming = policy("safety", {"exclude": {"field": "diet", "values": ["vegan"]}}, priority=80,
                       trigger={"phrase": ["chocolate"], "consume": True})
    skipped = run(consuming, vegan)
    assert [f.code for f in skipped] == ["shadowed_policy"], "the earlier one consumes: the later is skipped"
    elsewhere = policy("vegan", {"filter": {"field": "diet", "values": ["vegan"]}}, trigger={"any": ["tea"]})
    assert run(safety, elsewhere) == [], "different phrases: not analysed as applying together"


def test_a_guard_exclusion_applies_with_everything() -> None:
    no_vegan = guard("no-vegan", {"exclude": {"field": "diet", "values": ["vegan"]}})
    vegan = policy("vegan", {"filter": {"field": "diet", "values": ["vegan"]}}, trigger={"any": ["vegan"]})
    finding = one(run(no_vegan, vegan), "contradictory_filters")
    assert finding.policy_id == "vegan"
    assert "of 'no-vegan'" in finding.message and "(e.g. on 'vegan')" in finding.message


def test_category_against_an_exclusion_of_the_category_field_needs_the_profile() -> None:
    chocolate = policy("chocolate", {"category": {"values": ["Chocolates"]}}, priority=60)
    sweets = policy("no-sweets", {"exclude": {"field": "categories", "values": ["Chocolates"]}}, priority=50)
    assert run(chocolate, sweets) == []
    finding = one(run(chocolate, sweets, profile=PROFILE), "contradictory_filters")
    assert finding.policy_id == "no-sweets" and "category ['Chocolates'] of 'chocolate'" in finding.message


def test_conflicting_filters_between_policies() -> None:
    acme = policy("acme", brand("acme"), priority=80)
    zenith = policy("zenith", brand("zenith"), priority=50)
    finding = one(run(acme, zenith), "conflicting_filters")
    assert (finding.severity, finding.policy_id, finding.location) == (
        "warning", "zenith", "policy:zenith:rules.0.filter",
    )
    assert "keeps the values of 'acme' (priority 80 > 50) and drops this rule" in finding.message
    assert "'chocolate'" in finding.message
    held = policy("acme", brand("acme", strategy="override"), priority=80)
    assert run(held, zenith) == [], "an override holds its field: the later rule loses by design"
    assert run(acme, policy("zenith", brand("acme", "zenith"), priority=50)) == []


def test_a_longer_phrase_fires_the_shorter_one_and_applies_first() -> None:
    dark = policy("z-dark", brand("acme"), trigger={"phrase": ["dark chocolate"]})
    chocolate = policy("a-chocolate", brand("zenith"))
    finding = one(run(dark, chocolate), "conflicting_filters")
    assert finding.policy_id == "a-chocolate"
    assert "(e.g. on 'dark chocolate')" in finding.message and "longer match 14 > 9" in finding.message
    assert found(run(dark, chocolate), "overlapping_triggers") == []


def test_conflicting_filters_when_a_consuming_policy_cannot_narrow_a_held_field() -> None:
    held = policy("acme", brand("acme", strategy="override"), priority=80)
    consume = {"phrase": ["chocolate"], "consume": True}
    narrowing = policy("zenith", brand("zenith"), priority=50, trigger=consume)
    finding = one(run(held, narrowing), "conflicting_filters")
    assert "although 'zenith' consumed the shopper's words" in finding.message


def test_the_demo_seasonal_override_is_not_a_conflict() -> None:
    demo = load_policy_set(POLICIES)
    christmas, chocolate = demo.policy("christmas-chocolate"), demo.policy("chocolate")
    assert run(christmas, chocolate, now=datetime(2026, 12, 2, tzinfo=UTC), profile=PROFILE) == []


def test_conflicting_price_bounds_between_policies() -> None:
    ceiling = policy("ceiling", {"price": {"max": 10}}, priority=90)
    floor = policy("floor", {"price": {"min": 20}}, priority=50)
    finding = one(run(ceiling, floor), "conflicting_filters")
    assert (finding.policy_id, finding.location) == ("floor", "policy:floor:rules.0.price.min")
    assert "price floor 20 and the ceiling 10 of 'ceiling' cannot both hold" in finding.message
    assert run(ceiling, policy("floor", {"price": {"min": 5}}, priority=50)) == []


def test_shadowed_policy() -> None:
    consumer = policy("consumer", priority=90, trigger={"any": ["chocolate", "choc"], "consume": True})
    shadowed = policy("shadowed", priority=50, trigger={"phrase": ["Chocolate"]})
    finding = one(run(consumer, shadowed), "shadowed_policy")
    assert (finding.severity, finding.location) == ("warning", "policy:shadowed:trigger.phrase")
    assert "'Chocolate' by 'consumer' (priority 90 > 50)" in finding.message
    assert run(consumer.model_copy(update={"trigger": shadowed.trigger}), shadowed) == [], "no consume"
    partly = policy("shadowed", priority=50, trigger={"phrase": ["chocolate", "cocoa"]})
    assert run(consumer, partly) == [], "'cocoa' still reaches it"
    exact = policy("consumer", priority=90, trigger={"exact": ["chocolate"], "consume": True})
    assert run(exact, shadowed) == [], "an exact trigger consumes only the phrase alone"


def test_shadowed_exact_policy_by_part_of_its_phrase() -> None:
    cheap = policy("cheap", priority=60, trigger={"any": ["cheap"], "consume": True})
    exact = policy("cheap-chocolate", priority=50, trigger={"exact": ["cheap chocolate"]})
    assert "'cheap chocolate' by 'cheap'" in one(run(cheap, exact), "shadowed_policy").message
    equal = cheap.model_copy(update={"priority": 50})
    assert run(equal, exact) == [], "exact is more specific at equal priority"


def test_a_shadow_must_be_active_and_reach_the_same_shoppers() -> None:
    shadowed = policy("shadowed", priority=50)
    consume = {"phrase": ["chocolate"], "consume": True}
    christmas = {"from": "2026-12-01", "until": "2026-12-26"}
    seasonal = policy("seasonal", priority=90, trigger=consume, active=christmas)
    assert found(run(seasonal, shadowed), "shadowed_policy") == []
    cohort = policy("cohort", priority=90, trigger=consume, cohorts=["vip"])
    assert found(run(cohort, shadowed), "shadowed_policy") == []
    vip_only = policy("shadowed", priority=50, cohorts=["vip"])
    assert len(found(run(cohort, vip_only), "shadowed_policy")) == 1


def test_overlapping_triggers() -> None:
    first, second = policy("a-first"), policy("b-second")
    finding = one(run(second, first), "overlapping_triggers")
    assert (finding.severity, finding.policy_id, finding.location) == (
        "warning", "b-second", "policy:b-second:trigger.phrase",
    )
    assert "'a-first' applies first only because its id sorts first" in finding.message
    assert run(first, policy("b-second", priority=51)) == []
    assert run(first, policy("b-second", trigger={"any": ["chocolate"]})) == [], "phrase is more specific"
    assert run(first, policy("b-second", trigger={"phrase": ["dark chocolate"]})) == [], "longer match first"


def test_guards_at_equal_priority_do_not_overlap() -> None:
    guards = [
        policy(g, {"filter": {"field": "in_stock", "values": [True]}}, kind="guard", trigger={"always": True})
        for g in ("g1", "g2")
    ]
    assert run(*guards) == []


def test_window_expired() -> None:
    ended = policy("ended", active={"from": "2026-01-01", "until": "2026-05-01"})
    finding = one(run(ended), "window_expired")
    assert (finding.severity, finding.location) == ("warning", "policy:ended:active.until")
    assert "2026-05-01" in finding.message
    assert run(policy("running", active={"until": "2026-06-02"})) == []


def test_an_expired_policy_is_left_out_of_the_pair_analyses() -> None:
    acme = policy("acme", brand("acme"), priority=80, active={"until": "2026-05-01"})
    zenith = policy("zenith", brand("zenith"), priority=50)
    assert [f.code for f in run(acme, zenith)] == ["window_expired"]
    later = policy("zenith", brand("zenith"), priority=50, active={"from": "2026-05-01"})
    assert [f.code for f in run(acme.model_copy(update={"active": None}), later)] == ["conflicting_filters"]


def test_unreachable_trigger() -> None:
    findings = run(policy("p", trigger={"any": ["!!!", "cheap"]}))
    finding = one(findings, "unreachable_trigger")
    assert (finding.severity, finding.location) == ("warning", "policy:p:trigger.any")
    assert "['!!!']" in finding.message and "never fires" not in finding.message
    assert "never fires" in one(run(policy("p", trigger={"any": ["…", "-"]})), "unreachable_trigger").message
    assert run(policy("p", trigger={"any": ["c++", "5€"]})) == []


def test_unreachable_cohort() -> None:
    finding = one(run(policy("p", cohorts=["vegan shoppers"])), "unreachable_cohort")
    assert (finding.severity, finding.location) == ("warning", "policy:p:cohorts")
    assert "'vegan shoppers'" in finding.message and "never fires" in finding.message
    assert run(policy("p", cohorts=["vegan", "vip:gold"])) == []


def test_the_cohort_pattern_is_the_requests() -> None:
    from control_plane.service import IDENTIFIER

    assert COHORT.pattern == IDENTIFIER


def test_untested_policy() -> None:
    findings = run(policy("a"), policy("b", priority=60), tested_policy_ids={"a"})
    finding = one(findings, "untested_policy")
    assert (finding.severity, finding.policy_id, finding.location) == ("warning", "b", "policy:b")
    assert run(policy("a"), tested_policy_ids={"a"}) == []
    assert run(policy("a")) == [], "no tested ids given: not checked"


def test_disabled_policy() -> None:
    consumer = policy("off", priority=90, enabled=False, trigger={"phrase": ["chocolate"], "consume": True})
    findings = run(consumer, policy("p", priority=50))
    assert [(f.code, f.severity, f.location) for f in findings] == [
        ("disabled_policy", "info", "policy:off:enabled"),
    ]
    assert run(policy("on")) == []


def test_governance_breaches_of_a_set_built_elsewhere_carry_the_loaders_codes() -> None:
    strict = GOVERNANCE.model_copy(update={"filterable_fields": ("diet",)})
    rogue = PolicySet(version="x", policies=(policy("p", brand("acme")),), governance=strict)
    finding = one(lint(rogue, now=NOW), "governance_field")
    assert (finding.severity, finding.location) == ("error", "policy:p:rules.0.filter.field")
    allowed = PolicySet(version="x", policies=(policy("p", {"filter": {"field": "diet", "values": ["x"]}}),),
                        governance=strict)
    assert lint(allowed, now=NOW) == []


# --- directories: load errors and locations ------------------------------------------------


def skeleton(tmp_path: Path) -> Path:
    shutil.copy(POLICIES / "governance.yaml", tmp_path / "governance.yaml")
    shutil.copytree(POLICIES / "vocabularies", tmp_path / "vocabularies")
    return tmp_path


def test_load_errors_become_findings_at_file_and_line(tmp_path: Path) -> None:
    root = skeleton(tmp_path)
    (root / "broken.yaml").write_text(
        "id: broken\ntitle: x\nowner: y\ntrigger: {phrase: [a]}\nrules: [{shout: {}}]\n"
    )
    (root / "window.yaml").write_text(
        "id: window\ntitle: x\nowner: y\nactive: {from: 2026-02-01, until: 2026-01-01}\n"
        "trigger: {phrase: [a]}\nrules: [{route: {to: browse}}]\n"
    )
    findings = lint_directory(root, mapping=MAPPING, now=NOW)
    assert [(f.code, f.severity, f.policy_id, f.location) for f in findings] == [
        ("unknown_rule", "error", None, "broken.yaml:5"),
        ("bad_window", "error", None, "window.yaml:4"),
    ]
    assert all(f.code in ERROR_CODES for f in findings)


def test_the_loaders_invalid_fixture_is_reported_in_full() -> None:
    fixture = ROOT / "tests" / "fixtures" / "policies_invalid"
    findings = lint_directory(fixture, mapping=None, now=NOW)
    assert has_errors(findings) and {f.severity for f in findings} == {"error"}
    codes = {f.code for f in findings}
    assert {"governance_field", "governance_protected", "duplicate_id", "yaml_syntax"} <= codes
    assert all(re.fullmatch(r"[\w./-]+\.yaml:\d+|[\w./-]+", f.location) for f in findings), findings


def test_findings_of_a_directory_are_located_at_the_policy_id(tmp_path: Path) -> None:
    root = skeleton(tmp_path)
    (root / "pair.yaml").write_text(
        "# two brands on one phrase\n"
        "- id: acme\n  title: x\n  owner: y\n  priority: 80\n  trigger: {phrase: [chocolate]}\n"
        "  rules: [{filter: {field: brand, values: [acme]}}]\n"
        "- id: zenith\n  title: x\n  owner: y\n  trigger: {phrase: [chocolate]}\n"
        "  rules: [{filter: {field: brand, values: [zenith]}}]\n"
    )
    assert policy_locations(root) == {"acme": "pair.yaml:2", "zenith": "pair.yaml:8"}
    finding = one(lint_directory(root, mapping=MAPPING, now=NOW), "conflicting_filters")
    assert finding.location == "pair.yaml:8"
    assert finding.message.startswith("rules.0.filter: filter on 'brand' ['zenith'] has nothing in common")


# --- determinism and shape ----------------------------------------------------------------


def noisy_set() -> list[Policy]:
    return [
        policy("a", brand("acme"), priority=80),
        policy("b", brand("zenith")),
        policy("c", brand("zenith")),
        policy("d", {"filter": {"field": "colour", "values": ["red"]}}, enabled=False),
        policy("e", cohorts=["no way"], active={"until": "2026-01-01"}),
        policy("f", {"price": {"min": 20, "max": 10}}, trigger={"any": ["?"]}),
    ]


def test_output_is_deterministic_and_sorted_by_severity_then_location() -> None:
    policies = noisy_set()
    expected = run(*policies, mapping_fields=FIELDS, tested_policy_ids={"a"})
    for seed in range(5):
        random.Random(seed).shuffle(policies)
        assert run(*policies, mapping_fields=FIELDS, tested_policy_ids={"a"}) == expected
    severities = [f.severity for f in expected]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    assert {"conflicting_filters", "overlapping_triggers", "unmapped_field", "contradictory_filters",
            "unreachable_cohort", "window_expired", "unreachable_trigger", "disabled_policy",
            "untested_policy"} <= {f.code for f in expected}


def test_locations_sort_by_line_number() -> None:
    lines = dict(zip("abcdef", (10, 2, 30, 1, 20, 3), strict=True))
    locations = {k: f"x.yaml:{v}" for k, v in lines.items()}
    findings = run(*noisy_set(), locations=locations, tested_policy_ids=set())
    untested = [f.location for f in found(findings, "untested_policy")]
    assert untested == [f"x.yaml:{n}" for n in (1, 2, 3, 10, 20, 30)]


def test_finding_shape_and_codes() -> None:
    finding = Finding("window_expired", "warning", "p", "policy:p", "ended")
    assert finding.as_json() == {
        "code": "window_expired", "severity": "warning", "policy_id": "p", "location": "policy:p",
        "message": "ended",
    }
    with pytest.raises(ValueError):
        Finding("made_up", "warning", None, "x", "y")
    with pytest.raises(ValueError):
        Finding("window_expired", "fatal", None, "x", "y")  # type: ignore[arg-type]
    assert not set(LINT_CODES) & set(ERROR_CODES)
    assert has_errors([Finding("yaml_syntax", "error", None, "a.yaml:1", "bad")])
    assert not has_errors([finding])


def test_mapping_fields_of_flattens_objects_and_multi_fields() -> None:
    mapping = {"mappings": {"properties": {
        "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "seller": {"properties": {"name": {"type": "keyword"}, "rating": {"type": "float"}}},
    }}}
    assert mapping_fields_of(mapping) == {
        "title": "text", "title.raw": "keyword", "seller": "object", "seller.name": "keyword",
        "seller.rating": "float",
    }
    assert mapping_fields_of(mapping["mappings"]) == mapping_fields_of(mapping)
    assert FIELDS["brand.raw"] == "keyword" and FIELDS["price"] == "scaled_float"


def test_an_object_field_holds_no_value() -> None:
    fields = {**FIELDS, "colour": "object"}
    finding = one(run(policy("p", {"filter": {"field": "colour", "values": ["red"]}}), mapping_fields=fields),
                  "field_type_mismatch")
    assert "is an object" in finding.message


def test_docs_list_every_code_with_its_severity() -> None:
    text = (ROOT / "docs" / "lint.md").read_text(encoding="utf-8")
    for code, (severity, _) in LINT_CODES.items():
        assert f"| `{code}` | {severity} |" in text, code
    module = Path(__file__).resolve().parents[2] / "control_plane" / "lifecycle" / "lint.py"
    source = module.read_text(encoding="utf-8")
    for code, (severity, _) in LINT_CODES.items():
        assert re.search(rf"``{code}``\s+{severity}", source), code


def test_policies_a_consumer_shadows_conflict_with_nothing() -> None:
    eater = policy("eater", priority=90, trigger={"phrase": ["chocolate"], "consume": True})
    acme = policy("acme", brand("acme"), priority=80)
    zenith = policy("zenith", brand("zenith"), priority=50)
    findings = run(eater, acme, zenith)
    assert sorted(f.policy_id for f in found(findings, "shadowed_policy")) == ["acme", "zenith"]
    assert found(findings, "conflicting_filters") == []
