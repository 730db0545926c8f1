"""Loading policy test files: the demo suite, located errors, hashing and storage."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from control_plane.lifecycle.suite import (
    STORED,
    Suite,
    SuiteLoadError,
    load_suite,
    suite_from_json,
)
from control_plane.loader import load_policy_set

POLICIES = Path(__file__).resolve().parents[2] / "policies"

CASE = """\
- name: oranges
  intent: oranges
  expect: {applied: [oranges]}
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def errors_of(root: Path) -> list[tuple[str, int, int, str]]:
    with pytest.raises(SuiteLoadError) as raised:
        load_suite(root)
    return [(e.file, e.line, e.column, e.code) for e in raised.value.errors]


def messages_of(root: Path) -> list[str]:
    with pytest.raises(SuiteLoadError) as raised:
        load_suite(root)
    return [str(e) for e in raised.value.errors]


# --- the demo suite --------------------------------------------------------------------


def test_demo_suite_names_every_demo_policy_and_only_those() -> None:
    suite = load_suite(POLICIES)
    policy_ids = {policy.id for policy in load_policy_set(POLICIES).policies}
    assert len(policy_ids) == 18
    assert suite.policy_ids() == policy_ids
    assert len(suite.cases) >= len(policy_ids)
    assert all(case.file.split("/")[1] == "tests" for case in suite.cases)


def test_demo_cases_are_in_file_and_line_order() -> None:
    places = [(case.file, case.line) for case in load_suite(POLICIES).cases]
    assert places == sorted(places) and len(set(places)) == len(places)


# --- located errors ----------------------------------------------------------------------


def test_bad_yaml_is_located(tmp_path: Path) -> None:
    write(tmp_path, {"food/tests/broken.yaml": "- name: x\n  intent: [unclosed\n  expect: {}\n"})
    [(file, line, column, code)] = errors_of(tmp_path)
    assert (file, code) == ("food/tests/broken.yaml", "yaml_syntax")
    assert line == 3 and column > 0


def test_unknown_key_is_located_at_the_key(tmp_path: Path) -> None:
    write(tmp_path, {"tests/a.yaml": """\
        - name: typo
          intent: oranges
          expect:
            applid: [oranges]
        """})
    assert errors_of(tmp_path) == [("tests/a.yaml", 4, 5, "unknown_field")]
    assert "expect.applid: unknown field 'applid'" in messages_of(tmp_path)[0]


def test_missing_intent_is_located_at_the_case(tmp_path: Path) -> None:
    write(tmp_path, {"tests/a.yaml": CASE + "- name: no intent\n  expect: {applied: [oranges]}\n"})
    assert errors_of(tmp_path) == [("tests/a.yaml", 4, 3, "missing_field")]
    assert "missing required field 'intent'" in messages_of(tmp_path)[0]


def test_duplicate_names_are_reported_at_each_use(tmp_path: Path) -> None:
    write(tmp_path, {"a/tests/one.yaml": CASE, "b/tests/two.yaml": "# header\n" + CASE})
    assert errors_of(tmp_path) == [
        ("a/tests/one.yaml", 1, 3, "duplicate_id"),
        ("b/tests/two.yaml", 2, 3, "duplicate_id"),
    ]
    assert "'oranges' is used 2 times (a/tests/one.yaml:1, b/tests/two.yaml:2)" in messages_of(tmp_path)[0]


