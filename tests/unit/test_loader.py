"""The loader: the demo policy set, versions, YAML round trip and located errors."""

from __future__ import annotations

import hashlib
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from control_plane.errors import ERROR_CODES, PolicyError, PolicyLoadError
from control_plane.loader import (
    build_policy_set,
    canonical_json,
    dump_policy_yaml,
    load_policy_set,
)
from control_plane.policy import Policy, PolicySet

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
INVALID = ROOT / "tests" / "fixtures" / "policies_invalid"


@pytest.fixture(scope="module")
def demo() -> PolicySet:
    return load_policy_set(POLICIES)


def policy_files(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*.yaml")
        if p.parts[len(root.parts)] != "vocabularies"
        and "tests" not in p.parts[len(root.parts):-1]
        and p.name != "governance.yaml"
    )


def skeleton(tmp_path: Path) -> Path:
    """A policy directory with the demo governance and vocabularies and no policy."""
    shutil.copy(POLICIES / "governance.yaml", tmp_path / "governance.yaml")
    shutil.copytree(POLICIES / "vocabularies", tmp_path / "vocabularies")
    return tmp_path


# --- the demo set ----------------------------------------------------------------------

#: id -> (priority, trigger kind, consume, rule kinds in order)
DEMO = {
    "oranges": (70, "exact", False, ["category"]),
    "cheap": (40, "any", True, ["price"]),
    "chocolate": (60, "phrase", False, ["category", "economics"]),
    "christmas-chocolate": (90, "phrase", False, ["category", "price"]),
    "without-allergen": (85, "pattern", True, ["exclude", "exclude"]),
    "under-price": (80, "pattern", True, ["price"]),
    "baby-formula": (70, "phrase", False, ["category", "economics"]),
    "clearance": (60, "any", True, ["filter", "economics"]),
    "vegan-shoppers": (20, "always", False, ["boost"]),
    "choc-rewrite": (50, "any", False, ["rewrite"]),
    "soda-synonyms": (50, "any", False, ["synonyms"]),
    "drinks-bury-sodas": (30, "any", False, ["bury"]),
    "orange-juice": (70, "phrase", False, ["category", "pin", "hide"]),
    "christmas-browse": (65, "exact", False, ["category", "route"]),
    "sponsored-dark-chocolate": (30, "phrase", False, ["sponsored"]),
    "in-stock-only": (1000, "always", False, ["filter"]),
    "visible-only": (1000, "always", False, ["filter"]),
    "market": (1000, "always", False, ["filter"]),
}


def test_the_demo_set_loads_with_every_policy(demo: PolicySet) -> None:
    assert [p.id for p in demo.policies] == sorted(DEMO)
    for policy in demo.policies:
        priority, kind, consume, rules = DEMO[policy.id]
        assert (policy.priority, policy.trigger.kind, policy.trigger.consume) == (
            priority, kind, consume,
        ), policy.id
        assert [rule.kind for rule in policy.rules] == rules, policy.id
        assert policy.title and policy.owner and policy.explain, policy.id
    assert re.fullmatch(r"[0-9a-f]{64}", demo.version)


def test_every_rule_kind_is_demonstrated(demo: PolicySet) -> None:
    from control_plane.policy import RULE_MODELS

    used = {rule.kind for policy in demo.policies for rule in policy.rules}
    assert used == set(RULE_MODELS)


def test_guards_are_always_on_and_touch_only_protected_fields(demo: PolicySet) -> None:
    guards = {p.id: p for p in demo.policies if p.kind == "guard"}
    assert set(guards) == {"in-stock-only", "visible-only", "market"}
    fields = {g.id: g.rules[0].body.model_dump()["field"] for g in guards.values()}
    assert fields == {"in-stock-only": "in_stock", "visible-only": "visible", "market": "market"}
    assert set(fields.values()) == set(demo.governance.protected_fields)
    assert guards["market"].rules[0].captures == ("market",)


