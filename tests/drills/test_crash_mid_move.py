"""Drill: the process making an environment move is SIGKILLed between the alias move and
its history event (ADR 0053; docs/lifecycle.md, Concurrent changes and Limits).

A real ``govsearch serve`` (this checkout's code) talks to the real engine through a TCP
relay (tests/drills/relay.py). The relay holds one request of a move on the wire, the
process is SIGKILLed there, and a new ``govsearch serve`` starts on the engine. What must
hold afterwards, for a promotion, a rollback, the kill switch and a staging draft (the
same code path as ``apply``, ``tests`` and the bootstrap):

* **Killed after the move, before its event** (the event write held, then cut: it never
  reaches the engine): as soon as the new process answers, the environment's newest event
  names the version it serves, and it is the killed call's event: its actor, action,
  previous version and reason, its id the intent's, marked ``details.recovered`` by the new
  process. Exactly one such event. For the promotion, two new processes start at the same
  instant (both settle as they start: one event), and the dead process's event write, let
  through late, is refused by the engine (409: the event is there already).
* **Killed before the move** (the alias call held): nothing moved, nothing recorded; the
  intent is closed ``dropped``; the move's request, let through to the engine late, is
  refused (404: its intent's token is gone) and the environment stays where it was.
* **Killed after the move, another move landing on top before anyone completes it**
  (bob's promotion held at its event, alice's kill switch on another instance meanwhile):
  after the restart, both moves are in the history in the order they happened, each naming
  the version it replaced; the newest is what is served.

Each of these fails on the code before ADR 0053 (the event is never written: live serves a
version no event names, and a move's request arriving late moves live unrecorded), and with
the reconciliation switched off."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from control_plane import policy_store
from control_plane.lifecycle.workflow import AUTHORING, LIVE_MOVES
from tests.drills.harness import Served, serve
from tests.drills.relay import Relay
from tests.drills.results import record
from tests.e2e.conftest import ready, service, settings  # noqa: F401
from tests.lifecycle.conftest import Lifecycle, lifecycle  # noqa: F401
from tests.lifecycle.test_history_semantics import candidate

pytestmark = pytest.mark.drill

BOUND_S = 60.0
TEAS: dict[str, Any] = {
    "id": "drill-teas", "title": "teas", "owner": "merch-team-food",
    "trigger": {"phrase": ["green tea"]}, "rules": [{"category": {"values": ["Teas"]}}],
}
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="crash-drill")


@dataclass
class Move:
    """One workflow call through the HTTP API, and what it moves."""

    action: str
    who: str
    method: str
    path: str
    body: dict[str, Any]
    env: str
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)


def prepare(lc: Lifecycle, action: str) -> Move:
    """What ``action`` needs in place (a candidate tested and approved, or one promoted to
    roll back from); the call."""
    people = lc.principals
    if action == "promote":
        version = candidate(lc, "teas", "green tea")
        return Move("promote", "bob", "POST", "/v1/policies/promote",
                    {"version": version, "reason": "teas for winter"}, "live", "teas for winter")
    if action == "rollback":
        lc.workflow.promote(people["bob"], candidate(lc, "teas", "green tea"), "teas")
        return Move("rollback", "bob", "POST", "/v1/policies/rollback", {"reason": "teas sold out"},
                    "live", "teas sold out")
    if action == "disable":
        return Move("disable", "bob", "POST", "/v1/policies/live/policies/cheap/disable",
                    {"reason": "margin incident"}, "live", "margin incident")
    assert action == "draft"
    return Move("draft", "dan", "PUT", f"/v1/policies/staging/policies/{TEAS['id']}",
                {"policy": TEAS, "reason": "teas in staging"}, "staging", "teas in staging")


def environment(lc: Lifecycle) -> dict[str, str]:
    prefix = lc.settings.policies.index_prefix
    return {
        "GOVSEARCH_POLICIES_INDEX_PREFIX": prefix,
        "GOVSEARCH_KEYS_INDEX": lc.settings.auth.keys_index,
        "GOVSEARCH_ENGINE_TIMEOUT": "90",  # a held request waits on the wire, never times out
    }


def targets(lc: Lifecycle, env: str) -> list[str]:
    return lc.engine.alias_targets(policy_store.alias_name(lc.settings.policies.index_prefix, env))


def version_of(lc: Lifecycle, index: str) -> str:
    return policy_store.read_index(lc.engine, index).policy_set.version


def event_write(lc: Lifecycle, action: str) -> tuple[Callable[[str, str], bool], Callable[[bytes], bool]]:
    """The history write of ``action``'s event."""
    where = f"/{lc.workflow.store.history}/_doc/"
    return (lambda method, path: method == "PUT" and path.startswith(where),
            lambda body: json.loads(body).get("action") == action)