def test_every_error_at_once_sorted_and_no_half_loaded_suite(tmp_path: Path) -> None:
    write(tmp_path, {
        "b/tests/b.yaml": """\
            - name: bad market
              intent: oranges
              market: FR
              expect: {applied: [oranges]}
            - name: empty expect
              intent: oranges
              expect: {}
            """,
        "a/tests/a.yaml": """\
            - name: bad plan path
              intent: oranges
              expect: {plan: {pricing.max: 3}}
            - name: authored location
              intent: oranges
              line: 7
              expect: {applied: [oranges]}
            """,
    })
    assert errors_of(tmp_path) == [
        ("a/tests/a.yaml", 3, 12, "invalid_value"),
        ("a/tests/a.yaml", 6, 3, "unknown_field"),
        ("b/tests/b.yaml", 3, 3, "invalid_value"),
        ("b/tests/b.yaml", 7, 3, "invalid_value"),
    ]
    text = "\n".join(messages_of(tmp_path))
    assert "does not start with a plan field" in text
    assert "expect names no expectation" in text


@pytest.mark.parametrize(
    ("expect", "at", "message"),
    [
        ("{results: {min_hits: 5, max_hits: 1}}", "results:", "min_hits 5 exceeds max_hits 1"),
        ("{results: {size: 5, top_n: 6}}", "results:", "top_n 6 exceeds size 5"),
        ("{results: {size: 60}}", "size: 60", "less than or equal to 50"),
        ("{results: {every: {price: {lte: cheap}}}}", "lte:", "price.lte: int: Input should be"),
        ("{results: {every: {price: {below: 3}}}}", "below:", "unknown field 'below'"),
        ("{results: {none: {price: {}}}}", "price:", "at least one operator"),
        ("{status: done}", "status:", "'ok' or 'no_results'"),
        ("{tier: lax}", "tier:", "'strict', 'relaxed' or 'broad'"),
        ("{plan: {filters..field: x}}", "plan:", "empty segment"),
        ("{dsl_contains: [terms]}", "terms", "dsl_contains.0: Input should be a valid dictionary"),
    ],
)
def test_invalid_expectations_are_located_at_their_node(
    tmp_path: Path, expect: str, at: str, message: str
) -> None:
    """``at``: the text the error's column points to, on line 3."""
    line = f"  expect: {expect}"
    write(tmp_path, {"tests/a.yaml": f"- name: x\n  intent: oranges\n{line}\n"})
    [(file, number, column, _)] = errors_of(tmp_path)
    assert (file, number) == ("tests/a.yaml", 3)
    assert line[column - 1 :].startswith(at)
    assert message in messages_of(tmp_path)[0]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("name: single mapping\nintent: x\n", "unknown_field"),
        ("cases: oranges\n", "invalid_document"),
        ("just text\n", "invalid_document"),
        ("- just text\n", "invalid_document"),
        ("{}\n", "missing_field"),
    ],
)
def test_a_document_is_a_list_of_cases_or_a_cases_mapping(tmp_path: Path, text: str, code: str) -> None:
    write(tmp_path, {"tests/a.yaml": text})
    assert code in {error[3] for error in errors_of(tmp_path)}


def test_errors_carry_the_loader_shape(tmp_path: Path) -> None:
    write(tmp_path, {"tests/a.yaml": "- {name: x, intent: oranges, expect: {applid: []}}\n"})
    with pytest.raises(SuiteLoadError) as raised:
        load_suite(tmp_path)
    assert str(raised.value).startswith("1 policy test error\ntests/a.yaml:1:")
    assert raised.value.errors[0].to_dict()["code"] == "unknown_field"


def test_not_a_directory_is_an_io_error(tmp_path: Path) -> None:
    assert errors_of(tmp_path / "missing") == [(str(tmp_path / "missing"), 0, 0, "io_error")]


# --- what is read ------------------------------------------------------------------------


def test_only_files_in_tests_folders_are_read(tmp_path: Path) -> None:
    write(tmp_path, {
        "food/oranges.yaml": "this is a policy file: [not, a, test]\n",
        "food/tests/oranges.yml": CASE,
        "food/tests/.draft.yaml": "broken: [\n",
        ".hidden/tests/x.yaml": "broken: [\n",
        "food/tests/nested/deeper.yaml": CASE.replace("name: oranges", "name: nested"),
        "food/tests/notes.txt": "not yaml\n",
    })
    suite = load_suite(tmp_path)
    assert [(c.file, c.line, c.name) for c in suite.cases] == [
        ("food/tests/nested/deeper.yaml", 1, "nested"),
        ("food/tests/oranges.yml", 1, "oranges"),
    ]