def test_demo_examples_of_the_design(demo: PolicySet) -> None:
    chocolate, christmas = demo.policy("chocolate"), demo.policy("christmas-chocolate")
    assert chocolate.rules[1].body.model_dump(exclude_none=True) == {"margin_weight": 3.0}
    assert christmas.rules[0].body.model_dump() == {
        "values": ("Christmas chocolates",), "strategy": "override",
    }
    assert christmas.active is not None
    assert christmas.is_active(datetime(2026, 12, 10, tzinfo=UTC))
    assert not christmas.is_active(datetime(2026, 11, 30, 23, 59, tzinfo=UTC))
    assert demo.policy("cheap").rules[0].body.model_dump()["max"] == {"percentile": 30}
    assert demo.policy("baby-formula").rules[1].body.model_dump() == {
        "margin_weight": 0.0, "popularity_weight": 5.0,
    }
    assert demo.policy("clearance").rules[1].body.model_dump() == {
        "margin_weight": 0.0, "popularity_weight": 0.0,
    }
    assert demo.policy("vegan-shoppers").cohorts == ("vegan",)
    without = demo.policy("without-allergen")
    assert without.trigger.captures == ("allergen",)
    assert without.trigger.patterns[0].cues == ("without", "no", "free of", "sans", "pas de")
    vocabulary = demo.vocabulary("allergens")
    assert vocabulary is not None
    assert {"arachide", "cacahuète", "peanut"} <= set(vocabulary.entries["peanuts"])


def test_allergen_vocabulary_keys_are_catalog_values(demo: PolicySet) -> None:
    from control_plane.catalog.tags import ALLERGENS

    vocabulary = demo.vocabulary("allergens")
    assert vocabulary is not None
    assert set(vocabulary.entries) == ALLERGENS


def test_demo_ids_exist_in_the_supplement(demo: PolicySet) -> None:
    supplement = yaml.safe_load((ROOT / "data" / "supplement.yaml").read_text(encoding="utf-8"))
    known = {product["id"] for product in supplement["products"]}
    used = {
        product_id
        for policy in demo.policies
        for rule in policy.rules
        for product_id in rule.body.model_dump().get("ids", ())
    }
    assert used and used <= known


def test_demo_categories_exist_in_the_taxonomy(demo: PolicySet) -> None:
    taxonomy = (ROOT / "data" / "category_rules.yaml").read_text(encoding="utf-8")
    names = set(re.findall(r"name: ([^,}\n]+)", taxonomy))
    for policy in demo.policies:
        for rule in policy.rules:
            if rule.kind == "category":
                assert set(rule.body.model_dump()["values"]) <= names, policy.id


# --- version ---------------------------------------------------------------------------


def test_version_is_the_sha256_of_the_canonical_json(demo: PolicySet) -> None:
    text = canonical_json(demo.policies, demo.vocabularies, demo.governance)
    assert demo.version == hashlib.sha256(text.encode()).hexdigest()
    assert load_policy_set(POLICIES).version == demo.version


def test_version_does_not_depend_on_file_names_order_or_layout(
    demo: PolicySet, tmp_path: Path
) -> None:
    target = skeleton(tmp_path)
    files = policy_files(POLICIES)
    # one file per policy under reversed, meaningless names, all in one folder ...
    for number, path in enumerate(reversed(files[:6])):
        shutil.copy(path, target / f"{number:02d}-{path.stem[::-1]}.yml")
    # ... several policies as one YAML list ...
    listed = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in files[6:12]]
    (target / "deep" / "er").mkdir(parents=True)
    (target / "deep" / "er" / "list.yaml").write_text(yaml.safe_dump(listed[::-1]))
    # ... and the rest as several documents of one file, in a shuffled order.
    rest = [p.read_text(encoding="utf-8") for p in files[12:]]
    (target / "documents.yaml").write_text("\n---\n".join(rest[1::2] + rest[::2]))
    assert load_policy_set(target).version == demo.version


def test_version_changes_with_content(demo: PolicySet, tmp_path: Path) -> None:
    target = skeleton(tmp_path)
    for path in policy_files(POLICIES):
        text = path.read_text(encoding="utf-8")
        if path.name == "cheap.yaml":
            text = text.replace("percentile: 30", "percentile: 25")
        (target / path.name).write_text(text, encoding="utf-8")
    assert load_policy_set(target).version != demo.version


def test_build_policy_set_equals_the_loaded_set(demo: PolicySet) -> None:
    shuffled = list(demo.policies[::-1])
    assert build_policy_set(shuffled, demo.vocabularies, demo.governance) == demo


