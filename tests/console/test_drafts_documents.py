"""A console draft or test file of more than one YAML document.

docs/policy-tests.md: a test file holds cases "in one or more ``---`` documents", and the
suite loader reads them so; the console's ``read_tests`` (and ``read_policy``, for a draft
followed by an empty document) then reads the text again with ``yaml_aliases.safe_load``,
which takes a single document: ComposerError, out of the handler (the console's 500)."""

from __future__ import annotations

from pathlib import Path

from control_plane.console import drafts

ROOT = Path(__file__).resolve().parents[2]

CASES = """- name: oranges are fruit
  intent: oranges
  expect:
    results: {min_hits: 1}
"""


def test_a_test_file_of_two_documents_is_read_as_the_suite_reads_it() -> None:
    text = CASES + "---\n" + CASES.replace("oranges are fruit", "oranges again")
    read = drafts.read_tests("food/tests/oranges.yaml", text)
    assert read.errors == [] and [c["name"] for c in read.cases] == ["oranges are fruit", "oranges again"]


def test_a_draft_followed_by_an_empty_document_is_read_or_refused_not_raised() -> None:
    text = (ROOT / "policies/food/oranges.yaml").read_text() + "---\n"
    read = drafts.read_policy(text)
    assert read.data is not None or read.errors