def alias_move(lc: Lifecycle, env: str) -> tuple[Callable[[str, str], bool], Callable[[bytes], bool]]:
    """The ``_aliases`` call moving ``env``'s alias (the compare-and-swap)."""
    alias = policy_store.alias_name(lc.settings.policies.index_prefix, env)
    return (lambda method, path: (method, path) == ("POST", "/_aliases"),
            lambda body: any(a.get("add", {}).get("alias") == alias for a in json.loads(body)["actions"]))


def call(served: Served, lc: Lifecycle, move: Move) -> Any:
    return _POOL.submit(
        httpx.request, move.method, served.url + move.path, json=move.body,
        headers={"authorization": f"Bearer {lc.keys[move.who]}"}, timeout=BOUND_S * 2,
    )


def kill(served: Served) -> None:
    served.process.kill()  # SIGKILL: no clean-up of any kind
    served.process.wait(timeout=30)


@pytest.fixture()
def relay(engine_url: str) -> Iterator[Relay]:
    with Relay(engine_url) as opened:
        yield opened


def start(lc: Lifecycle, engine_url: str, workdir: Path, *names: str) -> list[Served]:
    """``govsearch serve`` processes started at the same instant, on the engine itself."""
    started = list(_POOL.map(lambda name: serve(engine_url, workdir, name, **environment(lc)), names))
    return started


def history(served: Served, lc: Lifecycle, env: str) -> list[dict[str, Any]]:
    """The environment's moves, newest first, as the API lists them."""
    answer = httpx.get(
        served.url + f"/v1/policies/history?env={env}&outcome=done&limit=1000",
        headers={"authorization": f"Bearer {lc.keys['carol']}"}, timeout=BOUND_S,
    )
    assert answer.status_code == 200, answer.text
    moves = LIVE_MOVES if env == "live" else AUTHORING
    return [e for e in answer.json()["events"] if e["action"] in moves]


def served_version(served: Served, lc: Lifecycle, env: str) -> str:
    """The version ``env`` serves: live's, from a search; staging's, from the API."""
    headers = {"authorization": f"Bearer {lc.keys['carol']}"}
    if env == "live":
        answer = httpx.post(served.url + "/v1/search", json={"intent": "oranges"}, timeout=BOUND_S)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["policy_set_version"])
    answer = httpx.get(served.url + f"/v1/policies/environments/{env}", headers=headers, timeout=BOUND_S)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["version"])


def intent_states(lc: Lifecycle, action: str) -> list[str]:
    index = lc.workflow.intents.index
    lc.engine.refresh(index)
    query = {"size": 100, "query": {"term": {"action": action}}}
    return [hit["_source"]["state"] for hit in lc.engine.search(index, query)["hits"]["hits"]]


def assert_history_names_served(served: Served, lc: Lifecycle, env: str) -> list[dict[str, Any]]:
    """One index under ``env``; the newest event of ``env`` names what it serves."""
    (index,) = targets(lc, env)
    version = served_version(served, lc, env)
    assert version == version_of(lc, index)
    events = history(served, lc, env)
    assert events and events[0]["version"] == version, (
        f"{env} serves {version[:12]}; its newest event names {events[0]['version'][:12] if events else None}"
    )
    return events