def test_a_policy_set_survives_json(demo: PolicySet) -> None:
    assert PolicySet.model_validate_json(demo.model_dump_json(by_alias=True)) == demo


# --- round trip ------------------------------------------------------------------------

TRICKY = {
    "id": "tricky",
    "title": "Ünïcode, 'quotes' and \"double\" quotes: a: b # not a comment",
    "owner": "no",
    "priority": 0,
    "enabled": False,
    "cohorts": ["yes", "on", "null"],
    "active": {"from": datetime(2026, 3, 1, 8, 30, tzinfo=UTC)},
    "trigger": {"pattern": ["(moins de|under) {amount}", "(max) {amount}"], "consume": True},
    "rules": [
        {"price": {"min": 0.5, "max": "{amount}", "strategy": "override"}},
        {"filter": {"field": "labels", "values": ["true", True, 1, 1.5, "1.5", "~"]}},
        {"rewrite": {"from": "chocolat noir", "to": ""}},
        {"route": {"to": "title"}},
    ],
    "explain": "multi\nline\n",
    "origin": "llm",
}


def test_dump_then_load_gives_equal_policies(demo: PolicySet, tmp_path: Path) -> None:
    target = skeleton(tmp_path)
    policies = [*demo.policies, Policy.model_validate(TRICKY)]
    for policy in policies:
        (target / f"{policy.id}.yaml").write_text(dump_policy_yaml(policy), encoding="utf-8")
    reloaded = load_policy_set(target)
    assert reloaded.policies == tuple(sorted(policies, key=lambda p: p.id))


def test_dump_is_the_author_form(demo: PolicySet) -> None:
    assert dump_policy_yaml(demo.policy("cheap")) == (
        "id: cheap\n"
        "title: Cheap means the bottom 30% of the category's prices\n"
        "owner: merch-team-pricing\n"
        "priority: 40\n"
        "trigger: {any: [cheap, pas cher, bon marché, budget], consume: true}\n"
        "rules:\n"
        "  - price: {max: {percentile: 30}}\n"
        "explain: '\"cheap\" becomes a price ceiling relative to the category, not a search"
        " word.'\n"
    )
    assert "active: {from: 2026-12-01, until: 2026-12-26}" in dump_policy_yaml(
        demo.policy("christmas-chocolate")
    )


# --- errors ----------------------------------------------------------------------------

#: Every error of tests/fixtures/policies_invalid: (file, line, column, code).
EXPECTED_ERRORS = [
    ("governance/boost_too_high.yaml", 10, 7, "governance_boost"),
    ("governance/duplicate_a.yaml", 1, 1, "duplicate_id"),
    ("governance/duplicate_b.yaml", 2, 1, "duplicate_id"),
    ("governance/outside_governance.yaml", 6, 14, "governance_field"),
    ("governance/protected.yaml", 6, 14, "governance_protected"),
    ("governance/too_many_pins.yaml", 7, 11, "governance_pins"),
    ("governance/too_many_sponsored.yaml", 6, 17, "governance_sponsored"),
    ("rules/bad_window.yaml", 6, 3, "bad_window"),
    ("rules/deep_value.yaml", 10, 7, "invalid_value"),
    ("rules/documents.yaml", 12, 1, "trigger_kind"),
    ("rules/documents.yaml", 13, 3, "unknown_field"),
    ("rules/guard_not_always.yaml", 6, 1, "guard_trigger"),
    ("rules/lists.yaml", 8, 3, "missing_field"),
    ("rules/uncaptured.yaml", 8, 5, "unknown_capture"),
    ("rules/unknown_key.yaml", 4, 1, "unknown_field"),
    ("rules/unknown_rule.yaml", 7, 5, "unknown_rule"),
    ("rules/unknown_vocabulary.yaml", 10, 7, "unknown_vocabulary"),
    ("syntax/bad_yaml.yaml", 4, 39, "yaml_syntax"),
    ("syntax/duplicate_key.yaml", 6, 1, "duplicate_key"),
]


def load_errors(directory: Path) -> tuple[PolicyError, ...]:
    with pytest.raises(PolicyLoadError) as raised:
        load_policy_set(directory)
    return raised.value.errors


