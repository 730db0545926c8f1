"""Drill: walking around four-eyes by layering. An author drafts (or edits tests) in
staging, someone else drafts on top, and the first author approves the top version alone;
and the same after a rollback took the first author's change off live. Every attempt must
be refused ``self_approval`` naming the earlier version and change, through the HTTP API.

Figures: ``bench/results/drills/lineage-self-approval.json`` (``make drills``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.drills.results import record
from tests.e2e.conftest import ready, service, settings  # noqa: F401
from tests.lifecycle.conftest import Lifecycle, lifecycle  # noqa: F401
from tests.lifecycle.test_four_eyes_lineage import CLEMENTINES, FIXED_CREAMERS, draft
from tests.lifecycle.test_workflow_api import CREAMER_TESTS, TESTS_FILE, ok

pytestmark = pytest.mark.drill


def attempt(lc: Lifecycle, who: str, version: str, earlier: str) -> dict[str, Any]:
    """``who`` approves ``version``; must be refused naming ``earlier``."""
    response = lc.call("POST", f"/v1/policies/versions/{version}/approve", who, json={})
    error = response.json().get("error") or {}
    outcome = {
        "approver": who, "version": version[:12], "status": response.status_code,
        "code": error.get("code"), "names_earlier_version": earlier[:12] in error.get("message", ""),
        "changes_named": [
            f"{d['action']} {d['version'][:12]} {d['policy_ids']}" for d in error.get("details", [])
        ],
    }
    assert (outcome["status"], outcome["code"]) == (403, "self_approval"), response.text
    assert outcome["names_earlier_version"], error
    return outcome


def test_layered_self_approval_is_refused(lifecycle: Lifecycle) -> None:  # noqa: F811
    lc = lifecycle
    original = ok(lc.call("GET", "/v1/policies/environments/live", "carol"))["version"]
    cases: dict[str, dict[str, Any]] = {}

    # 1. alice drafts A; dan drafts B on top of A; alice approves B alone.
    a = draft(lc, "alice", FIXED_CREAMERS)
    b = draft(lc, "dan", CLEMENTINES)
    cases["layered-draft"] = attempt(lc, "alice", b, a)

    # 2. alice edits the tests of staging; dan drafts on top; alice approves that.
    tests = {"file": TESTS_FILE, "cases": CREAMER_TESTS, "reason": "alice's tests"}
    edited = ok(lc.call("PUT", "/v1/policies/staging/tests", "alice", json=tests))["version"]
    c = draft(lc, "dan", {**CLEMENTINES, "priority": 40})
    cases["tests-underneath"] = attempt(lc, "alice", c, edited)

    # 3. A goes live with bob's review, dan drafts on top, alice may approve that (only dan's
    # change is new)... until live rolls back to before A: then A's change is new again.
    assert ok(lc.call("POST", f"/v1/policies/versions/{c}/test", "dan"))["passed"]
    ok(lc.call("POST", f"/v1/policies/versions/{c}/approve", "bob", json={}))
    ok(lc.call("POST", "/v1/policies/promote", "bob", json={"version": c}))
    d = draft(lc, "dan", {**CLEMENTINES, "priority": 30})
    allowed = lc.call("POST", f"/v1/policies/versions/{d}/approve", "alice", json={})
    assert allowed.status_code == 200, allowed.text
    ok(lc.call("POST", "/v1/policies/rollback", "bob", json={"to": original, "reason": "drill"}))
    cases["after-rollback"] = attempt(lc, "alice", d, a)
    assert ok(lc.call("POST", f"/v1/policies/versions/{d}/test", "dan"))["passed"]
    promote = lc.call("POST", "/v1/policies/promote", "bob", json={"version": d})
    assert promote.status_code == 409, promote.text  # alice's earlier approval no longer counts
    cases["after-rollback"]["promotion_with_her_earlier_approval"] = promote.json()["error"]["code"]
    assert cases["after-rollback"]["promotion_with_her_earlier_approval"] == "not_approved"

    refusals = ok(lc.call("GET", "/v1/policies/history?outcome=refused", "carol"))["events"]
    recorded = [e for e in refusals if e["code"] == "self_approval"]
    assert len(recorded) == len(cases)
    record("lineage-self-approval", {
        "drill": "an author approves a version layered on their own change (HTTP API, real engine)",
        "command": "make drills (pytest -m drill tests/drills/test_lineage_self_approval.py)",
        "attempts": len(cases),
        "refused_self_approval": sum(c["code"] == "self_approval" for c in cases.values()),
        "refusals_recorded": len(recorded),
        "cases": cases,
        "approved_when_only_others_changes_were_new": allowed.status_code == 200,
    })
