"""Drill: two authors drafting on staging at the same instant, through the HTTP API on the
real engine. docs/lifecycle.md (Concurrent changes) and ADR 0011 promise that two authors
drafting at once cannot both win: a draft moves staging only from the version it was made
on, the loser is answered 409 ``concurrent_change`` (the one error shape, naming the version
that won) and is not in the history, and drafting again on what won lands in order. No
update is lost.

The race is certain, not hoped for: the API's workflow runs on the real engine wrapped with
a gate (tests/drills/gates.py) that holds each draft's ``_aliases`` call until both drafts
have read staging and written their version's index; then one move goes through, then the
other. Both the same policy and two different policies, on a staging that exists (the
``must_exist`` compare-and-swap) and on none yet (both first moves race for the
placeholder index).

After each race: staging's alias is on one index; the history has exactly one ``draft``
event per accepted draft, in the order they were accepted, each naming the version it was
made on as its previous one; every event's diff is exactly what changed between the
versions it names; and what staging serves is the newest event's version, with every
accepted draft in it."""

from __future__ import annotations

from typing import Any

import pytest

from control_plane import policy_store
from control_plane.lifecycle.changes import policy_diff
from control_plane.lifecycle.workflow import AUTHORING, Workflow
from tests.drills.gates import alias_move, error_of, gated_api, send
from tests.e2e.conftest import ready, service, settings  # noqa: F401
from tests.lifecycle.conftest import Lifecycle, lifecycle  # noqa: F401
from tests.lifecycle.test_four_eyes_lineage import CLEMENTINES, FIXED_CREAMERS, draft
from tests.lifecycle.test_workflow_api import ok

pytestmark = pytest.mark.drill

TEAS: dict[str, Any] = {
    "id": "drill-teas", "title": "teas", "owner": "merch-team-food",
    "trigger": {"phrase": ["green tea"]}, "rules": [{"category": {"values": ["Teas"]}}],
}


def put(lc: Lifecycle, who: str, policy: dict[str, Any]) -> Any:
    return lc.call("PUT", f"/v1/policies/staging/policies/{policy['id']}", who,
                   json={"policy": policy, "reason": f"{who} drafts {policy['id']}"})


def staging_of(lc: Lifecycle) -> tuple[list[str], str | None]:
    """The indices under staging, and the version the API says staging is."""
    alias = policy_store.alias_name(lc.settings.policies.index_prefix, "staging")
    answer = lc.call("GET", "/v1/policies/environments/staging", "carol")
    return lc.engine.alias_targets(alias), answer.json().get("version")


def race(lc: Lifecycle, drafts: list[tuple[str, dict[str, Any]]]) -> tuple[Any, Any]:
    """Both drafts at once, each held at its alias move until both are there; the first to
    arrive goes through first. (the winner's response, the loser's)"""
    gated, _ = gated_api(lc)
    gate = gated.gate(alias_move(lc.settings.policies.index_prefix, "staging"), limit=2)
    calls = [send(lc, "PUT", f"/v1/policies/staging/policies/{policy['id']}", who,
                  json={"policy": policy, "reason": f"{who} drafts {policy['id']}"})
             for who, policy in drafts]
    first, second = gate.reached()
    # the race happened: both drafts read the same staging and are about to move it
    assert first.expects() == second.expects(), (first.body, second.body)
    assert first.adds() != second.adds()
    first.through()
    second.open()
    responses = [call.result(timeout=120) for call in calls]
    won = [r for r in responses if r.status_code == 200]
    lost = [r for r in responses if r.status_code != 200]
    assert len(won) == 1 and len(lost) == 1, [r.text for r in responses]
    winner = won[0].json()
    assert policy_store.index_name(lc.settings.policies.index_prefix, winner["version"]) == first.adds()[0]
    return won[0], lost[0]


