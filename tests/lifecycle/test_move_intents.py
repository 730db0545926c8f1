"""A move's process dying between the alias move and its history event (ADR 0053,
docs/lifecycle.md, Concurrent changes): every move is written down first as an intent,
the move's own alias call marks it applied, and whoever reads the history next completes
what a dead process left: the event of a move that was made (its actor's, marked
recovered), nothing for one that was not (and it can never be made after that).

In process, on the real engine: the "crash" is a BaseException raised by a wrapper around
the engine at the chosen request (the workflow catches Exception only, so nothing of its
own clean-up runs, as when the process dies). The process that owned the intent is made a
dead one (a child process that exited) or another host's, so the readers here tell it gone,
or do not and wait for its lease. tests/drills/test_crash_mid_move.py does the same with
``govsearch serve`` processes killed for real."""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from control_plane import policy_store
from control_plane.bootstrap import profile_of
from control_plane.engine import Engine, EngineError
from control_plane.lifecycle.intents import IntentGivenUp, this_process
from control_plane.lifecycle.workflow import LIVE_MOVES, Refused, Workflow
from tests.engines import DelegatingEngine, Noting
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_history_semantics import candidate

Picks = Callable[[str, str, Any], bool]


class Crash(BaseException):
    """The process died here."""


class Crashing(DelegatingEngine):
    """The real engine; the first request ``picks`` chooses never reaches it (``after``:
    reaches it, and its answer never comes back): the process dies there."""

    def __init__(self, real: Engine, picks: Picks, *, after: bool = False) -> None:
        super().__init__(real)
        self.picks, self.after = picks, after
        self.crashed: tuple[str, str, Any] | None = None

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        if self.crashed is not None or not self.picks(method, path, body):
            return super().request(method, path, body, params, timeout_s)
        self.crashed = (method, path, body)
        if self.after:
            with contextlib.suppress(EngineError):  # the engine's answer is lost with the process
                super().request(method, path, body, params, timeout_s)
        raise Crash(f"died at {method} {path}")


def dead_owner() -> dict[str, Any]:
    """This host's identity with the pid of a process that ran and exited."""
    child = subprocess.Popen(["sleep", "0.2"])
    me = this_process()
    with open(f"/proc/{child.pid}/stat", encoding="ascii") as stat:
        started = int(stat.read().rpartition(")")[2].split()[19])
    child.wait()
    return {**me, "pid": child.pid, "started": started}


def elsewhere() -> dict[str, Any]:
    """A process on another host: nobody here can tell whether it still runs."""
    return {**this_process(), "host": "another-host"}


def workflow(lc: Lifecycle, engine: Engine, owner: Callable[[], Mapping[str, Any]] | None = None) -> Workflow:
    wf = Workflow(lc.settings, engine, profile_of(lc.settings), clock=lc.workflow.clock)
    if owner is not None:
        frozen = owner()
        wf.intents.owner = lambda: frozen
    return wf


def alias_move(lc: Lifecycle, env: str) -> Picks:
    alias = policy_store.alias_name(lc.settings.policies.index_prefix, env)
    return lambda method, path, body: path == "/_aliases" and any(
        a.get("add", {}).get("alias") == alias for a in body.get("actions", [])
    )


def event_write(lc: Lifecycle, action: str) -> Picks:
    where = f"/{lc.workflow.store.history}/_doc/"
    return lambda method, path, body: (
        method == "PUT" and path.startswith(where) and isinstance(body, Mapping)
        and body.get("action") == action
    )


def live_index(lc: Lifecycle) -> list[str]:
    return lc.engine.alias_targets(policy_store.alias_name(lc.settings.policies.index_prefix, "live"))


def index_of(lc: Lifecycle, version: str) -> str:
    return policy_store.index_name(lc.settings.policies.index_prefix, version)


def intents(lc: Lifecycle) -> dict[str, dict[str, Any]]:
    """Every intent document, by id."""
    wf = lc.workflow
    lc.engine.refresh(wf.intents.index)
    hits = lc.engine.search(wf.intents.index, {"size": 100, "query": {"match_all": {}}})["hits"]["hits"]
    return {hit["_id"]: hit["_source"] for hit in hits}


def markers(lc: Lifecycle) -> list[str]:
    answer = lc.engine.request("GET", f"/{lc.workflow.intents.index}/_alias")
    return sorted(alias for entry in answer.values() for alias in entry.get("aliases", {}))


