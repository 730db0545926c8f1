"""The console over the real engine: a test file of two documents (valid:
docs/policy-tests.md) and a draft ending in ``---`` are read (500 internal_error before)."""

from __future__ import annotations

from tests.console.test_pages import DRAFT, signed
from tests.lifecycle.conftest import Lifecycle

CASES = "- name: creamer\n  intent: creamer\n  expect: {results: {min_hits: 0}}\n"


def test_a_multi_document_test_file_or_draft_is_not_a_500(lifecycle: Lifecycle) -> None:
    client, token = signed(lifecycle, "dan")
    checked = client.post("/console/author/check", data={"policy_yaml": DRAFT + "---\n", "csrf": token})
    assert checked.status_code == 200, checked.text[:300]
    text = CASES + "---\n" + CASES.replace("name: creamer", "name: creamer again")
    tests = client.post("/console/tests", data={"file": "grocery/tests/c.yaml", "tests_yaml": text,
                                                "csrf": token}, follow_redirects=False)
    assert tests.status_code < 500, tests.text[:300]