def assert_history_explains_staging(
    lc: Lifecycle, wf: Workflow, before: int, accepted: list[tuple[str, str]]
) -> None:
    """``accepted``: (author, version) of every draft answered 200 since ``before`` staging
    events, in the order they were answered."""
    events = wf.history(env="staging", action=AUTHORING)[::-1]  # oldest first
    new = events[before:]
    assert [(e.actor, e.action, e.version) for e in new] == [
        (who, "draft", version) for who, version in accepted
    ], "one draft event per accepted draft, in order"
    live = wf.history(env="live", action="bootstrap")[-1].version or ""
    for n, event in enumerate(events):
        made_on = events[n - 1].version if n else None
        assert event.previous_version == made_on, f"{event.event_id} was not made on {made_on}"
        origin = wf.policy_set(made_on or live)  # a first draft is made on live
        diff = {k: v for k, v in (event.diff or {}).items() if k != "summary"}
        assert diff == policy_diff(origin, wf.policy_set(event.version or "")), event.event_id
    targets, version = staging_of(lc)
    assert len(targets) == 1, f"staging is on {targets}"
    assert policy_store.read_index(lc.engine, targets[0]).policy_set.version == version == events[-1].version
    refused = wf.history(outcome="refused")
    assert all(e.code != "concurrent_change" for e in refused), "the loser was recorded"


@pytest.mark.parametrize("staging", ["existing", "none-yet"])
def test_two_authors_drafting_the_same_policy_at_once(lifecycle: Lifecycle, staging: str) -> None:  # noqa: F811
    lc = lifecycle
    if staging == "existing":
        draft(lc, "dan", TEAS)
    wf = lc.workflow
    before = len(wf.history(env="staging", action=AUTHORING))
    alices = {**FIXED_CREAMERS, "priority": 61}
    dans = {**FIXED_CREAMERS, "priority": 62}
    won, lost = race(lc, [("alice", alices), ("dan", dans)])
    winner = won.json()
    error = error_of(lost, 409, "concurrent_change")
    assert error["details"][0]["version"] == winner["version"], error
    assert winner["version"][:12] in error["message"]
    # what won is what staging serves, and the loser's draft is nowhere
    served = ok(lc.call("GET", f"/v1/policies/environments/staging/policies/{FIXED_CREAMERS['id']}", "carol"))
    assert served["version"] == winner["version"]
    winner_author, loser = ("alice", "dan") if served["policy"]["priority"] == 61 else ("dan", "alice")
    loser_policy = dans if loser == "dan" else alices
    assert_history_explains_staging(lc, wf, before, [(winner_author, winner["version"])])

    # the loser drafts again, on what won: it lands, after the winner's
    again = ok(put(lc, loser, loser_policy))
    served = ok(lc.call("GET", f"/v1/policies/environments/staging/policies/{FIXED_CREAMERS['id']}", "carol"))
    assert served["policy"]["priority"] == loser_policy["priority"]
    assert_history_explains_staging(
        lc, wf, before, [(winner_author, winner["version"]), (loser, again["version"])]
    )


@pytest.mark.parametrize("staging", ["existing", "none-yet"])
def test_two_authors_drafting_different_policies_at_once(lifecycle: Lifecycle, staging: str) -> None:  # noqa: F811
    lc = lifecycle
    if staging == "existing":
        draft(lc, "dan", TEAS)
    wf = lc.workflow
    before = len(wf.history(env="staging", action=AUTHORING))
    by = {"alice": FIXED_CREAMERS, "dan": CLEMENTINES}
    won, lost = race(lc, list(by.items()))
    winner = won.json()
    error = error_of(lost, 409, "concurrent_change")
    assert error["details"][0]["version"] == winner["version"], error
    ids = {p["id"] for p in ok(lc.call("GET", "/v1/policies/environments/staging", "carol"))["policies"]}
    winner_author = next(who for who, policy in by.items() if policy["id"] in ids)
    loser = next(who for who in by if who != winner_author)
    assert by[loser]["id"] not in ids
    assert_history_explains_staging(lc, wf, before, [(winner_author, winner["version"])])

    again = ok(put(lc, loser, by[loser]))
    assert again["parent"] == winner["version"]
    ids = {p["id"] for p in ok(lc.call("GET", "/v1/policies/environments/staging", "carol"))["policies"]}
    assert {FIXED_CREAMERS["id"], CLEMENTINES["id"]} <= ids, "a draft was lost"
    if staging == "existing":
        assert TEAS["id"] in ids
    assert_history_explains_staging(
        lc, wf, before, [(winner_author, winner["version"]), (loser, again["version"])]
    )
