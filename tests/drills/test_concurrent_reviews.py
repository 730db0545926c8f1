"""Drill: reviews that overlap, through the HTTP API on the real engine. What
docs/lifecycle.md promises (The workflow, 4 and 5; Four-eyes over the lineage): an approval
is by someone who is not an author, for the version with the tests it has then (changing
its tests later needs a new approval), and promotion needs an approval by a non-author
with the version's current tests.

There is no "reject" in this workflow: what can change under a review is the version under
review. A draft makes a new version (versions are content addressed), so the version an
approval names cannot change; but staging can move to another version while an approval
of ``staging`` runs, and a test edit changes a version's suite in place. Each race is
forced: the API's workflow runs on the real engine wrapped with a gate
(tests/drills/gates.py) that holds the approval at the step it races at (its checks done,
its event not yet written), while the other side acts.

* Two approvers approve one version at once (both held at their event's write until both
  checked): each approval is recorded once, both count, the author layered underneath
  who approves at the same instant is refused, and one promotion follows.
* An approval of ``staging`` while a draft moves staging: the approval is for the version
  it checked, not the one staging moved to, which still needs its own.
* An approval while someone edits the version's tests: the approval is for the tests it
  checked; after the edit it no longer counts, and the promotion is refused
  ``not_approved`` until someone approves the new tests.
* Four-eyes: an approver approves a version while making themself one of its authors
  (saving one of its test files as it is, so its suite does not change): their approval,
  checked before they were an author, never lets the version be promoted."""

from __future__ import annotations

from typing import Any

import pytest

from tests.drills.gates import catalog_mapping_read, error_of, gated_api, history_write, send
from tests.e2e.conftest import ready, service, settings  # noqa: F401
from tests.lifecycle.conftest import Lifecycle, lifecycle  # noqa: F401
from tests.lifecycle.test_four_eyes_lineage import CLEMENTINES, FIXED_CREAMERS, draft
from tests.lifecycle.test_workflow_api import ok

pytestmark = pytest.mark.drill

EXTRA_TESTS = {
    "file": "extra/tests/oranges.yaml",
    "cases": [{"name": "oranges are oranges", "intent": "oranges", "expect": {"applied": ["oranges"]}}],
}
MORE_TESTS = {
    "file": "extra/tests/more-oranges.yaml",
    "cases": [{"name": "orange is oranges", "intent": "orange", "expect": {"applied": ["oranges"]}}],
}
TEAS: dict[str, Any] = {
    "id": "drill-teas", "title": "teas", "owner": "merch-team-food",
    "trigger": {"phrase": ["green tea"]}, "rules": [{"category": {"values": ["Teas"]}}],
}


def state(lc: Lifecycle, version: str) -> dict[str, Any]:
    return ok(lc.call("GET", f"/v1/policies/versions/{version}", "carol"))


def run_tests(lc: Lifecycle, version: str) -> None:
    assert ok(lc.call("POST", f"/v1/policies/versions/{version}/test", "dan"))["passed"]


def approve(lc: Lifecycle, who: str, version: str) -> Any:
    return lc.call("POST", f"/v1/policies/versions/{version}/approve", who, json={"comment": who})


def promote(lc: Lifecycle, version: str) -> Any:
    return lc.call("POST", "/v1/policies/promote", "bob", json={"version": version, "reason": "drill"})


def approvals_of(lc: Lifecycle, version: str) -> list[dict[str, Any]]:
    query = f"action=approve&outcome=done&version={version}"
    found: list[dict[str, Any]] = ok(lc.call("GET", f"/v1/policies/history?{query}", "carol"))["events"]
    return found


def test_two_approvers_approving_one_version_at_once(lifecycle: Lifecycle) -> None:  # noqa: F811
    lc = lifecycle
    draft(lc, "alice", FIXED_CREAMERS)
    version = draft(lc, "dan", CLEMENTINES)  # on top of alice's: both are its authors
    run_tests(lc, version)
    suite = state(lc, version)["suite_sha256"]
    gated, wf = gated_api(lc)
    # every approval of the version is held (alice's too, should she get that far)
    gate = gated.gate(history_write(wf, action="approve", version=version, outcome="done"), limit=3)
    sent = {who: send(lc, "POST", f"/v1/policies/versions/{version}/approve", who, json={"comment": who})
            for who in ("bob", "root", "alice")}
    gate.reached(2)  # both approvers checked, and neither approval is written yet
    assert state(lc, version)["approvals"] == []
    gate.open_all()
    answers = {who: future.result(timeout=120) for who, future in sent.items()}

    error = error_of(answers["alice"], 403, "self_approval")  # the author underneath, at the same instant
    assert error["details"][0]["actor"] == "alice"
    for who in ("bob", "root"):
        ok(answers[who])
    events = approvals_of(lc, version)
    assert sorted(e["actor"] for e in events) == ["bob", "root"], "each approval recorded once"
    assert {e["suite_sha256"] for e in events} == {suite}
    approvals = state(lc, version)["approvals"]
    assert sorted(a["principal"] for a in approvals) == ["bob", "root"]
    assert all(a["current"] for a in approvals)
    refused = ok(lc.call("GET", "/v1/policies/history?outcome=refused&action=approve", "carol"))["events"]
    assert [(e["actor"], e["code"], e["version"]) for e in refused] == [("alice", "self_approval", version)]

    promoted = ok(promote(lc, version))
    assert "live" in promoted["environments"]
    moves = ok(lc.call("GET", "/v1/policies/history?env=live&action=promote", "carol"))["events"]
    assert [e["version"] for e in moves] == [version]