def test_every_error_of_a_directory_in_one_run() -> None:
    errors = load_errors(INVALID)
    assert [(e.file, e.line, e.column, e.code) for e in errors] == EXPECTED_ERRORS


def test_errors_say_what_is_wrong() -> None:
    messages = {(e.file, e.code): e.message for e in load_errors(INVALID)}
    assert messages[("rules/deep_value.yaml", "invalid_value")].startswith("rules.2.price.max: ")
    assert "'filtre'" in messages[("rules/unknown_rule.yaml", "unknown_rule")]
    assert "{allergen}" in messages[("rules/uncaptured.yaml", "unknown_capture")]
    assert "'brand'" in messages[("governance/outside_governance.yaml", "governance_field")]
    assert "'owner'" in messages[("rules/lists.yaml", "missing_field")]
    assert "'priorty'" in messages[("rules/unknown_key.yaml", "unknown_field")]


def test_errors_print_as_file_line_column_code_message() -> None:
    error = load_errors(INVALID)[-1]
    assert str(error) == (
        "syntax/duplicate_key.yaml:6:1: duplicate_key: key 'priority' appears twice in this"
        " mapping"
    )


def test_one_bad_file_means_no_policy_set(tmp_path: Path) -> None:
    target = skeleton(tmp_path)
    for path in policy_files(POLICIES):
        shutil.copy(path, target / path.name)
    (target / "cheap.yaml").write_text(
        (POLICIES / "pricing" / "cheap.yaml").read_text(encoding="utf-8").replace(
            "percentile: 30", "percentile: 300"
        ),
        encoding="utf-8",
    )
    errors = load_errors(target)
    assert [(e.file, e.line, e.code) for e in errors] == [("cheap.yaml", 10, "invalid_value")]
    assert errors[0].message.startswith("rules.0.price.max")


def test_a_missing_governance_file_is_reported(tmp_path: Path) -> None:
    shutil.copy(POLICIES / "food" / "oranges.yaml", tmp_path / "oranges.yaml")
    errors = load_errors(tmp_path)
    assert [(e.file, e.line, e.column, e.code) for e in errors] == [
        ("governance.yaml", 0, 0, "missing_governance")
    ]


def test_unreadable_files_and_missing_directories(tmp_path: Path) -> None:
    target = skeleton(tmp_path)
    (target / "latin1.yaml").write_bytes("id: p\ntitle: caf\xe9\n".encode("latin-1"))
    assert [(e.file, e.line, e.column, e.code) for e in load_errors(target)] == [
        ("latin1.yaml", 2, 11, "bad_encoding")
    ]
    assert [e.code for e in load_errors(tmp_path / "nowhere")] == ["io_error"]


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("id: p\ntitle: t\x00x\n", 2, 9),  # NUL
        ("id: p\ntitle: café \x07\n", 2, 13),  # BEL, columns count characters
        ("# \x1b\n", 1, 3),  # ESC in a comment
        ("id: p\r\ntitle: \x7f\r\n", 2, 8),  # DEL, CRLF line ends
        ("id: p\ntitle: \ufffe\n", 2, 8),  # a non-character
    ],
)
def test_control_characters_are_located_errors(
    tmp_path: Path, text: str, line: int, column: int
) -> None:
    target = skeleton(tmp_path)
    (target / "ctl.yaml").write_bytes(text.encode("utf-8"))
    errors = load_errors(target)
    assert [(e.file, e.line, e.column, e.code) for e in errors] == [
        ("ctl.yaml", line, column, "bad_character")
    ]
    assert errors[0].message.startswith("unacceptable character #x")


@pytest.mark.parametrize("where", ["governance.yaml", "vocabularies/allergens.yaml"])
def test_bad_bytes_in_governance_and_vocabularies_are_located(tmp_path: Path, where: str) -> None:
    target = skeleton(tmp_path)
    path = target / where
    path.write_bytes(path.read_bytes() + b"# \x00\n")
    lines = path.read_bytes().count(b"\n")
    errors = [e for e in load_errors(target) if e.file == where]
    assert [(e.line, e.column, e.code) for e in errors] == [(lines, 3, "bad_character")]


