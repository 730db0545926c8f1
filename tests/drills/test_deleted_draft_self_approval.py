"""Drill: laundering one's own change through a delete. Four-eyes counts every author in
the draft lineage, "conservative by construction" (docs/lifecycle.md, "Four-eyes over the
lineage"): a policy drafted and then deleted still counts. This attacks it over HTTP with
real keys, through ``DELETE /v1/policies/staging/policies/{policy_id}``: author alice
drafts a policy, author dan drafts another on top, alice deletes hers, so the candidate's
content holds only dan's change; the version's tests pass; alice then approves the
candidate. She must be refused 403 ``self_approval`` naming her and both her changes (the
draft and the delete); a promotion with no other approval must be refused ``not_approved``;
bob, who drafted nothing, may approve, and then the promotion goes through.

The second case undoes alice's change back to a version that already exists (equal content,
equal version: the one dan drafted before her), so the candidate's registry lineage does not
pass through her draft at all; her delete, recorded on that version, must still count."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import ready, service, settings  # noqa: F401
from tests.lifecycle.conftest import Lifecycle, lifecycle  # noqa: F401
from tests.lifecycle.test_four_eyes_lineage import CLEMENTINES, FIXED_CREAMERS, draft
from tests.lifecycle.test_workflow_api import ok, refused

pytestmark = pytest.mark.drill


def delete(lc: Lifecycle, who: str, policy_id: str) -> str:
    response = lc.call(
        "DELETE", f"/v1/policies/staging/policies/{policy_id}", who,
        params={"reason": f"{who} deletes {policy_id}"},
    )
    version: str = ok(response)["version"]
    return version


def refused_self_approval(lc: Lifecycle, who: str, version: str) -> list[dict[str, Any]]:
    """``who`` approves ``version``: refused 403 ``self_approval`` naming them; the details
    (their changes) returned, and the refusal found in the history."""
    response = lc.call("POST", f"/v1/policies/versions/{version}/approve", who, json={})
    message = refused(response, 403, "self_approval")
    assert message.startswith(f"{who} authored changes between live and {version[:12]}"), message
    details: list[dict[str, Any]] = response.json()["error"]["details"]
    assert details and {d["actor"] for d in details} == {who}
    newest = ok(lc.call("GET", "/v1/policies/history?outcome=refused", "carol"))["events"][0]
    assert (newest["code"], newest["actor"], newest["version"]) == ("self_approval", who, version)
    return details


def run_suite(lc: Lifecycle, who: str, version: str) -> None:
    report = ok(lc.call("POST", f"/v1/policies/versions/{version}/test", who))
    assert report["passed"], report


def promotion_needs_another_approver(lc: Lifecycle, version: str, authors: list[str]) -> None:
    """No approval but its authors' can promote ``version``; bob's (no draft) does."""
    message = refused(lc.call("POST", "/v1/policies/promote", "bob", json={"version": version}),
                      409, "not_approved")
    assert all(author in message for author in authors), message
    state = ok(lc.call("POST", f"/v1/policies/versions/{version}/approve", "bob", json={}))
    assert [a["principal"] for a in state["approvals"]] == ["bob"]
    promoted = ok(lc.call("POST", "/v1/policies/promote", "bob", json={"version": version}))
    assert "live" in promoted["environments"]


def test_a_policy_drafted_then_deleted_still_makes_its_author_an_author(
    lifecycle: Lifecycle,  # noqa: F811
) -> None:
    lc = lifecycle
    live = ok(lc.call("GET", "/v1/policies/environments/live", "carol"))["version"]
    a = draft(lc, "alice", FIXED_CREAMERS)  # X puts P
    b = draft(lc, "dan", CLEMENTINES)  # Y puts Q on top
    c = delete(lc, "alice", FIXED_CREAMERS["id"])  # X deletes P: only Q is left
    assert len({live, a, b, c}) == 4
    state = ok(lc.call("GET", f"/v1/policies/versions/{c}", "carol"))
    assert state["authors"] == ["alice", "dan"]
    run_suite(lc, "dan", c)

    details = refused_self_approval(lc, "alice", c)
    assert [(d["action"], d["version"], d["policy_ids"]) for d in details] == [
        ("draft", c, [FIXED_CREAMERS["id"]]),  # the delete
        ("draft", a, [FIXED_CREAMERS["id"]]),  # the draft
    ]
    promotion_needs_another_approver(lc, c, ["alice", "dan"])


def test_a_delete_back_to_an_existing_version_still_counts(lifecycle: Lifecycle) -> None:  # noqa: F811
    lc = lifecycle
    b = draft(lc, "dan", CLEMENTINES)  # Y puts Q
    a = draft(lc, "alice", FIXED_CREAMERS)  # X puts P on top
    c = delete(lc, "alice", FIXED_CREAMERS["id"])  # and deletes it: the content is dan's again
    assert c == b and a != b  # equal content, equal version: its registry parent is live
    state = ok(lc.call("GET", f"/v1/policies/versions/{c}", "carol"))
    assert state["authors"] == ["alice", "dan"]
    run_suite(lc, "dan", c)

    details = refused_self_approval(lc, "alice", c)
    assert [(d["action"], d["version"], d["policy_ids"]) for d in details] == [
        ("draft", c, [FIXED_CREAMERS["id"]]),  # the delete, recorded on dan's version
    ]
    promotion_needs_another_approver(lc, c, ["alice", "dan"])
