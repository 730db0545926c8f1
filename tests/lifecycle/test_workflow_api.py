"""The whole lifecycle through the HTTP API, on the real engine: author a policy, see its
test fail then pass, self-approval refused, approval by another approver accepted, promote,
the next search uses it, disable, the next search does not, rollback restores the earlier
plan byte for byte. Then each refusal on its own."""

from __future__ import annotations

import json
from typing import Any

from tests.clocks import FIXED_CLOCK, FIXED_NOW
from tests.lifecycle.conftest import Lifecycle

CREAMERS: dict[str, Any] = {
    "id": "coffee-creamers",
    "title": '"creamer" means coffee creamers',
    "owner": "merch-team-grocery",
    "priority": 60,
    "trigger": {"phrase": ["coffee whitener"]},  # the wrong words: the test below catches it
    "rules": [{"category": {"values": ["Coffee creamers"]}}],
}
CREAMER_TESTS = [
    {
        "name": "creamer shows coffee creamers only",
        "intent": "creamer",
        "expect": {
            "applied": ["coffee-creamers", "in-stock-only"],
            "results": {"min_hits": 3, "every": {"category": {"eq": "Coffee creamers"}}},
        },
    }
]
TESTS_FILE = "grocery/tests/creamers.yaml"


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def compile_creamer(lc: Lifecycle) -> dict[str, Any]:
    response = lc.call("POST", "/v1/compile", "carol", json={"intent": "creamer"})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def applied(body: dict[str, Any]) -> list[str]:
    return [step["policy_id"] for step in body["explanation"]["applied"]]