@pytest.mark.parametrize("action", ["promote", "rollback", "disable", "draft"])
def test_killed_between_the_move_and_its_event(
    lifecycle: Lifecycle, relay: Relay, engine_url: str, tmp_path: Path, action: str,  # noqa: F811
) -> None:
    lc = lifecycle
    started = time.monotonic()
    move = prepare(lc, action)
    before = targets(lc, move.env)
    served_before = version_of(lc, before[0]) if before else None
    doomed = serve(relay.url, tmp_path, "doomed", **environment(lc))
    try:
        relay.hold(*event_write(lc, action))
        answer = call(doomed, lc, move)
        assert relay.held.wait(BOUND_S), f"the {action} never wrote its event"
        # the window: the alias moved, no event says so
        moved = targets(lc, move.env)
        assert moved != before and len(moved) == 1, (before, moved)
        kill(doomed)
    finally:
        doomed.stop()
    if action != "promote":
        relay.cut()  # the event write never reaches the engine (the promotion's comes late, below)
    with pytest.raises(httpx.HTTPError):
        answer.result(timeout=BOUND_S)

    names = ("again", "again-too") if action == "promote" else ("again",)  # two settle at once
    restarted = start(lc, engine_url, tmp_path, *names)
    try:
        events = assert_history_names_served(restarted[0], lc, move.env)
        event = events[0]
        assert targets(lc, move.env) == moved, "the move stands"
        assert (event["actor"], event["action"], event["previous_version"], event["reason"]) == (
            move.who, action, served_before, move.reason
        ), event
        recovered = (event["details"] or {}).get("recovered")
        assert recovered and recovered["intent"] == event["event_id"], event
        assert any(recovered["by"].endswith(f"pid {s.process.pid}") for s in restarted), (
            "completed by a process as it started", recovered, [s.process.pid for s in restarted],
        )
        assert [e["event_id"] for e in events].count(event["event_id"]) == 1
        assert len([e for e in events if e["action"] == action]) == 1
        assert intent_states(lc, action) == ["recorded"]
        for other in restarted[1:]:
            assert history(other, lc, move.env) == events, "every instance reads the same history"
        if action == "promote":
            # the dead process's event write arrives after all: refused, still one event
            relay.release()
            assert relay.answered.wait(BOUND_S)
            assert relay.held_status() == 409, relay.held_answer[:200]
            assert history(restarted[0], lc, move.env) == events
        move.figures = {"recovered_by": recovered["by"], "seconds": round(time.monotonic() - started, 1)}
    finally:
        for served in restarted:
            served.stop()
    record(f"crash-mid-{action}", {
        "drill": f"govsearch serve SIGKILLed between a {action}'s alias move and its history event",
        "command": "pytest -m drill tests/drills/test_crash_mid_move.py", **move.figures,
    })


def test_killed_before_the_move(
    lifecycle: Lifecycle, relay: Relay, engine_url: str, tmp_path: Path,  # noqa: F811
) -> None:
    lc = lifecycle
    move = prepare(lc, "promote")
    before = targets(lc, "live")
    doomed = serve(relay.url, tmp_path, "doomed", **environment(lc))
    try:
        relay.hold(*alias_move(lc, "live"))
        answer = call(doomed, lc, move)
        assert relay.held.wait(BOUND_S), "the promotion never moved live"
        assert targets(lc, "live") == before
        kill(doomed)
    finally:
        doomed.stop()
    with pytest.raises(httpx.HTTPError):
        answer.result(timeout=BOUND_S)

    (restarted,) = start(lc, engine_url, tmp_path, "again")
    try:
        events = assert_history_names_served(restarted, lc, "live")
        assert [e["action"] for e in events] == ["bootstrap"], "nothing recorded"
        # the dead process's move reaches the engine after all: refused, live where it was
        relay.release()
        assert relay.answered.wait(BOUND_S)
        assert relay.held_status() == 404, relay.held_answer[:300]
        assert targets(lc, "live") == before
        assert assert_history_names_served(restarted, lc, "live") == events
        assert intent_states(lc, "promote") == ["dropped"]
    finally:
        restarted.stop()


def test_killed_after_the_move_with_another_move_on_top(
    lifecycle: Lifecycle, relay: Relay, engine_url: str, tmp_path: Path,  # noqa: F811
) -> None:
    lc = lifecycle
    original = lc.workflow.environment("live").version
    move = prepare(lc, "promote")
    doomed = serve(relay.url, tmp_path, "doomed", **environment(lc))
    try:
        relay.hold(*event_write(lc, "promote"))
        answer = call(doomed, lc, move)
        assert relay.held.wait(BOUND_S)
        # bob's process runs (its move is in its hands): alice's kill switch, on another
        # instance, reads live where bob's move put it and moves it on
        disabled = lc.call("POST", "/v1/policies/live/policies/cheap/disable", "alice",
                           json={"reason": "on top"})
        assert disabled.status_code == 200, disabled.text
        kill(doomed)
    finally:
        doomed.stop()
    relay.cut()
    with pytest.raises(httpx.HTTPError):
        answer.result(timeout=BOUND_S)

    (restarted,) = start(lc, engine_url, tmp_path, "again")
    try:
        events = assert_history_names_served(restarted, lc, "live")
        promoted = move.body["version"]
        assert [(e["actor"], e["action"], e["version"], e["previous_version"]) for e in events] == [
            ("alice", "disable", disabled.json()["version"], promoted),
            ("bob", "promote", promoted, original),
            ("operator", "bootstrap", original, None),
        ], "in the order they happened, each naming what it replaced"
        assert "recovered" in (events[1]["details"] or {})
    finally:
        restarted.stop()