def crash_promotion(lc: Lifecycle, picks: Picks, owner: Callable[[], Mapping[str, Any]], **kw: Any) -> str:
    """bob's promotion of a new candidate, dying at ``picks``; the candidate."""
    version = candidate(lc, "teas", "green tea")
    doomed = workflow(lc, Crashing(lc.engine, picks, **kw), owner)
    with pytest.raises(Crash):
        doomed.promote(lc.principals["bob"], version, "teas for winter")
    return version


def test_a_move_made_by_a_process_that_died_before_its_event_is_recorded_by_the_next_reader(
    lifecycle: Lifecycle,
) -> None:
    lc = lifecycle
    original = lc.workflow.environment("live").version
    version = crash_promotion(lc, event_write(lc, "promote"), dead_owner)
    assert live_index(lc) == [index_of(lc, version)], "the move was made"
    (intent,) = [i for i in intents(lc).values() if i["action"] == "promote"]
    assert intent["state"] == "open"

    moves = lc.workflow.history(env="live", action=LIVE_MOVES)  # any reader
    assert moves[0].version == version, "the history's newest live event names what is served"
    event = moves[0]
    assert (event.actor, event.action, event.previous_version, event.reason) == (
        "bob", "promote", original, "teas for winter"
    )
    assert event.event_id == intent["intent_id"] and event.seq == intent["seq"]
    recovered = (event.details or {})["recovered"]
    assert recovered["intent"] == intent["intent_id"] and str(intent["owner"]["pid"]) in recovered["owner"]
    assert intents(lc)[intent["intent_id"]]["state"] == "recorded"
    assert markers(lc) == [], "a closed intent leaves no marker"
    # reading again records nothing more; the served version's state reads it
    assert lc.workflow.history(env="live", action=LIVE_MOVES) == moves
    assert lc.workflow.environment("live").suite_sha256 == event.suite_sha256
    assert lc.workflow.rollback(lc.principals["bob"], None, "undo").version == original


