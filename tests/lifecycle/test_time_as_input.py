"""Time is an input, end to end on the real engine: a merchandiser previews a search at
another instant (``now``, reader roles only), the record keeps the instant used, a test run
can be given its instant, and a version carrying the demo suite can be tested, approved and
promoted on any date."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from control_plane.bootstrap import profile_of
from control_plane.lifecycle.workflow import Workflow
from control_plane.times import fixed_clock, iso, parse_time
from tests.clocks import FIXED_NOW
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_workflow_api import CREAMERS, ok, refused

DECEMBER = "2026-12-10T12:00:00Z"


def workflow_at(lc: Lifecycle, instant: str) -> Workflow:
    """The lifecycle's workflow, with its clock fixed at ``instant``."""
    return Workflow(lc.settings, lc.engine, profile_of(lc.settings), clock=fixed_clock(parse_time(instant)))


def records(lc: Lifecycle) -> list[dict[str, Any]]:
    path = Path(lc.settings.audit.path)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def applied(body: dict[str, Any]) -> list[str]:
    return [step["policy_id"] for step in body["explanation"]["applied"]]


@pytest.mark.parametrize("route", ["/v1/search", "/v1/compile"])
def test_a_preview_needs_the_author_approver_or_auditor_role(lifecycle: Lifecycle, route: str) -> None:
    lc = lifecycle
    body = {"intent": "cheap chocolate", "now": DECEMBER, "explain": True}
    message = refused(lc.call("POST", route, None, json=body), 401, "missing_api_key")
    assert "'now' previews another instant" in message and "author or approver or auditor" in message
    message = refused(lc.call("POST", route, "shop", json=body), 403, "preview_forbidden")
    assert message.startswith("shop may not set 'now'") and "(has: search)" in message
    for who in ("alice", "bob", "carol", "root"):
        answer = ok(lc.call("POST", route, who, json=body))
        assert parse_time(answer["now"]) == parse_time(DECEMBER)
        assert "christmas-chocolate" in applied(answer), who
    # without now: the app's clock (the fixtures' ordinary November day); the auditor may
    # read the explanation (the preview role is not needed)
    today = ok(lc.call("POST", route, "carol", json={"intent": "cheap chocolate", "explain": True}))
    assert parse_time(today["now"]) == FIXED_NOW and "christmas-chocolate" not in applied(today)