def test_an_approval_of_staging_while_a_draft_moves_staging(lifecycle: Lifecycle) -> None:  # noqa: F811
    lc = lifecycle
    checked = draft(lc, "dan", CLEMENTINES)
    run_tests(lc, checked)
    gated, wf = gated_api(lc)
    gate = gated.gate(catalog_mapping_read(wf))  # the approval resolved staging and runs its checks
    approving = send(lc, "POST", "/v1/policies/versions/staging/approve", "bob", json={})
    (held,) = gate.reached()
    moved = draft(lc, "dan", TEAS)  # staging moves under the review
    assert moved != checked
    held.through()
    approved = ok(approving.result(timeout=120))

    assert approved["version"] == checked  # the version bob's checks read
    assert [e["version"] for e in approvals_of(lc, checked)] == [checked]
    assert approvals_of(lc, moved) == [] and state(lc, moved)["approvals"] == []
    run_tests(lc, moved)
    error_of(promote(lc, "staging"), 409, "not_approved")
    ok(approve(lc, "bob", moved))
    assert "live" in ok(promote(lc, "staging"))["environments"]


def test_an_approval_while_the_versions_tests_change(lifecycle: Lifecycle) -> None:  # noqa: F811
    lc = lifecycle
    version = draft(lc, "dan", CLEMENTINES)
    run_tests(lc, version)
    checked = state(lc, version)["suite_sha256"]
    gated, wf = gated_api(lc)
    gate = gated.gate(catalog_mapping_read(wf))  # the approval read the version's tests and runs its checks
    approving = send(lc, "POST", f"/v1/policies/versions/{version}/approve", "bob", json={})
    (held,) = gate.reached()
    edited = ok(lc.call("PUT", "/v1/policies/staging/tests", "dan", json=EXTRA_TESTS))
    assert edited["version"] == version and edited["suite_sha256"] != checked
    held.through()
    ok(approving.result(timeout=120))

    # bob approved the tests his checks read, not the ones written meanwhile
    events = approvals_of(lc, version)
    assert [(e["actor"], e["suite_sha256"]) for e in events] == [("bob", checked)]
    assert [a["current"] for a in state(lc, version)["approvals"]] == [False]
    run_tests(lc, version)  # the new tests pass...
    error_of(promote(lc, version), 409, "not_approved")  # ...but nobody approved them
    ok(approve(lc, "bob", version))
    assert "live" in ok(promote(lc, version))["environments"]


def test_an_approver_who_becomes_an_author_while_approving(lifecycle: Lifecycle) -> None:  # noqa: F811
    lc = lifecycle
    draft(lc, "dan", CLEMENTINES)
    version = ok(lc.call("PUT", "/v1/policies/staging/tests", "dan", json=MORE_TESTS))["version"]
    run_tests(lc, version)
    suite = state(lc, version)["suite_sha256"]
    assert state(lc, version)["authors"] == ["dan"]
    gated, wf = gated_api(lc)
    gate = gated.gate(catalog_mapping_read(wf))  # alice's approval passed its four-eyes check
    approving = send(lc, "POST", f"/v1/policies/versions/{version}/approve", "alice", json={})
    (held,) = gate.reached()
    # alice saves one of the version's test files as it is: she is now one of its authors,
    # and its suite (so its last test run, and her approval) stays what it was
    saved = ok(lc.call("PUT", "/v1/policies/staging/tests", "alice", json=MORE_TESTS))
    assert (saved["version"], saved["suite_sha256"]) == (version, suite)
    assert saved["authors"] == ["alice", "dan"]
    held.through()
    ok(approving.result(timeout=120))  # checked before she was an author

    events = approvals_of(lc, version)
    assert [(e["actor"], e["suite_sha256"]) for e in events] == [("alice", suite)]
    message = error_of(promote(lc, version), 409, "not_approved")["message"]
    assert "alice" in message, message  # her approval is an author's: it does not count
    error_of(approve(lc, "alice", version), 403, "self_approval")
    ok(approve(lc, "bob", version))
    assert "live" in ok(promote(lc, version))["environments"]
