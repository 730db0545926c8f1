"""Drill: another alias move lands between a move and its history event (ADR 0011, the
compare-and-swap; docs/lifecycle.md, Concurrent changes and Limits), through the HTTP API on
the real engine.

A move is two steps: the conditional ``_aliases`` call, then the history event. bob's
promotion of one version is held by a gate around the real engine (tests/drills/gates.py)
after its alias move and before its event is written; meanwhile alice promotes another
version, which reads live where bob's move put it, moves it on and records her event. Then
bob's event write goes on:

* it fails (the engine refuses writes to the history index): bob's call fails in the one
  error shape; the alias is not moved back to what bob replaced (bob's move-back is a
  compare-and-swap, and alice's move stands with its own event); no event claims bob's
  move; live is alice's version, the version served, and the history's newest live event.
* it succeeds, late: both moves are in the history, in the order they happened (bob's
  event was created before his move, alice's after she read what bob's move made), each
  naming the version it replaced, and the newest names the version served."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from control_plane import policy_store
from control_plane.lifecycle.workflow import LIVE_MOVES
from tests.drills.gates import error_of, gated_api, history_write, send
from tests.drills.test_concurrent_promotion import candidates, served
from tests.e2e.conftest import ready, service, settings  # noqa: F401
from tests.lifecycle.conftest import Lifecycle, lifecycle  # noqa: F401
from tests.lifecycle.test_workflow_api import ok

pytestmark = pytest.mark.drill


def live_events(lc: Lifecycle) -> list[dict[str, Any]]:
    """Every live move's event, newest first, as the API lists them."""
    query = "env=live&outcome=done&limit=100"
    events = ok(lc.call("GET", f"/v1/policies/history?{query}", "carol"))["events"]
    return [e for e in events if e["action"] in LIVE_MOVES]


def hold_bobs_move(lc: Lifecycle, tmp_path: Path) -> tuple[Any, Any, str, str, str]:
    """bob promotes ``first``, held after his alias move and before his event; alice
    promotes ``second`` meanwhile. (bob's pending answer, his held event write, the
    original live version, first, second)"""
    prefix = lc.settings.policies.index_prefix
    original = lc.workflow.environment("live").version
    first, second, _ = candidates(lc, tmp_path)
    gated, wf = gated_api(lc)
    gate = gated.gate(history_write(wf, action="promote", version=first, outcome="done"))
    bobs = send(lc, "POST", "/v1/policies/promote", "bob", json={"version": first, "reason": "bob"})
    (held,) = gate.reached()
    # bob's move happened and its event is not written: the window this drill attacks
    alias = policy_store.alias_name(prefix, "live")
    assert lc.engine.alias_targets(alias) == [policy_store.index_name(prefix, first)]
    assert [e["version"] for e in live_events(lc)] == [original]
    alices = ok(lc.call("POST", "/v1/policies/promote", "alice", json={"version": second, "reason": "alice"}))
    assert "live" in alices["environments"]
    assert lc.engine.alias_targets(alias) == [policy_store.index_name(prefix, second)]
    return bobs, held, original, first, second


def test_the_late_event_cannot_be_written(lifecycle: Lifecycle, tmp_path: Path) -> None:  # noqa: F811
    lc = lifecycle
    bobs, held, original, first, second = hold_bobs_move(lc, tmp_path)
    history = lc.workflow.store.history
    lc.engine.request("PUT", f"/{history}/_settings", body={"index.blocks.write": True})
    try:
        held.through()
        answer = bobs.result(timeout=120)
    finally:
        lc.engine.request("PUT", f"/{history}/_settings", body={"index.blocks.write": False})
    # the engine refused bob's event; his call failed in the one error shape
    assert "cluster_block_exception" in str(held.error)
    error_of(answer, 503, "engine_error")

    # alice's move stands: bob's move-back lost its compare-and-swap and changed nothing
    targets, version = served(lc)
    assert targets == [policy_store.index_name(lc.settings.policies.index_prefix, second)]
    assert version == second
    events = live_events(lc)
    assert [(e["actor"], e["action"], e["version"], e["previous_version"]) for e in events] == [
        ("alice", "promote", second, first),  # what alice's move replaced, as it was
        ("operator", "bootstrap", original, None),
    ], "no event claims bob's move; the newest names the version served"
    everything = ok(lc.call("GET", "/v1/policies/history?actor=bob&action=promote", "carol"))["events"]
    assert everything == [], "bob's call is in the history"


def test_the_late_event_is_written(lifecycle: Lifecycle, tmp_path: Path) -> None:  # noqa: F811
    lc = lifecycle
    bobs, held, original, first, second = hold_bobs_move(lc, tmp_path)
    held.through()
    ok(bobs.result(timeout=120))

    targets, version = served(lc)
    assert targets == [policy_store.index_name(lc.settings.policies.index_prefix, second)]
    assert version == second
    events = live_events(lc)
    assert [(e["actor"], e["action"], e["version"], e["previous_version"]) for e in events] == [
        ("alice", "promote", second, first),
        ("bob", "promote", first, original),
        ("operator", "bootstrap", original, None),
    ], "the moves in the order they happened, the newest the version served"