def test_a_preview_is_byte_identical_to_a_search_on_that_day(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    body = {"intent": "cheap chocolate", "now": DECEMBER}
    preview = ok(lc.call("POST", "/v1/compile", "alice", json=body))
    that_day = workflow_at(lc, DECEMBER)
    with that_day.pinned_service(preview["policy_set_version"]) as service:
        from control_plane.service import SearchRequest

        request = SearchRequest(intent="cheap chocolate")
        dsl = service.render(service.compile(request, parse_time(DECEMBER)), request, "strict")
    assert json.dumps(preview["dsl"], sort_keys=True) == json.dumps(dsl, sort_keys=True)


def test_the_record_keeps_the_instant_used(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    body = {"intent": "cheap chocolate", "now": DECEMBER}
    previewed = ok(lc.call("POST", "/v1/search", "alice", json=body))
    plain = ok(lc.call("POST", "/v1/search", None, json={"intent": "cheap chocolate"}))
    refused(lc.call("POST", "/v1/search", "shop", json={"intent": "cheap chocolate", "now": DECEMBER}),
            403, "preview_forbidden")
    by_id = {r["request_id"]: r for r in records(lc)}
    record = by_id[previewed["request_id"]]
    assert (record["time"], record["now"]) == (iso(FIXED_NOW), "2026-12-10T12:00:00Z")
    assert record["client"] == "alice" and "christmas-chocolate" in record["applied_policies"]
    assert by_id[plain["request_id"]]["now"] == by_id[plain["request_id"]]["time"] == iso(FIXED_NOW)
    # the refused preview has its one record too, and nothing was evaluated for it
    [refusal] = [r for r in records(lc) if r["status"] == "error"]
    assert refusal["error"]["code"] == "forbidden" and refusal["applied_policies"] == []


@pytest.mark.parametrize(
    "written", ["2026-12-10T12:00:00Z", "2026-12-09T15:55:00-20:05", "2026-12-11T08:00:00+20:00"]
)
def test_a_preview_instant_is_read_in_utc_whatever_its_offset(lifecycle: Lifecycle, written: str) -> None:
    """Offsets beyond the engine's 18 hours (schemathesis found one failing as an engine
    error) name the same instant as their UTC form, and serve the same answer."""
    body = {"intent": "cheap chocolate", "now": written}
    previewed = ok(lifecycle.call("POST", "/v1/search", "alice", json=body))
    assert previewed["now"] == "2026-12-10T12:00:00Z"
    assert previewed["hits"] and "christmas-chocolate" in previewed["hits"][0]["policies"]


def test_a_preview_instant_outside_the_calendar_in_utc_is_refused(lifecycle: Lifecycle) -> None:
    response = lifecycle.call("POST", "/v1/search", "alice", json={"intent": "chocolate",
                                                                    "now": "0001-01-01T00:30:00+01:00"})
    refused(response, 422, "invalid_request")


@pytest.mark.parametrize("now", ["2026-12-10T12:00:00", "tomorrow", 12])
def test_a_preview_instant_must_be_an_aware_time(lifecycle: Lifecycle, now: Any) -> None:
    response = lifecycle.call("POST", "/v1/search", "alice", json={"intent": "chocolate", "now": now})
    refused(response, 422, "invalid_request")
    assert response.json()["error"]["details"][0]["location"] == "body.now"


def test_a_test_run_can_be_given_its_instant(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    unpinned = [{"name": "chocolate is chocolates", "intent": "chocolate",
                 "expect": {"plan": {"category.values": ["Chocolates"]}}}]
    state = ok(lc.call("PUT", "/v1/policies/staging/tests", "dan",
                       json={"file": "extra/tests/unpinned.yaml", "cases": unpinned}))
    version = state["version"]
    path = f"/v1/policies/versions/{version}/test"
    november = ok(lc.call("POST", path, "dan"))  # the app's clock: an ordinary day
    assert november["passed"] and parse_time(november["now"]) == FIXED_NOW
    december = ok(lc.call("POST", path, "dan", json={"now": DECEMBER}))
    assert not december["passed"]  # the campaign moves the unpinned case, and says so
    [failing] = [case for case in december["cases"] if not case["passed"]]
    assert failing["name"] == "chocolate is chocolates"
    [event] = lc.workflow.history(action="test", version=version, limit=1)
    assert event.details is not None and event.details["now"] == "2026-12-10T12:00:00Z"
    # the same case pinned by its file passes whatever instant the run is given
    ok(lc.call("PUT", "/v1/policies/staging/tests", "dan",
               json={"file": "extra/tests/unpinned.yaml", "cases": unpinned, "now": "2026-11-15T12:00:00Z"}))
    again = ok(lc.call("POST", f"/v1/policies/versions/{version}/test", "dan", json={"now": DECEMBER}))
    assert again["passed"], again


@pytest.mark.parametrize(
    "day", ["2026-11-30T23:59:59Z", "2026-12-01T00:00:00Z", "2026-12-10T12:00:00Z", "2026-12-25T23:59:59Z",
            "2026-12-26T00:00:00Z", "2027-01-10T12:00:00Z"],
)
def test_the_demo_suite_is_tested_approved_and_promoted_on_any_date(lifecycle: Lifecycle, day: str) -> None:
    lc = lifecycle
    on_that_day = workflow_at(lc, day)
    dan, bob = lc.principals["dan"], lc.principals["bob"]
    version = on_that_day.put_policy(dan, CREAMERS, "creamers, demo suite unchanged").version
    report = on_that_day.test(dan, version)
    assert report.passed, report.human()
    assert report.now == parse_time(day) and report.total >= 36
    on_that_day.approve(bob, version, None)
    state = on_that_day.promote(bob, version, None)
    assert "live" in state.environments
    promoted = on_that_day.history(action="promote", limit=1)[0]
    assert parse_time(promoted.time) == parse_time(day)


def test_history_times_come_from_the_workflow_clock(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    at = datetime(2027, 2, 3, 4, 5, 6, tzinfo=FIXED_NOW.tzinfo)
    later = workflow_at(lc, iso(at))
    later.put_policy(lc.principals["dan"], CREAMERS, None)
    assert parse_time(later.history(action="draft", limit=1)[0].time) == at