def ok(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def refused(response: Any, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    message: str = error["message"]
    return message


def test_author_test_review_promote_disable_rollback(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    before = compile_creamer(lc)
    original_version = before["policy_set_version"]
    assert "coffee-creamers" not in applied(before)

    # Author: a draft with a typo, and its test. The test fails.
    draft = ok(lc.call("PUT", "/v1/policies/staging/policies/coffee-creamers", "alice",
                       json={"policy": CREAMERS, "reason": "creamers"}))
    ok(lc.call("PUT", "/v1/policies/staging/tests", "alice",
               json={"file": TESTS_FILE, "cases": CREAMER_TESTS}))
    typo = draft["version"]
    report = ok(lc.call("POST", f"/v1/policies/versions/{typo}/test", "alice"))
    assert report["passed"] is False
    failing = [case for case in report["cases"] if not case["passed"]]
    assert [case["name"] for case in failing] == ["creamer shows coffee creamers only"]
    assert any("coffee-creamers" in failure for failure in failing[0]["failures"])

    # Fix the trigger: a new staging version; promotion before its tests ran is refused.
    fixed_policy = {**CREAMERS, "trigger": {"phrase": ["creamer", "creamers"]}}
    fixed = ok(lc.call("PUT", "/v1/policies/staging/policies/coffee-creamers", "alice",
                       json={"policy": fixed_policy}))["version"]
    assert fixed != typo
    message = refused(lc.call("POST", "/v1/policies/promote", "bob", json={"version": fixed}),
                      409, "untested_version")
    assert fixed[:12] in message
    report = ok(lc.call("POST", f"/v1/policies/versions/{fixed}/test", "alice"))
    assert report["passed"] is True, report

    # Review: the author may not approve her own version; an auditor may not approve at all.
    message = refused(lc.call("POST", f"/v1/policies/versions/{fixed}/approve", "alice", json={}),
                      403, "self_approval")
    assert "alice" in message and "another approver" in message
    refused(lc.call("POST", f"/v1/policies/versions/{fixed}/approve", "carol", json={}),
            403, "forbidden_role")
    refused(lc.call("POST", "/v1/policies/promote", "bob", json={"version": fixed}), 409, "not_approved")
    state = ok(lc.call("POST", f"/v1/policies/versions/{fixed}/approve", "bob",
                       json={"comment": "looks right"}))
    assert [a["principal"] for a in state["approvals"]] == ["bob"]
    assert state["authors"] == ["alice"]

    # Promote: the next search uses the policy.
    promoted = ok(lc.call("POST", "/v1/policies/promote", "bob", json={"version": fixed, "reason": "go"}))
    assert "live" in promoted["environments"]
    search = ok(lc.call("POST", "/v1/search", "carol", json={"intent": "creamer", "explain": True}))
    assert search["policy_set_version"] == fixed
    assert "coffee-creamers" in [s["policy_id"] for s in search["explanation"]["applied"]]
    assert search["total"] >= 3

    # Disable: the kill switch goes live at once, as a new version; the next search does not use it.
    disabled = ok(lc.call("POST", "/v1/policies/live/policies/coffee-creamers/disable", "bob",
                          json={"reason": "customer complaints"}))
    assert disabled["version"] not in (fixed, original_version)
    after_disable = compile_creamer(lc)
    assert after_disable["policy_set_version"] == disabled["version"]
    assert "coffee-creamers" not in applied(after_disable)

    # Rollback to the original version: the same plan and DSL, byte for byte.
    ok(lc.call("POST", "/v1/policies/rollback", "bob", json={"to": original_version, "reason": "undo"}))
    restored = compile_creamer(lc)
    assert restored["policy_set_version"] == original_version
    assert canonical(restored["plan"]) == canonical(before["plan"])
    assert canonical(restored["dsl"]) == canonical(before["dsl"])

    # History: every change with actor, reason and diff; refusals when asked for.
    history = ok(lc.call("GET", "/v1/policies/history?policy_id=coffee-creamers", "carol"))["events"]
    actions = [(e["action"], e["actor"]) for e in history]
    assert ("disable", "bob") in actions and ("promote", "bob") in actions
    assert ("draft", "alice") in actions
    first_draft = [e for e in history if e["action"] == "draft"][-1]
    assert first_draft["diff"]["added"] == ["coffee-creamers"]  # against live, where staging began
    assert first_draft["diff"]["summary"] == "added coffee-creamers"
    disable_event = next(e for e in history if e["action"] == "disable")
    assert disable_event["reason"] == "customer complaints"
    assert disable_event["diff"]["changed"][0]["id"] == "coffee-creamers"
    disabled_change = {"field": "enabled", "before": True, "after": False}
    assert disabled_change in disable_event["diff"]["changed"][0]["changes"]
    live_moves = ok(lc.call("GET", "/v1/policies/history?env=live", "carol"))["events"]
    assert [e["action"] for e in live_moves][:3] == ["rollback", "disable", "promote"]
    refusals = ok(lc.call("GET", "/v1/policies/history?outcome=refused", "carol"))["events"]
    assert {e["code"] for e in refusals} >= {"untested_version", "self_approval", "not_approved"}
    by_code = {e["code"]: e for e in refusals}
    assert by_code["self_approval"]["version"] == fixed and by_code["self_approval"]["actor"] == "alice"


def test_keys_are_required_and_checked(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    message = refused(lc.call("GET", "/v1/policies/environments/live", None), 401, "missing_api_key")
    assert "Authorization: Bearer" in message
    response = lc.client.get(
        "/v1/policies/environments/live", headers={"authorization": "Bearer gsk_000000000000_" + "x" * 43}
    )
    refused(response, 401, "invalid_api_key")
    refused(lc.client.get("/v1/policies/environments/live", headers={"authorization": "Bearer nonsense"}),
            401, "invalid_api_key")
    # X-Api-Key works as well as a bearer token
    by_header = lc.client.get("/v1/policies/environments/live", headers={"x-api-key": lc.keys["carol"]})
    assert by_header.status_code == 200
    message = refused(lc.call("GET", "/v1/policies/environments/live", "shop"), 403, "forbidden_role")
    assert "shop" in message and "author or approver or auditor" in message
    refused(lc.call("PUT", "/v1/policies/staging/policies/coffee-creamers", "bob",
                    json={"policy": CREAMERS}), 403, "forbidden_role")
    refused(lc.call("POST", "/v1/policies/promote", "dan", json={}), 403, "forbidden_role")
    # the audit API needs the auditor role too
    refused(lc.call("GET", "/v1/audit/decisions", None), 401, "missing_api_key")
    refused(lc.call("GET", "/v1/audit/decisions", "alice"), 403, "forbidden_role")
    assert lc.call("GET", "/v1/audit/decisions", "carol").status_code == 200
    # a revoked key stops working

    from control_plane.lifecycle.keys import KeyStore

    store = KeyStore(lc.engine, lc.settings.auth.keys_index)
    store.revoke(lc.principals["carol"].key_id or "", FIXED_NOW)
    refused(lc.call("GET", "/v1/policies/environments/live", "carol"), 401, "invalid_api_key")


def test_keys_are_stored_hashed(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    stored = lc.engine.search(lc.settings.auth.keys_index, {"size": 100, "query": {"match_all": {}}})
    text = json.dumps(stored)
    assert len(stored["hits"]["hits"]) == len(lc.keys)
    for key in lc.keys.values():
        secret = key.split("_", 2)[2]
        assert len(secret) == 43 and key not in text and secret not in text


def test_promotion_refused_for_lint_errors_and_stale_or_failed_tests(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    contradictory = {
        "id": "creamers-contradiction",
        "title": "filters that cannot both hold",
        "owner": "merch-team-grocery",
        "priority": 60,
        "trigger": {"phrase": ["creamer"]},
        "rules": [
            {"filter": {"field": "labels", "values": ["kosher"]}},
            {"exclude": {"field": "labels", "values": ["kosher"]}},
        ],
    }
    version = ok(lc.call("PUT", "/v1/policies/staging/policies/creamers-contradiction", "dan",
                         json={"policy": contradictory}))["version"]
    lint = ok(lc.call("GET", f"/v1/policies/versions/{version}/lint", "dan"))
    assert lint["errors"] >= 1
    message = refused(lc.call("POST", f"/v1/policies/versions/{version}/approve", "bob", json={}),
                      409, "lint_errors")
    refusals = lc.call("GET", "/v1/policies/history?outcome=refused", "carol").json()
    assert refusals["events"][0]["code"] == "lint_errors"
    assert "creamers-contradiction" in json.dumps(refusals)
    assert "lint error" in message

    # a clean version, tested, then its tests change: the old run no longer counts
    clean = {**contradictory, "rules": [{"filter": {"field": "labels", "values": ["kosher"]}}]}
    version = ok(lc.call("PUT", "/v1/policies/staging/policies/creamers-contradiction", "dan",
                         json={"policy": clean}))["version"]
    assert ok(lc.call("POST", f"/v1/policies/versions/{version}/test", "dan"))["passed"] is True
    ok(lc.call("POST", f"/v1/policies/versions/{version}/approve", "bob", json={}))
    failing_case = [{"name": "wrong on purpose", "intent": "oranges", "expect": {"applied": ["cheap"]}}]
    tests_file = {"file": "x/tests/wrong.yaml", "cases": failing_case}
    ok(lc.call("PUT", "/v1/policies/staging/tests", "dan", json=tests_file))
    refused(lc.call("POST", "/v1/policies/promote", "bob", json={"version": version}), 409, "stale_tests")
    assert ok(lc.call("POST", f"/v1/policies/versions/{version}/test", "dan"))["passed"] is False
    promote = lc.call("POST", "/v1/policies/promote", "bob", json={"version": version})
    message = refused(promote, 409, "tests_failed")
    assert "failed 1 of" in message


def test_invalid_drafts_report_every_problem(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    bad = {"id": "bad", "title": "x", "priority": 5000, "trigger": {"phrase": ["x"]},
           "rules": [{"boost": {"field": "price", "weight": 99}}], "colour": "red"}
    response = lc.call("PUT", "/v1/policies/staging/policies/bad", "alice", json={"policy": bad})
    refused(response, 422, "invalid_policy")
    details = response.json()["error"]["details"]
    codes = {d["code"] for d in details}
    assert "unknown_field" in codes and len(details) >= 2
    assert all(d["file"] == "policy:bad" for d in details)
    # nothing was staged
    assert lc.call("GET", "/v1/policies/environments/staging", "alice").status_code == 404
    refused(lc.call("POST", "/v1/policies/live/policies/nope/disable", "bob", json={"reason": "x"}),
            404, "policy_not_found")
    refused(lc.call("POST", "/v1/policies/live/policies/in-stock-only/disable", "bob", json={"reason": "x"}),
            403, "forbidden_role")
    refused(lc.call("POST", "/v1/policies/rollback", "bob", json={"to": "0" * 64}), 404, "unknown_version")


def test_search_keys_when_required(lifecycle: Lifecycle) -> None:
    from fastapi.testclient import TestClient

    from control_plane.api import create_app
    from control_plane.service import SearchService

    lc = lifecycle
    strict = lc.settings.model_copy(
        update={"auth": lc.settings.auth.model_copy(update={"search_requires_key": True})}
    )
    service = SearchService(strict, lc.engine, lc.service.profile)
    client = TestClient(create_app(service, clock=FIXED_CLOCK), raise_server_exceptions=False)
    try:
        body = {"intent": "cheap chocolate"}
        refused(client.post("/v1/search", json=body), 401, "missing_api_key")
        refused(client.post("/v1/compile", json=body), 401, "missing_api_key")
        query = {"message": "cheap chocolate"}
        refused(client.post("/v1/agent/query", json=query), 401, "missing_api_key")
        refused(client.post("/v1/search", json=body, headers=lc.as_("carol")), 403, "forbidden_role")
        served = client.post("/v1/search", json=body, headers=lc.as_("shop"))
        assert served.status_code == 200, served.text
        agent = client.post("/v1/agent/query", json=query, headers=lc.as_("root"))
        assert agent.status_code == 200, agent.text
        # the decision records name the key's principal as the client
        decisions = client.get("/v1/audit/decisions", headers=lc.as_("carol")).json()["decisions"]
        by_request = {d["request_id"]: d for d in decisions}
        assert by_request[served.json()["request_id"]]["client"] == "shop"
        assert by_request[agent.json()["request_id"]]["client"] == "root"
        refusals = [d for d in decisions if (d.get("error") or {}).get("status") == 401]
        assert sorted(d["endpoint"] for d in refusals) == ["agent", "search"]  # compile is not recorded
    finally:
        client.close()
        service.close()


def test_an_invalid_test_file_is_refused_with_every_problem(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    cases = [{"name": "no intent", "expect": {"applied": ["cheap"]}},
             {"name": "bad key", "intent": "x", "expect": {"applied": ["cheap"]}, "colour": "red"}]
    bad = {"file": "x/tests/bad.yaml", "cases": cases}
    response = lc.call("PUT", "/v1/policies/staging/tests", "dan", json=bad)
    refused(response, 422, "invalid_tests")
    assert len(response.json()["error"]["details"]) >= 2
    assert lc.call("GET", "/v1/policies/environments/staging", "dan").status_code == 404  # nothing staged