def test_a_live_owners_move_is_left_to_it_until_its_lease_passes(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    original = lc.workflow.environment("live").version
    version = crash_promotion(lc, event_write(lc, "promote"), elsewhere)
    # another host's process: nobody here can tell it died, so it has until its lease ends
    assert lc.workflow.history(env="live", action=LIVE_MOVES)[0].version == original
    later = workflow(lc, lc.engine)
    later.intents.now_ns = lambda: lc.workflow.intents.now_ns() + int(61e9)  # the lease (60 s) passed
    moves = later.history(env="live", action=LIVE_MOVES)
    assert [(e.actor, e.version) for e in moves[:2]] == [("bob", version), ("operator", original)]


def test_two_readers_at_once_record_the_move_once(lifecycle: Lifecycle) -> None:
    from tests.drills.gates import GatedEngine

    lc = lifecycle
    version = crash_promotion(lc, event_write(lc, "promote"), dead_owner)
    gated = GatedEngine(lc.engine)
    # both readers hold at the step claiming the move (applied -> recording) until both are there
    claim = gated.gate(
        lambda method, path, body: path == "/_aliases" and any(
            a.get("add", {}).get("alias", "").endswith("-recording") for a in body.get("actions", [])
        ),
        limit=2,
    )
    readers = [workflow(lc, gated) for _ in range(2)]
    done: list[Any] = []
    threads = [threading.Thread(target=lambda r=r: done.append(r.settle_moves())) for r in readers]
    for thread in threads:
        thread.start()
    first, second = claim.reached()
    first.through()
    second.through()
    for thread in threads:
        thread.join(timeout=60)
    assert isinstance(second.error, EngineError), "the second claim must lose"
    promotions = lc.workflow.history(action="promote")
    assert [e.version for e in promotions] == [version], "one event, whoever wrote it"
    closed = [s for d in done for s in d]
    assert closed and {s.state for s in closed} == {"recorded"}, "closed once, or twice the same way"
    assert {i["state"] for i in intents(lc).values()} == {"recorded"}


def test_a_move_never_made_is_dropped_and_can_never_be_made(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    live = live_index(lc)
    doomed = Crashing(lc.engine, alias_move(lc, "live"))
    version = candidate(lc, "teas", "green tea")
    wf = workflow(lc, doomed, dead_owner)
    with pytest.raises(Crash):
        wf.promote(lc.principals["bob"], version, "never sent")
    assert doomed.crashed is not None
    assert lc.workflow.history(env="live", action=LIVE_MOVES)[0].action == "bootstrap"
    assert live_index(lc) == live
    (intent,) = [i for i in intents(lc).values() if i["action"] == "promote"]
    assert intent["state"] == "dropped" and intent["version"] == version
    # the move's request reaching the engine late (it had left the dead process) changes nothing
    method, path, body = doomed.crashed
    with pytest.raises(EngineError) as late:
        lc.engine.request(method, path, body)
    assert late.value.status == 404
    assert live_index(lc) == live
    assert lc.workflow.history(action="promote") == []


def test_a_move_that_lost_its_race_and_died_is_dropped(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    stale = lc.workflow.environment("live")
    won = lc.workflow.disable(lc.principals["bob"], "cheap", "someone else's kill switch").version
    doomed = workflow(lc, Crashing(lc.engine, alias_move(lc, "live"), after=True), dead_owner)
    with pytest.raises(Crash):
        doomed._move_live("alice", "rollback", stale.version, "from a stale read", stale)
    moves = lc.workflow.history(env="live", action=LIVE_MOVES)
    assert [e.version for e in moves[:1]] == [won] and all(e.actor != "alice" for e in moves)
    assert live_index(lc) == [index_of(lc, won)]
    states = {i["actor"]: i["state"] for i in intents(lc).values()}
    assert states == {"operator": "recorded", "bob": "recorded", "alice": "dropped"}


def test_a_move_completed_after_another_move_on_top_of_it_keeps_its_place(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    original = lc.workflow.environment("live").version
    first = crash_promotion(lc, event_write(lc, "promote"), elsewhere)
    # in its owner's hands (lease): alice's kill switch reads live where bob's move put it
    disabled = lc.workflow.disable(lc.principals["alice"], "cheap", "on top").version
    assert [e.actor for e in lc.workflow.history(env="live", action=LIVE_MOVES)] == ["alice", "operator"]
    later = workflow(lc, lc.engine)
    later.intents.now_ns = lambda: lc.workflow.intents.now_ns() + int(61e9)
    moves = later.history(env="live", action=LIVE_MOVES)
    assert [(e.actor, e.action, e.version, e.previous_version) for e in moves] == [
        ("alice", "disable", disabled, first),
        ("bob", "promote", first, original),
        ("operator", "bootstrap", original, None),
    ], "in the order they happened; the newest is what is served"
    assert live_index(lc) == [index_of(lc, disabled)]


def test_an_owner_whose_event_cannot_be_written_withdraws_its_move(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    wf, engine = lc.workflow, lc.engine
    live = wf.environment("live")
    engine.request("PUT", f"/{wf.store.history}/_settings", body={"index.blocks.write": True})
    try:
        with pytest.raises(EngineError):
            wf.disable(lc.principals["bob"], "cheap", "the history cannot be written")
    finally:
        engine.request("PUT", f"/{wf.store.history}/_settings", body={"index.blocks.write": False})
    assert live_index(lc) == [live.index]
    (intent,) = [i for i in intents(lc).values() if i["action"] == "disable"]
    assert intent["state"] == "withdrawn" and "moved back" in intent["closed"]["note"]
    later = workflow(lc, lc.engine)
    later.intents.now_ns = lambda: lc.workflow.intents.now_ns() + int(61e9)
    assert later.history(action="disable") == [], "a withdrawn move is never recorded"


def test_an_owner_past_its_lease_cannot_make_its_move(lifecycle: Lifecycle) -> None:
    from tests.drills.gates import GatedEngine

    lc = lifecycle
    live = live_index(lc)
    version = candidate(lc, "teas", "green tea")
    gated = GatedEngine(lc.engine)
    gate = gated.gate(lambda method, path, body: alias_move(lc, "live")(method, path, body))
    slow = workflow(lc, gated, elsewhere)
    answer: list[BaseException] = []

    def promote() -> None:
        try:
            slow.promote(lc.principals["bob"], version, "slow")
        except BaseException as error:  # what the call raised is the result
            answer.append(error)

    thread = threading.Thread(target=promote)
    thread.start()
    (held,) = gate.reached()
    later = workflow(lc, lc.engine)
    later.intents.now_ns = lambda: lc.workflow.intents.now_ns() + int(61e9)
    later.settle_moves()  # the lease passed: the intent is dropped
    held.through()
    thread.join(timeout=60)
    assert len(answer) == 1 and isinstance(answer[0], IntentGivenUp), answer
    assert live_index(lc) == live
    assert lc.workflow.history(action="promote") == []
    with pytest.raises(Refused):
        lc.workflow.rollback(lc.principals["bob"], None, None)  # nothing moved: nothing to roll back


def test_a_reader_leaves_alone_an_intent_opened_while_it_reads(lifecycle: Lifecycle) -> None:
    """A reader sees an intent's token before its document is written (the token comes
    first), then the document: the intent is its owner's, in flight, and its move goes on."""
    from tests.drills.gates import GatedEngine

    lc = lifecycle
    version = candidate(lc, "teas", "green tea")
    journal = lc.workflow.intents.index
    owner_engine, reader_engine = GatedEngine(lc.engine), GatedEngine(lc.engine)

    def document(method: str) -> Picks:
        return lambda m, path, body: m == method and path.startswith(f"/{journal}/_doc/")

    written = owner_engine.gate(document("PUT"))
    moving = owner_engine.gate(alias_move(lc, "live"))
    looked_up = reader_engine.gate(document("GET"))
    owner, reader = workflow(lc, owner_engine), workflow(lc, reader_engine)
    promoted: list[Any] = []
    bob = lc.principals["bob"]
    thread = threading.Thread(target=lambda: promoted.append(owner.promote(bob, version, "x")))
    thread.start()
    (write,) = written.reached()  # the token is there, the document not yet
    settling = threading.Thread(target=reader.settle_moves)
    settling.start()
    (lookup,) = looked_up.reached()  # the reader found the token without an open document
    write.through()
    (move,) = moving.reached()
    lookup.through()  # ... and now finds the document, open
    settling.join(timeout=60)
    move.through()
    thread.join(timeout=60)
    assert promoted and promoted[0].version == version
    assert lc.workflow.history(env="live", action=LIVE_MOVES)[0].version == version


def test_a_workflow_call_settles_once_and_closes_its_intent_in_one_call(lifecycle: Lifecycle) -> None:
    """What the journal costs a promotion: one read of its markers before the rules read the
    history and one before the answer does (not one per history read), and the close is a
    document write and one marker removal (not a marker read, then a removal)."""
    lc = lifecycle
    version = candidate(lc, "teas", "green tea")
    counting = Noting(lc.engine)
    wf = workflow(lc, counting)
    wf.intents.ensure()
    assert wf.promote(lc.principals["bob"], version, "counted").version == version
    journal = wf.intents.index
    markers_read = [path for method, path in counting.sent if path.startswith(f"/{journal}/_alias")]
    history_read = [path for method, path in counting.sent if path == f"/{wf.store.history}/_search"]
    assert len(history_read) > 2 and markers_read == [f"/{journal}/_alias"] * 2, counting.sent
    moved = counting.sent.index(next(s for s in counting.sent if s[0] == "PUT" and s[1].startswith(
        f"/{wf.store.history}/_doc/")))
    assert [method for method, _ in counting.sent[moved + 1:moved + 3]] == ["PUT", "POST"], (
        "the event, then the intent closed (PUT) and its marker removed (POST /_aliases)"
    )
    assert counting.sent[moved + 2][1] == "/_aliases"
    # settled all the same: a move left by a dead process is recorded before the rules read
    dead = candidate(lc, "herbal", "herbal tea")
    with pytest.raises(Crash):
        workflow(lc, Crashing(lc.engine, event_write(lc, "promote")), dead_owner).promote(
            lc.principals["bob"], dead, "died before its event"
        )
    assert live_index(lc) == [index_of(lc, dead)]
    rolled = wf.rollback(lc.principals["bob"], None, "back")
    assert rolled.version == version, "the rollback's rules saw the recovered promotion"


def test_a_kill_switch_whose_event_is_not_written_yet_is_not_undone_by_a_promotion(
    lifecycle: Lifecycle,
) -> None:
    """A disable moved live, and its owner (another host, within its lease: it may still
    write the event) has not written its event: the history does not name it yet, while
    live serves it. A promotion turning the killed policy back on must not read that as a
    policy disabled by authoring: refused, live left as the kill switch put it."""
    lc = lifecycle
    version = candidate(lc, "teas", "green tea")  # staged before the incident: cheap enabled
    killing = workflow(lc, Crashing(lc.engine, event_write(lc, "disable")), elsewhere)
    with pytest.raises(Crash):
        killing.disable(lc.principals["alice"], "cheap", "margin incident")
    killed = live_index(lc)
    assert not lc.workflow.environment("live").policy_set.policy("cheap").enabled
    assert lc.workflow.history(action="disable") == [], "in its owner's hands: not recorded yet"
    with pytest.raises(Refused) as refused:
        lc.workflow.promote(lc.principals["bob"], version, "teas for winter")
    assert refused.value.code == "move_in_flight", refused.value.message
    assert live_index(lc) == killed, "the kill switch stands"
    # once its event is there (its lease passed: a reader records it), the guard names it
    later = workflow(lc, lc.engine)
    later.intents.now_ns = lambda: lc.workflow.intents.now_ns() + int(61e9)
    with pytest.raises(Refused) as named:
        later.promote(lc.principals["bob"], version, "teas for winter")
    assert named.value.code == "reenables_disabled"
    assert "cheap (disabled by alice: margin incident)" in named.value.message