def test_no_test_file_is_an_empty_suite(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, {"governance.yaml": "{}\n"}))
    assert suite.cases == () and suite.policy_ids() == set()
    assert suite.as_json() == {"sha256": Suite(()).sha256, "cases": []}


def test_cases_mapping_form_shorthands_and_times(tmp_path: Path) -> None:
    write(tmp_path, {"tests/a.yaml": """\
        cases:
          - name: shorthands
            intent: chocolate
            cohorts: [vegan, vegan, keto]
            now: 2026-12-10
            expect:
              skipped: [christmas-chocolate]
              results: {every: {category: Chocolates}}
          - name: naive time is UTC
            intent: chocolate
            now: 2026-12-10 08:30:00
            expect: {tier: strict}
        """})
    first, second = load_suite(tmp_path).cases
    assert first.line == 2 and second.line == 9
    assert first.cohorts == ("keto", "vegan")
    assert first.now == datetime(2026, 12, 10, tzinfo=UTC)
    assert second.now == datetime(2026, 12, 10, 8, 30, tzinfo=UTC)
    assert first.expect.skipped == {"christmas-chocolate": ""}
    assert first.expect.results is not None
    assert first.expect.results.every["category"].operators() == (("eq", "Chocolates"),)
    assert first.expect.needs_search and second.expect.needs_search


def test_a_file_now_pins_every_case_that_sets_none(tmp_path: Path) -> None:
    write(tmp_path, {"tests/a.yaml": """\
        now: 2026-11-15T12:00:00Z
        cases:
          - {name: by the file, intent: chocolate, expect: {tier: strict}}
          - {name: by the case, intent: chocolate, now: 2026-12-10, expect: {tier: strict}}
        """, "tests/b.yaml": "- {name: unpinned, intent: chocolate, expect: {tier: strict}}\n"})
    by_name = {case.name: case for case in load_suite(tmp_path).cases}
    assert by_name["by the file"].now == datetime(2026, 11, 15, 12, tzinfo=UTC)
    assert by_name["by the case"].now == datetime(2026, 12, 10, tzinfo=UTC)
    assert by_name["unpinned"].now is None  # another file: not pinned by a.yaml


def test_a_file_now_that_is_not_a_time_is_located(tmp_path: Path) -> None:
    write(tmp_path, {"tests/a.yaml": "now: next tuesday\nnever: 1\ncases:\n" + textwrap.indent(CASE, "  ")})
    assert errors_of(tmp_path) == [
        ("tests/a.yaml", 1, 1, "invalid_value"), ("tests/a.yaml", 2, 1, "unknown_field"),
    ]
    assert "(expected now, cases)" in messages_of(tmp_path)[1]


def test_moving_now_between_the_file_and_its_cases_keeps_the_hash(tmp_path: Path) -> None:
    by_file = load_suite(write(tmp_path / "one", {"tests/a.yaml": "now: 2026-11-15\ncases:\n"
                                                  + textwrap.indent(CASE, "  ")}))
    by_case = load_suite(write(tmp_path / "two", {"tests/a.yaml": CASE.replace(
        "  intent: oranges", "  intent: oranges\n  now: 2026-11-15T00:00:00Z")}))
    unpinned = load_suite(write(tmp_path / "three", {"tests/a.yaml": CASE}))
    assert by_file.sha256 == by_case.sha256 != unpinned.sha256


