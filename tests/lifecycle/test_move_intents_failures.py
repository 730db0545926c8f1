"""Move intents (ADR 0053) when the owner's own writes fail: an owner whose event write
failed never leaves an environment serving a version no event names, nor an event naming a
move it took back (its move back meeting index churn, a write that timed out and lands late,
a read-back that fails), and the journal deleted or write-blocked does not stop moves or
history reads.

Real engine; the failures are made by a wrapper around it (tests/engines.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from control_plane import policy_store
from control_plane.engine import Engine, EngineError, EngineTimeout
from control_plane.lifecycle.workflow import LIVE_MOVES
from tests.engines import DelegatingEngine
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_move_intents import intents, live_index, workflow


def _actions(body: Any) -> list[Mapping[str, Any]]:
    return list(body.get("actions", [])) if isinstance(body, Mapping) else []


class ChurnOnMoveBack(DelegatingEngine):
    """The owner's move back (withdraw, with its remove from ``*``) meets another
    application's index deleted as the engine expands ``*``: the engine fails the whole call
    with index_not_found naming that index (atomic: nothing changed). Made here by sending
    the call with one more remove on an index that does not exist: the engine's own answer."""

    def __init__(self, real: Engine, alias: str, gone: str) -> None:
        super().__init__(real)
        self.alias, self.gone, self.churned = alias, gone, 0

    def request(
        self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        actions = _actions(body)
        if (
            path == "/_aliases" and not self.churned
            and any(a.get("add", {}).get("alias", "").endswith("-withdrawn") for a in actions)
            and any(a.get("remove", {}).get("index") == "*" for a in actions)
        ):
            self.churned += 1
            body = {"actions": [
                *actions, {"remove": {"index": self.gone, "alias": self.alias, "must_exist": False}},
            ]}
        return super().request(method, path, body, params, timeout_s)


def test_a_move_back_failing_on_index_churn_does_not_leave_the_move_unrecorded(
    lifecycle: Lifecycle,
) -> None:
    lc = lifecycle
    live = lc.workflow.environment("live")
    alias = policy_store.alias_name(lc.settings.policies.index_prefix, "live")
    churn = ChurnOnMoveBack(lc.engine, alias, f"{lc.settings.policies.index_prefix}-other-app-deleted")
    wf = workflow(lc, churn)
    history = wf.store.history
    lc.engine.request("PUT", f"/{history}/_settings", body={"index.blocks.write": True})
    try:
        with pytest.raises(EngineError):
            wf.disable(lc.principals["bob"], "cheap", "the history cannot be written")
    finally:
        lc.engine.request("PUT", f"/{history}/_settings", body={"index.blocks.write": False})
    assert churn.churned == 1, "the move back met the churn"
    served = live_index(lc)
    newest = lc.workflow.history(env="live", action=LIVE_MOVES)[0]
    (intent,) = [i for i in intents(lc).values() if i["action"] == "disable"]
    assert served == [live.index] and newest.version == live.version, (
        f"live serves {served} (moved to {intent['to_index']}); the newest live event names"
        f" {newest.version[:12]} ({newest.action}); the intent is {intent['state']}:"
        f" {intent['closed'] and intent['closed']['note']}"
    )


class LateEventWrite(DelegatingEngine):
    """The move's history event write times out on the client (the engine is slow to index:
    a history shard recovering; an index request waits up to a minute for its primary, the
    client 5 s) and reaches the engine after the owner's next requests: held here, sent by
    the test when it chooses. ``landed``: the write reaches the engine in time but its answer
    is lost, and the owner's check of it fails too."""

    def __init__(self, real: Engine, history: str, action: str, *, landed: bool = False) -> None:
        super().__init__(real)
        self.history, self.action, self.landed = history, action, landed
        self.held: tuple[str, str, Any, Mapping[str, Any] | None] | None = None
        self.checks_failed = 0

    def request(
        self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        where = f"/{self.history}/_doc/"
        if (
            self.held is None and method == "PUT" and path.startswith(where)
            and isinstance(body, Mapping) and body.get("action") == self.action
        ):
            self.held = (method, path, body, params)
            if self.landed:
                super().request(method, path, body, params, timeout_s)
            raise EngineTimeout("OpenSearch timed out: timed out after 5s")
        if self.landed and self.held is not None and method == "GET" and path == self.held[1]:
            self.checks_failed += 1
            raise EngineError("no shard available", status=503)
        return super().request(method, path, body, params, timeout_s)


def test_an_event_write_that_timed_out_and_lands_late_never_names_a_withdrawn_move(
    lifecycle: Lifecycle,
) -> None:
    lc = lifecycle
    late = LateEventWrite(lc.engine, lc.workflow.store.history, "disable")
    wf = workflow(lc, late)
    with pytest.raises(EngineError):
        wf.disable(lc.principals["bob"], "cheap", "a slow history")
    assert late.held is not None
    method, path, body, params = late.held
    lc.engine.request(method, path, body, params)  # the write the engine was still working on
    served = live_index(lc)
    newest = lc.workflow.history(env="live", action=LIVE_MOVES)[0]
    assert served == [policy_store.index_name(lc.settings.policies.index_prefix, newest.version)], (
        f"live serves {served}; the newest live event names {newest.version[:12]} ({newest.action})"
    )


def test_an_event_written_whose_check_failed_is_not_withdrawn(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    late = LateEventWrite(lc.engine, lc.workflow.store.history, "disable", landed=True)
    wf = workflow(lc, late)
    with pytest.raises(EngineError):
        wf.disable(lc.principals["bob"], "cheap", "answer lost")
    # (before the fix the owner read the event back, failed to, and withdrew the move)
    served = live_index(lc)
    newest = lc.workflow.history(env="live", action=LIVE_MOVES)[0]
    assert served == [policy_store.index_name(lc.settings.policies.index_prefix, newest.version)], (
        f"live serves {served}; the newest live event names {newest.version[:12]} ({newest.action})"
    )


def test_moves_go_on_after_the_intents_index_was_deleted(lifecycle: Lifecycle) -> None:
    """An operator deletes the journal (nothing open in it): the process that had made a
    move before must not refuse every move until it restarts."""
    lc = lifecycle
    wf = lc.workflow
    wf.disable(lc.principals["bob"], "cheap", "a move: the journal exists, this process knows it")
    lc.engine.delete_index(wf.intents.index)
    state = wf.disable(lc.principals["bob"], "chocolate", "after the journal was deleted")
    assert live_index(lc) == [policy_store.index_name(lc.settings.policies.index_prefix, state.version)]


def test_a_write_blocked_journal_does_not_fail_a_history_read_that_recorded_the_move(
    lifecycle: Lifecycle,
) -> None:
    """A dead process's move is recorded by the next reader; the journal cannot be written
    (an index write block): the history names what is served, so reading it must not fail
    (closing the intent is bookkeeping, the marker says what is left to do)."""
    from tests.lifecycle.test_move_intents import crash_promotion, dead_owner, event_write

    lc = lifecycle
    version = crash_promotion(lc, event_write(lc, "promote"), dead_owner)
    journal = lc.workflow.intents.index
    lc.engine.request("PUT", f"/{journal}/_settings", body={"index.blocks.write": True})
    try:
        moves = lc.workflow.history(env="live", action=LIVE_MOVES)
    finally:
        lc.engine.request("PUT", f"/{journal}/_settings", body={"index.blocks.write": False})
    assert moves[0].version == version


def test_a_move_whose_event_write_timed_out_is_recorded_by_the_next_reader(lifecycle: Lifecycle) -> None:
    """The owner (alive, its lease running) could not tell whether its event was written:
    the move stands, and the next history read records it, not only once the lease passed."""
    lc = lifecycle
    late = LateEventWrite(lc.engine, lc.workflow.store.history, "disable")
    wf = workflow(lc, late)
    with pytest.raises(EngineError):
        wf.disable(lc.principals["bob"], "cheap", "a slow history")
    served = live_index(lc)
    moves = lc.workflow.history(env="live", action=LIVE_MOVES)
    assert served == [policy_store.index_name(lc.settings.policies.index_prefix, moves[0].version)]
    assert moves[0].actor == "bob" and moves[0].action == "disable"
    assert late.held is not None
    method, path, body, params = late.held
    with pytest.raises(EngineError) as again:
        lc.engine.request(method, path, body, params)  # the write landing late: one event
    assert again.value.status == 409
    assert len(lc.workflow.history(action="disable")) == 1