def test_nesting_too_deep_is_a_syntax_error(tmp_path: Path) -> None:
    target = skeleton(tmp_path)
    (target / "deep.yaml").write_text("id: " + "[" * 20000 + "]" * 20000 + "\n")
    assert [(e.file, e.code) for e in load_errors(target)] == [("deep.yaml", "yaml_syntax")]


def test_syntax_errors_read_the_same_with_or_without_libyaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libyaml parses the files; a file it refuses is reported by PyYAML's own parser, so
    the messages and marks do not depend on which loader is installed."""
    import control_plane.loader as loader

    assert loader._FAST_LOADER is not None  # libyaml is what makes check fast
    with_libyaml = [str(e) for e in load_errors(INVALID)]
    monkeypatch.setattr(loader, "_FAST_LOADER", None)
    assert [str(e) for e in load_errors(INVALID)] == with_libyaml
    assert "syntax/bad_yaml.yaml:4:39: yaml_syntax: " in "\n".join(with_libyaml)


@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pyyaml"])
def test_a_merge_key_overridden_is_no_duplicate_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, libyaml: bool
) -> None:
    """Building ``<<`` adds the merged pairs to the node itself: libyaml's documents were
    built before their keys were checked, so every key a merge overrode was reported as a
    duplicate. A key really written twice still is."""
    import control_plane.loader as loader

    if not libyaml:
        monkeypatch.setattr(loader, "_FAST_LOADER", None)
    target = skeleton(tmp_path)
    (target / "merged.yaml").write_text(
        "- &base {id: base, title: t, owner: o, priority: 10, trigger: {phrase: [base]},"
        " rules: [{category: {values: [Chocolate]}}]}\n"
        "- <<: *base\n  id: merged\n  trigger: {phrase: [merged]}\n"
    )
    assert {p.id: p.priority for p in load_policy_set(target).policies} == {"base": 10, "merged": 10}
    (target / "merged.yaml").write_text(
        (target / "merged.yaml").read_text() + "  id: twice\n"
    )
    assert [(e.line, e.column, e.code) for e in load_errors(target)] == [(5, 3, "duplicate_key")]


def test_libyaml_and_pyyaml_locate_every_node_alike() -> None:
    """The C loader's node marks are the pure-Python loader's, so every located error and
    every policy location is the same whichever parses."""
    from control_plane.loader import _parse_fast

    for path in sorted(POLICIES.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        fast = _parse_fast(text, path.name)
        assert fast is not None, path
        slow = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        assert [_marks(parsed.node) for parsed in fast] == [_marks(node) for node in slow], path
        assert [parsed.data for parsed in fast] == list(yaml.safe_load_all(text)), path


def _marks(node: Any) -> list[tuple[int, int]]:
    found = [(node.start_mark.line, node.start_mark.column)]
    if isinstance(node.value, list):
        for item in node.value:
            for part in item if isinstance(item, tuple) else (item,):
                found += _marks(part)
    return found


def test_documents_that_are_not_policies(tmp_path: Path) -> None:
    target = skeleton(tmp_path)
    (target / "scalar.yaml").write_text("just words\n")
    (target / "items.yaml").write_text("- 42\n")
    (target / "empty.yaml").write_text("# nothing yet\n---\n")
    assert [(e.file, e.line, e.column, e.code) for e in load_errors(target)] == [
        ("items.yaml", 1, 3, "invalid_document"),
        ("scalar.yaml", 1, 1, "invalid_document"),
    ]


def test_duplicate_vocabularies_and_invalid_vocabularies(tmp_path: Path) -> None:
    target = skeleton(tmp_path)
    (target / "vocabularies" / "copy.yaml").write_text("name: allergens\nentries: {milk: [lait]}\n")
    (target / "vocabularies" / "broken.yaml").write_text("entries: [milk]\n")
    shutil.copy(POLICIES / "dietary" / "without-allergen.yaml", target / "w.yaml")
    (target / "uses-broken.yaml").write_text(
        "id: uses-broken\ntitle: t\nowner: o\ntrigger: {pattern: ['(sans) {x}']}\n"
        "rules:\n  - exclude: {field: allergens, values: ['{x}'], vocabulary: broken}\n"
    )
    # the broken vocabulary is reported once, not again for the policy that names it
    assert [(e.file, e.line, e.column, e.code) for e in load_errors(target)] == [
        ("vocabularies/allergens.yaml", 3, 1, "duplicate_id"),
        ("vocabularies/broken.yaml", 1, 1, "invalid_value"),
        ("vocabularies/copy.yaml", 1, 1, "duplicate_id"),
    ]


def test_build_policy_set_applies_the_same_checks(demo: PolicySet) -> None:
    rogue = Policy.model_validate({
        "id": "rogue", "title": "t", "owner": "o", "trigger": {"any": ["x"]},
        "rules": [{"boost": {"field": "in_stock", "values": [False], "weight": 9}}],
    })
    with pytest.raises(PolicyLoadError) as raised:
        build_policy_set([*demo.policies, rogue, rogue], demo.vocabularies, demo.governance)
    assert [(e.file, e.code) for e in raised.value.errors] == [
        ("policy:rogue", "duplicate_id"),
        ("policy:rogue", "governance_boost"),
        ("policy:rogue", "governance_protected"),
    ]
    assert raised.value.errors[1].message == (
        "rules.0.boost.weight: boost weight 9 exceeds max_boost_weight 5"
    )


def test_validation_errors_are_located_where_the_author_wrote_them() -> None:
    with pytest.raises(ValidationError) as raised:
        Policy.model_validate({
            "id": "x", "title": "t", "owner": "o",
            "trigger": {"pattern": ["(sans) {x}", "oops"]},
            "rules": [
                {"category": {"values": ["A"]}},
                {"economics": {"margin_weight": 1}},
                {"price": {"max": 5, "floor": 1}},
            ],
        })
    assert sorted((e["loc"], e["type"]) for e in raised.value.errors()) == [
        (("rules", 2, "price", "floor"), "extra_forbidden"),
        (("trigger", "pattern", 1), "bad_pattern"),
    ]


def test_every_code_is_documented_and_snake_case() -> None:
    for code, meaning in ERROR_CODES.items():
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", code) and meaning
    with pytest.raises(ValueError):
        PolicyError(code="not_a_code", message="m", file="f")


def test_a_load_error_sorts_and_deduplicates() -> None:
    b = PolicyError(code="yaml_syntax", message="m", file="b.yaml", line=1, column=1)
    a2 = PolicyError(code="duplicate_id", message="m", file="a.yaml", line=2, column=1)
    a1 = PolicyError(code="unknown_rule", message="m", file="a.yaml", line=1, column=9)
    error = PolicyLoadError([b, a2, a1, b])
    assert error.errors == (a1, a2, b)
    assert str(error).splitlines()[0] == "3 policy errors"


HEAD = "id: p\ntitle: t\nowner: o\n"
RULE = "rules:\n  - category: {values: [Chocolates]}\n"

#: code -> a policy file that produces exactly that error (with the demo governance).
ONE_ERROR_EACH = {
    "yaml_syntax": HEAD + "trigger: {any: [x]\n" + RULE,
    "bad_character": HEAD + "trigger: {any: [x\x07]}\n" + RULE,
    "yaml_aliases": HEAD + "trigger: &t {any: [x, *t]}\n" + RULE,
    "duplicate_key": HEAD + "owner: o2\ntrigger: {any: [x]}\n" + RULE,
    "invalid_document": "- just a string\n",
    "unknown_field": HEAD + "colour: blue\ntrigger: {any: [x]}\n" + RULE,
    "missing_field": "id: p\ntitle: t\ntrigger: {any: [x]}\n" + RULE,
    "invalid_value": HEAD + "priority: 2000\ntrigger: {any: [x]}\n" + RULE,
    "unknown_rule": HEAD + "trigger: {any: [x]}\nrules:\n  - boots: {ids: [a]}\n",
    "rule_shape": HEAD + "trigger: {any: [x]}\nrules:\n  - {pin: {ids: [a]}, hide: {ids: [b]}}\n",
    "trigger_kind": HEAD + "trigger: {any: [x], phrase: [y]}\n" + RULE,
    "bad_pattern": HEAD + "trigger: {pattern: ['without {item}']}\n" + RULE,
    "bad_window": HEAD + "active: {from: 2026-02-01, until: 2026-02-01}\n"
    "trigger: {any: [x]}\n" + RULE,
    "guard_trigger": HEAD + "kind: guard\ntrigger: {any: [x]}\n" + RULE,
    "guard_cohorts": HEAD + "kind: guard\ncohorts: [vip]\ntrigger: {always: true}\n" + RULE,
    "unknown_capture": HEAD + "trigger: {any: [x]}\nrules:\n  - price: {max: '{amount}'}\n",
    "duplicate_id": HEAD + "trigger: {any: [x]}\n" + RULE + "---\n" + HEAD
    + "trigger: {any: [y]}\n" + RULE,
    "unknown_vocabulary": HEAD + "trigger: {pattern: ['(sans) {x}']}\nrules:\n"
    "  - exclude: {field: allergens, values: ['{x}'], vocabulary: colours}\n",
    "governance_field": HEAD + "trigger: {any: [x]}\nrules:\n"
    "  - boost: {field: price, values: [1], weight: 2}\n",
    "governance_protected": HEAD + "trigger: {any: [x]}\nrules:\n"
    "  - exclude: {field: visible, values: [true]}\n",
    "governance_boost": HEAD + "trigger: {any: [x]}\nrules:\n"
    "  - sponsored: {ids: [a], weight: 6}\n",
    "governance_pins": HEAD + "trigger: {any: [x]}\nrules:\n"
    "  - pin: {ids: [a, b, c, d, e, f]}\n",
    "governance_sponsored": HEAD + "trigger: {any: [x]}\nrules:\n"
    "  - sponsored: {ids: [a, b, c, d]}\n",
    "phrase_too_long": HEAD + "trigger: {phrase: [" + "x" * 513 + "]}\n" + RULE,
}


def test_the_table_covers_every_code() -> None:
    # match_field_type needs the catalog's field types: tests/unit/test_shopper_language.py
    assert set(ONE_ERROR_EACH) | {
        "io_error", "missing_governance", "bad_encoding", "match_field_type"
    } == set(ERROR_CODES)


@pytest.mark.parametrize("code", sorted(ONE_ERROR_EACH))
def test_each_code_alone(tmp_path: Path, code: str) -> None:
    target = skeleton(tmp_path)
    (target / "policy.yaml").write_text(ONE_ERROR_EACH[code], encoding="utf-8")
    codes = [e.code for e in load_errors(target)]
    assert set(codes) == {code}, codes


def test_union_errors_become_one_error(tmp_path: Path) -> None:
    target = skeleton(tmp_path)
    (target / "policy.yaml").write_text(
        HEAD + "trigger: {any: [x]}\nrules:\n  - price:\n      max: [1]\n", encoding="utf-8"
    )
    (error,) = load_errors(target)
    assert (error.line, error.column, error.code) == (7, 7, "invalid_value")
    assert error.message == (
        "rules.0.price.max: float: Input should be a valid number; RelativeBound: Input should"
        " be a valid dictionary or instance of RelativeBound; str: Input should be a valid string"
    )


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: 2026-12-01\nc: 2026-12-01T10:00:00Z\nd: [yes, no, ~, 1.5, 0x1F, 1_000, '3', 1:30]\n",
        "base: &b {x: 1, y: [1, 2]}\nother:\n  <<: *b\n  y: 3\n",  # a merge key
        "~: 1\nnull: 2\n'': 3\n",
        "s: !!set {a, b}\nbin: !!binary aGVsbG8=\no: !!omap [{a: 1}]\n",
        "a: &x [1]\nb: *x\n",
        "---\na: 1\n---\n- x\n- {y: z}\n",
        "e: ''\nf:\n",
    ],
)
def test_the_fast_constructor_builds_what_safe_load_builds(text: str) -> None:
    from control_plane.loader import _parse_fast

    parsed = _parse_fast(text, "x.yaml")
    assert parsed is not None
    assert [document.data for document in parsed] == list(yaml.safe_load_all(text))


@pytest.mark.parametrize("text", ["? [1, 2]\n: v\n", "x: !custom 1\n", "a: [1\n"])
def test_what_libyaml_or_the_constructor_refuses_is_left_to_pyyaml(text: str) -> None:
    from control_plane.loader import _parse_fast

    assert _parse_fast(text, "x.yaml") is None
    with pytest.raises(yaml.YAMLError):
        list(yaml.safe_load_all(text))