def test_with_file_takes_the_file_now() -> None:
    demo = load_suite(POLICIES)
    expect = {"applied": ["oranges"]}
    cases = [{"name": "api case", "intent": "oranges", "expect": expect},
             {"name": "own now", "intent": "oranges", "now": "2027-01-01", "expect": expect}]
    updated = demo.with_file("food/tests/oranges.yaml", cases, datetime(2026, 11, 15, tzinfo=UTC))
    by_name = {case.name: case for case in updated.cases}
    assert by_name["api case"].now == datetime(2026, 11, 15, tzinfo=UTC)
    assert by_name["own now"].now == datetime(2027, 1, 1, tzinfo=UTC)


# --- hashing and storage -----------------------------------------------------------------


def test_sha256_ignores_files_order_and_formatting_not_content(tmp_path: Path) -> None:
    two = CASE + "- {name: cheap, intent: cheap chocolate, expect: {applied: [cheap]}}\n"
    original = load_suite(write(tmp_path / "one", {"tests/a.yaml": two}))
    moved = load_suite(write(tmp_path / "two", {
        "x/tests/z.yaml": "- name: cheap\n  intent: cheap chocolate\n  expect:\n    applied: [cheap]\n",
        "y/tests/a.yaml": "# comment\n\n" + CASE,
    }))
    changed = load_suite(write(tmp_path / "three", {"tests/a.yaml": two.replace("[cheap]", "[chocolate]")}))
    assert original.sha256 == moved.sha256
    assert original.sha256 != changed.sha256
    assert len(original.sha256) == 64


def test_as_json_round_trips_and_the_hash_is_checked() -> None:
    demo = load_suite(POLICIES)
    stored = demo.as_json()
    again = suite_from_json(stored)
    assert again == demo and again.sha256 == demo.sha256
    with pytest.raises(SuiteLoadError, match="does not match the cases"):
        suite_from_json({**stored, "sha256": "0" * 64})


def test_a_broken_stored_suite_names_the_case() -> None:
    case = {"name": "x", "intent": "oranges", "expect": {}, "file": "a/tests/t.yaml", "line": 4}
    stored = {"cases": [case]}
    with pytest.raises(SuiteLoadError) as raised:
        suite_from_json(stored)
    [error] = raised.value.errors
    assert (error.file, error.line, error.code) == ("a/tests/t.yaml", 4, "invalid_value")
    assert "cases.0.expect" in error.message
    with pytest.raises(SuiteLoadError) as raised:
        suite_from_json({"cases": "none"})
    assert raised.value.errors[0].file == STORED


def test_with_file_replaces_one_file_and_validates() -> None:
    demo = load_suite(POLICIES)
    cases = [{"name": "api case", "intent": "oranges", "expect": {"applied": ["oranges"]}}]
    updated = demo.with_file("food/tests/oranges.yaml", cases)
    files = updated.files()
    assert files["food/tests/oranges.yaml"] == cases
    assert files["guards/tests/guards.yaml"] == demo.files()["guards/tests/guards.yaml"]
    assert "food/tests/oranges.yaml" not in updated.with_file("food/tests/oranges.yaml", []).files()
    with pytest.raises(SuiteLoadError) as raised:
        bad = {"name": "x", "intent": "y", "line": 1, "expect": {"applid": []}}
        demo.with_file("food/oranges.yaml", [bad])
    assert [(e.code, e.file) for e in raised.value.errors] == [
        ("invalid_value", "food/oranges.yaml"),
        ("unknown_field", "food/oranges.yaml"),
        ("unknown_field", "food/oranges.yaml"),
    ]
    with pytest.raises(SuiteLoadError, match="is used 2 times"):
        demo.with_file("x/tests/x.yaml", [{**cases[0], "name": demo.cases[0].name}])


def test_files_write_back_to_the_same_suite(tmp_path: Path) -> None:
    import yaml

    demo = load_suite(POLICIES)
    for name, cases in demo.files().items():
        write(tmp_path, {name: yaml.safe_dump(cases, allow_unicode=True, sort_keys=False)})
    assert load_suite(tmp_path).sha256 == demo.sha256
