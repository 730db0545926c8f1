"""Four-eyes over the lineage, through the HTTP API on the real engine: the authors of a
candidate are everyone who authored a change between the version now live and it, so a
draft layered on someone's draft cannot be approved by the author underneath; after a
rollback, the rolled-back changes count again."""

from __future__ import annotations

from typing import Any

from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_workflow_api import CREAMER_TESTS, CREAMERS, TESTS_FILE, ok, refused

FIXED_CREAMERS = {**CREAMERS, "trigger": {"phrase": ["creamer", "creamers"]}}
CLEMENTINES: dict[str, Any] = {
    "id": "extra-clementines",
    "title": "clementines",
    "owner": "merch-team-food",
    "trigger": {"phrase": ["clementines"]},
    "rules": [{"category": {"values": ["Clementines"]}}],
}


def draft(lc: Lifecycle, who: str, policy: dict[str, Any]) -> str:
    body = ok(lc.call("PUT", f"/v1/policies/staging/policies/{policy['id']}", who,
                      json={"policy": policy, "reason": f"{who} drafts {policy['id']}"}))
    version: str = body["version"]
    return version


def test_a_layered_draft_cannot_be_approved_by_the_author_below(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    a = draft(lc, "alice", FIXED_CREAMERS)  # alice drafts A
    b = draft(lc, "dan", CLEMENTINES)  # dan drafts B on top of A: B contains alice's policy
    assert a != b
    state = ok(lc.call("GET", f"/v1/policies/versions/{b}", "carol"))
    assert state["authors"] == ["alice", "dan"]

    response = lc.call("POST", f"/v1/policies/versions/{b}/approve", "alice", json={})
    message = refused(response, 403, "self_approval")
    assert a[:12] in message and "coffee-creamers" in message, message
    details = response.json()["error"]["details"]
    assert [(d["actor"], d["action"], d["version"]) for d in details] == [("alice", "draft", a)]
    assert details[0]["policy_ids"] == ["coffee-creamers"]
    refusals = ok(lc.call("GET", "/v1/policies/history?outcome=refused", "carol"))["events"]
    newest = refusals[0]
    assert (newest["code"], newest["actor"], newest["version"]) == ("self_approval", "alice", b)

    ok(lc.call("POST", f"/v1/policies/versions/{b}/approve", "bob", json={}))  # four eyes


def test_after_a_rollback_the_rolled_back_author_counts_again(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    original = ok(lc.call("GET", "/v1/policies/environments/live", "carol"))["version"]
    a = draft(lc, "alice", FIXED_CREAMERS)
    tests = {"file": TESTS_FILE, "cases": CREAMER_TESTS}
    ok(lc.call("PUT", "/v1/policies/staging/tests", "alice", json=tests))
    assert ok(lc.call("POST", f"/v1/policies/versions/{a}/test", "alice"))["passed"]
    ok(lc.call("POST", f"/v1/policies/versions/{a}/approve", "bob", json={}))
    ok(lc.call("POST", "/v1/policies/promote", "bob", json={"version": a}))

    # B on top of live A: alice reviews dan's change only, and may approve it.
    b = draft(lc, "dan", CLEMENTINES)
    assert ok(lc.call("GET", f"/v1/policies/versions/{b}", "carol"))["authors"] == ["dan"]
    ok(lc.call("POST", f"/v1/policies/versions/{b}/approve", "alice", json={}))
    assert ok(lc.call("POST", f"/v1/policies/versions/{b}/test", "dan"))["passed"]

    # Live rolls back to before A: A's change lies between live and B again.
    ok(lc.call("POST", "/v1/policies/rollback", "bob", json={"to": original, "reason": "undo A"}))
    assert ok(lc.call("GET", f"/v1/policies/versions/{b}", "carol"))["authors"] == ["alice", "dan"]
    promote = lc.call("POST", "/v1/policies/promote", "bob", json={"version": b})
    message = refused(promote, 409, "not_approved")
    assert "alice" in message and "dan" in message
    message = refused(lc.call("POST", f"/v1/policies/versions/{b}/approve", "alice", json={}),
                      403, "self_approval")
    assert a[:12] in message
    ok(lc.call("POST", f"/v1/policies/versions/{b}/approve", "bob", json={}))
    promoted = ok(lc.call("POST", "/v1/policies/promote", "bob", json={"version": b}))
    assert "live" in promoted["environments"]
