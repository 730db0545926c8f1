"""A workflow call moves an environment only from where its checks read it: a call that
lost the race is refused ``concurrent_change`` (naming the version that won), changes
nothing and leaves no history event. Deterministic: the stale read is made by hand; the
timed races are in tests/drills/."""

from __future__ import annotations

import pytest

from control_plane.lifecycle.workflow import LIVE_MOVES, Refused
from control_plane.policy import Policy
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_four_eyes_lineage import CLEMENTINES, FIXED_CREAMERS


def test_a_draft_on_a_staging_that_moved_is_refused(lifecycle: Lifecycle) -> None:
    wf, people = lifecycle.workflow, lifecycle.principals
    first = wf.put_policy(people["alice"], FIXED_CREAMERS, "first").version
    stale = wf.environment("staging")
    won = wf.put_policy(people["dan"], CLEMENTINES, "dan wins").version
    events = len(wf.history())
    others = [p for p in stale.policy_set.policies if p.id != "extra-clementines"]
    late = Policy.model_validate(
        {**CLEMENTINES, "id": "late-mandarins", "trigger": {"phrase": ["mandarins"]}}
    )
    with pytest.raises(Refused) as refused:
        wf._redraft(people["alice"], stale, [*others, late], "built on what alice read")
    assert refused.value.code == "concurrent_change" and refused.value.status == 409
    assert refused.value.details[0]["version"] == won != first
    assert won[:12] in refused.value.message
    assert wf.environment("staging").version == won  # dan's draft was not lost
    assert len(wf.history()) == events  # nothing recorded for the loser
    assert len(wf.history(outcome="refused")) == 0


def test_a_live_move_from_a_stale_read_is_refused(lifecycle: Lifecycle) -> None:
    wf, people = lifecycle.workflow, lifecycle.principals
    stale = wf.environment("live")
    disabled = wf.disable(people["bob"], "cheap", "someone else's kill switch").version
    moves = wf.history(env="live", action=LIVE_MOVES)
    with pytest.raises(Refused) as refused:
        wf._move_live("alice", "disable", stale.version, "from a stale read", stale)
    assert refused.value.code == "concurrent_change"
    assert refused.value.details[0]["version"] == disabled
    assert wf.environment("live").version == disabled
    assert wf.history(env="live", action=LIVE_MOVES) == moves
