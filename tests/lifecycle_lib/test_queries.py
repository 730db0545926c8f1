"""Query files of the behavioural diff: text, YAML and JSON, with file:line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from control_plane.lifecycle.regression import QueryFileError, load_queries
from control_plane.loader import load_policy_set

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_QUERIES = ROOT / "policies" / "regression" / "queries.txt"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_text_file_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "q.txt", "# saved intents\n\noranges\n  chocolat sans arachide  \n#x\n")
    assert [r.intent for r in load_queries(path)] == ["oranges", "chocolat sans arachide"]


def test_yaml_file_takes_strings_and_mappings(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "q.yaml",
        "- oranges\n"
        "- intent: chocolate\n  cohorts: [vegan]\n  user: alice\n  market: fr\n"
        "- {intent: soda, cohorts: vegan}\n",
    )
    first, second, third = load_queries(path)
    assert first.intent == "oranges" and first.cohorts == () and first.user_id is None
    assert (second.intent, second.cohorts, second.user_id, second.market) == (
        "chocolate", ("vegan",), "alice", "fr",
    )
    assert third.cohorts == ("vegan",)


def test_json_file(tmp_path: Path) -> None:
    path = write(tmp_path, "q.json", '[\n  "oranges",\n  {"intent": "soda", "market": "us"}\n]\n')
    assert [(r.intent, r.market) for r in load_queries(path)] == [("oranges", None), ("soda", "us")]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("q.yaml", "- oranges\n- intent: soda\n  colour: red\n", "q.yaml:2: unknown key(s) colour"),
        ("q.yaml", "- oranges\n- intent: soda\n  market: FR\n", "q.yaml:2: market:"),
        ("q.yaml", "- oranges\n- {cohorts: [vegan]}\n", "q.yaml:2: intent: Field required"),
        ("q.yaml", "- oranges\n- [1, 2]\n", "q.yaml:2: item 1 must be an intent or a mapping"),
        ("q.yaml", "intent: oranges\n", "q.yaml:1: a query file holds a list"),
        ("q.yaml", "- oranges\n- [unclosed\n", "q.yaml:3: invalid YAML"),
        ("q.json", '[\n  "oranges",\n  {"intent": }\n]', "q.json:3: invalid JSON"),
        ("q.json", '[\n  "oranges",\n  {"intent": "x", "user": "no spaces allowed"}\n]', "q.json:3: user_id"),
        ("q.txt", "oranges\n\n" + "x" * 600 + "\n", "q.txt:3: intent:"),
        ("q.csv", "oranges\n", "unknown query file type '.csv'"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(QueryFileError) as error:
        load_queries(path)
    assert expected in str(error.value)
    assert str(error.value).startswith(str(path))


def test_missing_file_is_a_query_file_error(tmp_path: Path) -> None:
    with pytest.raises(QueryFileError, match="cannot read"):
        load_queries(tmp_path / "nope.txt")


def test_default_regression_queries_cover_the_demo_in_two_languages() -> None:
    intents = [r.intent for r in load_queries(DEFAULT_QUERIES)]
    assert 28 <= len(intents) <= 40 and len(set(intents)) == len(intents)
    for phrase in ("oranges", "cheap chocolate", "chocolat sans arachide", "baby formula", "soda", "noël"):
        assert phrase in intents


def test_the_policy_loader_does_not_read_the_queries_file() -> None:
    policy_set = load_policy_set(ROOT / "policies")
    assert policy_set.policies  # the directory still loads: queries.txt is not a policy file
