"""The console's pages without a browser or JavaScript (FastAPI's TestClient over the
real engine): reading works from plain HTML, the loader's and the suite's errors come back
at their lines, the preview shows live and staging with the policies that placed each hit,
no page loads anything from another origin."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from control_plane.console.rendering import SECURITY_HEADERS
from tests.console.conftest import sign_in
from tests.lifecycle.conftest import Lifecycle

DRAFT = """\
id: console-creamers
title: creamer means coffee creamers
owner: merch-team-grocery
priority: 60
trigger: {phrase: [creamer], consume: true}
rules:
  - category: {values: [Coffee creamers]}
"""


def signed(lc: Lifecycle, who: str) -> tuple[TestClient, str]:
    client = TestClient(lc.client.app, raise_server_exceptions=False)
    return client, sign_in(client, lc.keys[who])


def test_policies_side_by_side_and_searchable(lifecycle: Lifecycle) -> None:
    client, _ = signed(lifecycle, "dan")
    page = client.get("/console/policies")
    live_ids = {p.id for p in lifecycle.workflow.environment("live").policy_set.policies}
    shown = set(re.findall(r'<tr data-policy="([^"]+)"', page.text))
    assert shown == live_ids  # nothing staged yet: live only
    for field, query, expected in (("id", "orange", {"oranges", "orange-juice"}),
                                   ("kind", "guard", None), ("trigger", "soda", None)):
        page = client.get("/console/policies", params={"q": query, "field": field})
        shown = set(re.findall(r'<tr data-policy="([^"]+)"', page.text))
        policies = lifecycle.workflow.environment("live").policy_set.policies
        if field == "kind":
            expected = {p.id for p in policies if p.kind == "guard"}
        if field == "trigger":
            expected = {p.id for p in policies if "soda" in str(p.trigger.model_dump()).lower()}
        assert shown == expected, (field, query, shown)


def test_a_draft_with_an_error_comes_back_at_its_line(lifecycle: Lifecycle) -> None:
    client, token = signed(lifecycle, "dan")
    broken = DRAFT.replace("priority: 60", "priority: high")
    page = client.post("/console/author", data={"policy_yaml": broken, "csrf": token})
    assert page.status_code == 422
    assert re.search(r'data-line="4".*line 4, column 1.*invalid_value', page.text), page.text
    assert 'data-error-lines="4"' in page.text
    assert broken.split("\n")[3] in page.text  # the author's text is kept
    syntax = client.post("/console/author", data={"policy_yaml": "id: [unclosed\n", "csrf": token})
    assert syntax.status_code == 422 and "yaml_syntax" in syntax.text
    live = client.post("/console/author/check", data={"policy_yaml": broken, "csrf": token})
    assert live.status_code == 200
    assert [(e["line"], e["code"]) for e in live.json()["errors"]] == [(4, "invalid_value")]
    assert client.post("/console/author/check", data={"policy_yaml": DRAFT, "csrf": token}).json() == {
        "errors": []
    }
    assert client.post("/console/author/check", data={"policy_yaml": DRAFT}).status_code == 403
    assert not lifecycle.workflow.history(action="draft")


def test_a_test_file_with_an_error_comes_back_at_its_line(lifecycle: Lifecycle) -> None:
    client, token = signed(lifecycle, "dan")
    text = "- name: creamer\n  intent: creamer\n  expect: {applied: [x], colour: blue}\n"
    page = client.post("/console/tests", data={"file": "grocery/tests/c.yaml", "tests_yaml": text,
                                               "csrf": token})
    assert page.status_code == 422
    assert re.search(r'data-line="3"', page.text), page.text
    outside = client.post("/console/tests",
                          data={"file": "../escape.yaml", "tests_yaml": text, "csrf": token})
    assert outside.status_code == 422
    assert not lifecycle.workflow.history(action="tests")


def test_a_draft_or_test_file_of_laughs_is_refused_at_its_anchor(lifecycle: Lifecycle) -> None:
    """An author's 700 bytes whose aliases stand for 9**10 strings: the loader's located
    ``yaml_aliases`` error, at once, nothing staged (before, the worker built them all and
    ran the machine out of memory)."""
    from tests.hostile.test_yaml_aliases import laughs

    client, token = signed(lifecycle, "dan")
    bomb = laughs(10)
    checked = client.post("/console/author/check", data={"policy_yaml": bomb, "csrf": token})
    assert [(e["line"], e["code"]) for e in checked.json()["errors"]] == [(10, "yaml_aliases")]
    page = client.post("/console/author", data={"policy_yaml": bomb, "csrf": token})
    assert page.status_code == 422 and "yaml_aliases" in page.text
    cases = bomb.split("\nid:")[0] + "\ncases: [{name: c, intent: x, expect: {matched: *l9}}]\n"
    tests = client.post("/console/tests", data={"file": "grocery/tests/c.yaml", "tests_yaml": cases,
                                                "csrf": token})
    assert tests.status_code == 422 and "yaml_aliases" in tests.text
    assert not lifecycle.workflow.history(action="draft")
    assert not lifecycle.workflow.history(action="tests")


def test_preview_without_javascript(lifecycle: Lifecycle) -> None:
    client, token = signed(lifecycle, "dan")
    saved = client.post("/console/author", data={"policy_yaml": DRAFT, "csrf": token}, follow_redirects=False)
    assert saved.status_code == 303, saved.text
    page = client.get("/console/preview", params={"intent": "creamer", "date": "2026-12-24T10:00:00Z"})
    assert page.status_code == 200, page.text
    assert "2026-12-24T10:00:00+00:00" in page.text
    live, staging = page.text.split('data-side="staging"')
    assert "console-creamers" not in live
    assert '<mark title="consumed by console-creamers"' in staging
    hits = re.findall(r'<tr class="hit" data-id="[^"]+">(.*?)</tr>', staging, re.S)
    assert hits and all("console-creamers" in hit for hit in hits)
    assert "<details><summary>DSL sent to the engine</summary>" in staging
    hostile = client.get("/console/preview", params={"intent": 'creamer <script>alert("x")</script>'})
    assert hostile.status_code == 200
    assert "<script>alert" not in hostile.text and "&lt;script&gt;alert" in hostile.text
    bad = client.get("/console/preview", params={"intent": "creamer", "market": "FRANCE"})
    assert bad.status_code == 400 and "market" in bad.text


def test_review_shows_lint_and_the_diff(lifecycle: Lifecycle) -> None:
    client, token = signed(lifecycle, "dan")
    client.post("/console/author", data={"policy_yaml": DRAFT, "csrf": token})
    page = client.get("/console/review")
    assert "untested_policy" in page.text  # lint: the draft has no test yet
    diff = client.get("/console/review/diff", params={"queries": "creamer\n# a comment\noranges\n"})
    assert diff.status_code == 200, diff.text
    assert "1 of 2 intent(s) change" in diff.text
    promote = client.post("/console/review/promote", data={"csrf": token})
    assert promote.status_code == 403
    assert "dan may not promote: it needs the role approver" in promote.text


def test_pages_load_nothing_from_elsewhere(lifecycle: Lifecycle) -> None:
    client, _ = signed(lifecycle, "alice")
    for path in ("/console/policies", "/console/author", "/console/tests", "/console/preview",
                 "/console/review", "/console/policies/oranges", "/console/history"):
        page = client.get(path)
        assert page.status_code == 200, (path, page.text)
        assert page.headers["content-security-policy"] == SECURITY_HEADERS["content-security-policy"]
        for url in re.findall(r'(?:src|href|action)="([^"#]*)"', page.text):
            assert url.startswith("/console") or url.startswith("?"), (path, url)
        for name in re.findall(r'/console/static/([^"]+)"', page.text):
            assert client.get(f"/console/static/{name}").status_code == 200, name
        # every control has a label
        ids = set(re.findall(r'<(?:input|select|textarea)(?![^>]*type="hidden")[^>]*id="([^"]+)"', page.text))
        labelled = set(re.findall(r'<label for="([^"]+)"', page.text))
        assert ids <= labelled, (path, ids - labelled)
