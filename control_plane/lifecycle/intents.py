"""Move intents: an environment move's history event written down before the move, so
that a process dying between the alias move and its history event cannot leave an
environment serving a version no event names (ADR 0053).

Every move of an environment's alias (promote, rollback, disable, a staging change, the
bootstrap) goes through four steps:

1. **Open** the intent: add the intent's *token*, an alias ``PREFIX-intent-<id>`` on the
   journal index ``PREFIX-intents``, then write the intent document there: the whole
   history event the move will have (who, what, from which version to which, why, the
   diff), the indices it moves between, the process that owns it and until when.
2. **Move**: the compare-and-swap ``_aliases`` call (ADR 0011) also removes the token
   (``must_exist``) and adds ``...-applied``. The engine applies all of it or none: the
   move happened exactly when ``-applied`` exists.
3. **Record** the event, with the intent's id as its id (``op_type=create``: whoever
   writes it second is told it exists; there is one event per intent whoever writes it).
4. **Close** the intent document (``recorded``) and remove the marker.

The alias markers are the witness of what happened to the move, exact whatever crashed
when: each change of marker is a guarded step (``remove`` with ``must_exist``, then
``add``) in one atomic ``_aliases`` call, so of two steps from one marker exactly one
succeeds:

``open`` (the token) -> ``applied`` (by the move itself) | ``dropped`` (the owner after a
lost race or a failed call, or a reconciler once the owner is gone: the move can never
happen after that, even if its request is still on its way to the engine);
``applied`` -> ``withdrawn`` (the owner could not write the event: it moved the alias back,
in the same call, or could not because another move stood on top) | ``recording`` (a
reconciler claims the move to write its event: the owner can no longer withdraw it).

**Settling** (:meth:`Intents.settle`) is what any reader of the history does first, and a
serving process at start: every open intent whose owner is gone (a process of this host
that no longer runs) or whose lease passed (``policies.move_lease_s``) is completed from
its marker: ``applied`` / ``recording`` -> the event is written from the intent, attributed
to its actor, at its time and with its sequence number (so it sorts before any move made on
top of it), marked ``details.recovered``; ``open`` -> ``dropped``, nothing recorded;
``dropped`` / ``withdrawn`` -> closed, nothing recorded. An intent still in its owner's
hands (the owner runs, the lease has not passed) is left alone: its owner finishes it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from control_plane import policy_store
from control_plane.engine import Engine, EngineError
from control_plane.lifecycle.store import Event, LifecycleStore
from control_plane.times import Clock, iso

log = logging.getLogger("govsearch.lifecycle")

OPEN, APPLIED, DROPPED, WITHDRAWN, RECORDING = "open", "applied", "dropped", "withdrawn", "recording"
MARKERS = (OPEN, APPLIED, DROPPED, WITHDRAWN, RECORDING)
"""what an intent's alias marker says: the token (``open``) or its suffix"""
RECORDED = "recorded"
"""a closed intent whose event is in the history (``dropped`` and ``withdrawn`` close too)"""
STATES = (OPEN, DROPPED, WITHDRAWN, RECORDED)
"""an intent document's states"""
UNRECORDED = (OPEN, DROPPED, WITHDRAWN)
"""the states of the intents no history event names: in flight (``open``), never made
(``dropped``), taken back (``withdrawn``): what :meth:`Intents.journal` lists by default"""

_ID_LENGTH = 29
"""``{seq:020d}-{8 hex}``, like a history event's id"""
_MARKER = re.compile(r"-intent-\d{20}-[0-9a-f]{8}(-[a-z]+)?$")


def is_marker(alias: str) -> bool:
    """Whether ``alias`` is a move intent's marker (not an environment's alias)."""
    return _MARKER.search(alias) is not None

INTENTS_MAPPING: dict[str, Any] = {
    "settings": {"number_of_shards": 1, "number_of_replicas": 0},
    "mappings": {
        "dynamic": False,
        "properties": {
            "intent_id": {"type": "keyword"},
            "seq": {"type": "long"},
            "state": {"type": "keyword"},
            "env": {"type": "keyword"},
            "action": {"type": "keyword"},
            "actor": {"type": "keyword"},
            "version": {"type": "keyword"},
            "previous_version": {"type": "keyword"},
            "expires_ns": {"type": "long"},
            "event": {"type": "object", "enabled": False},
            "owner": {"type": "object", "enabled": False},
            "closed": {"type": "object", "enabled": False},
        },
    },
}


# --- the process that owns an intent -------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip()
    except OSError:
        return None


def _started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), None when no such process
    runs (or it is a zombie: killed, not yet reaped). Linux; elsewhere always None."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def this_process() -> dict[str, Any]:
    """Who owns the intents this process opens: host, boot, PID namespace, pid and the
    pid's start time (a pid is reused; the pair is not)."""
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "boot": _read("/proc/sys/kernel/random/boot_id"),
        "pid_namespace": _pid_namespace(),
        "pid": pid,
        "started": _started(pid),
    }


def gone(owner: Mapping[str, Any], me: Mapping[str, Any] | None = None) -> bool:
    """True when this process can tell ``owner`` no longer runs: same host, boot and PID
    namespace, and its pid runs no more (or runs another process). False when it cannot
    tell (another host or container): then the intent's lease decides."""
    me = me or this_process()
    for key in ("host", "boot", "pid_namespace"):
        if me.get(key) is None or owner.get(key) != me.get(key):
            return False
    if owner.get("started") is None:
        return False
    return bool(_started(int(owner["pid"])) != owner["started"])


def describe(owner: Mapping[str, Any]) -> str:
    return f"{owner.get('host')} pid {owner.get('pid')}"


# --- intents ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Intent:
    """One move, written down before it is made."""

    intent_id: str
    env: str
    alias: str
    from_index: str | None
    """where the move expects the alias (None: a first move)"""
    to_index: str
    event: Event
    """the history event the move will have (``event_id`` is ``intent_id``)"""
    owner: Mapping[str, Any]
    expires_ns: int
    """wall-clock nanoseconds after which anyone may complete it"""

    def as_json(self, state: str = OPEN, closed: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {
            "intent_id": self.intent_id,
            "seq": self.event.seq,
            "state": state,
            "env": self.env,
            "alias": self.alias,
            "from_index": self.from_index,
            "to_index": self.to_index,
            "action": self.event.action,
            "actor": self.event.actor,
            "version": self.event.version,
            "previous_version": self.event.previous_version,
            "expires_ns": self.expires_ns,
            "event": self.event.as_json(),
            "owner": dict(self.owner),
            "closed": dict(closed) if closed is not None else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Intent:
        return cls(
            intent_id=data["intent_id"],
            env=data["env"],
            alias=data["alias"],
            from_index=data.get("from_index"),
            to_index=data["to_index"],
            event=Event.from_json(data["event"]),
            owner=data.get("owner") or {},
            expires_ns=int(data["expires_ns"]),
        )


@dataclass(frozen=True)
class Entry:
    """One intent as the journal read shows it (:meth:`Intents.journal`)."""

    document: Mapping[str, Any]
    """the intent document as stored"""
    marker: str | None
    """an open intent's marker now: ``open`` (not moved yet), ``applied`` (moved, its event
    not written yet), ``recording`` (moved, its event left to the next reader); None once
    closed"""

    def as_json(self) -> dict[str, Any]:
        data = self.document
        expires_ns = int(data["expires_ns"])
        return {
            "intent_id": data["intent_id"],
            "state": data["state"],
            "marker": self.marker,
            "env": data["env"],
            "alias": data.get("alias"),
            "from_index": data.get("from_index"),
            "to_index": data.get("to_index"),
            "owner": dict(data.get("owner") or {}),
            "expires": iso(datetime.fromtimestamp(expires_ns / 1e9, UTC)),
            "closed": dict(data["closed"]) if data.get("closed") else None,
            "event": dict(data["event"]),
        }


@dataclass(frozen=True)
class Settled:
    """What settling did with one intent."""

    intent_id: str
    state: str
    """``recorded``, ``dropped`` or ``withdrawn``"""
    env: str
    action: str
    actor: str
    version: str | None


class IntentGivenUp(EngineError):
    """The move's intent was dropped by another process (the move's engine call outlived
    the lease): the move was not made and cannot be. Answered as any engine failure (503
    ``engine_error``): only an engine or a network that slow gets there."""


class Intents:
    """The journal of one policies prefix: intents and their alias markers."""

    def __init__(
        self,
        engine: Engine,
        prefix: str,
        history: LifecycleStore,
        *,
        clock: Clock,
        lease_s: float,
        owner: Callable[[], Mapping[str, Any]] = this_process,
    ) -> None:
        self.engine = engine
        self.index = f"{prefix}-intents"
        self.base = f"{prefix}-intent-"
        self.history = history
        self.clock = clock
        self.lease_s = lease_s
        self.owner = owner
        """who opens intents here (this process)"""
        self.now_ns: Callable[[], int] = time.time_ns
        """the wall clock leases are read on"""
        self._ready = False

    # --- names ---------------------------------------------------------------------------

    def marker(self, intent_id: str, state: str) -> str:
        return self.base + intent_id + ("" if state == OPEN else f"-{state}")

    def _parse(self, alias: str) -> tuple[str, str] | None:
        if not alias.startswith(self.base):
            return None
        rest = alias[len(self.base):]
        intent_id, suffix = rest[:_ID_LENGTH], rest[_ID_LENGTH:]
        state = suffix[1:] if suffix.startswith("-") else (OPEN if not suffix else "")
        return (intent_id, state) if state in MARKERS else None

    def step(self, intent_id: str, start: str, end: str) -> list[dict[str, Any]]:
        """The alias actions of one guarded step: the marker ``start`` must exist."""
        return [
            {"remove": {"index": self.index, "alias": self.marker(intent_id, start), "must_exist": True}},
            {"add": {"index": self.index, "alias": self.marker(intent_id, end)}},
        ]

    # --- the owner's side ---------------------------------------------------------------

    def ensure(self) -> None:
        if not self._ready:
            self.engine.ensure_index(self.index, INTENTS_MAPPING)
            self._ready = True

    def open(
        self, env: str, alias: str, from_index: str | None, to_index: str, event: Event
    ) -> Intent:
        """Write the intent down: its token first, then its document (an open document
        always has a marker: a reader that finds none knows the move cannot happen)."""
        self.ensure()
        intent = Intent(
            intent_id=event.event_id,
            env=env,
            alias=alias,
            from_index=from_index,
            to_index=to_index,
            event=event,
            owner=self.owner(),
            expires_ns=event.seq + int(self.lease_s * 1e9),
        )
        token = [{"add": {"index": self.index, "alias": self.marker(intent.intent_id, OPEN)}}]
        try:
            self.engine.update_aliases(token)
        except EngineError as error:
            if error.status != 404:
                raise
            self._ready = False  # the journal was deleted since this process made it: again
            self.ensure()
            self.engine.update_aliases(token)
        self._write(intent.as_json())
        return intent

    def applies(self, intent: Intent) -> list[dict[str, Any]]:
        """The actions the move's own ``_aliases`` call carries: the token becomes
        ``applied``, in the same atomic call as the move."""
        return self.step(intent.intent_id, OPEN, APPLIED)

    def lost(self, intent: Intent, note: str) -> None:
        """The move lost its compare-and-swap: nothing moved; drop the intent."""
        dropped = self._try(self.step(intent.intent_id, OPEN, DROPPED))
        if dropped or self.state_of(intent.intent_id) == DROPPED:
            self._close(intent.as_json(), DROPPED, note)

    def after_failure(self, intent: Intent) -> str:
        """The move's call failed without saying whether the engine made it (a timeout, a
        dropped connection, a refusal): decide now. ``applied`` (it was made: record it) or
        ``dropped`` (it was not, and now cannot be)."""
        state = self.state_of(intent.intent_id)
        if state == OPEN:
            state = DROPPED if self._try(self.step(intent.intent_id, OPEN, DROPPED)) else self.state_of(
                intent.intent_id
            )
        if state in (APPLIED, RECORDING):
            return APPLIED
        if state is None:  # closed by a reader meanwhile (it removes the marker once closed)
            found = self.engine.get_document(self.index, intent.intent_id)
            if found is not None and found["_source"]["state"] == RECORDED:
                return APPLIED
        self._close(intent.as_json(), DROPPED, "the move's call failed; the move was not made")
        return DROPPED

    def recorded(self, intent: Intent) -> None:
        """Its event is in the history: close the intent (best effort: a reader closes what
        this leaves open)."""
        try:
            self._close(intent.as_json(), RECORDED, "recorded by its owner")
        except EngineError as error:
            log.warning("intent %s: recorded, not closed: %s", intent.intent_id, error)

    def hand_over(self, intent: Intent) -> None:
        """Its event write failed without saying whether it landed (a timeout): the move
        stands; claimed for recording here (``applied -> recording``) so that the next reader
        writes its event at once instead of after the lease (``op_type=create``: the late
        write, should it land, and the reader's leave one event)."""
        self._try(self.step(intent.intent_id, APPLIED, RECORDING))

    def withdraw(self, intent: Intent) -> bool:
        """Its event was refused: withdraw the move, moving the environment back in the same
        call while its alias is still where this move put it (a compare-and-swap made by
        :func:`policy_store.point_alias`, so an index of the cluster deleted as its
        remove-from-* expands does not count as a move on top), else alone (another move
        stands on top). False when the move stands: a reconciler claimed it first (its event
        is written), or it could not be moved back for another reason while it still serves
        (it stays applied: a reader records it; never withdrawn while it is served)."""
        steps = self.step(intent.intent_id, APPLIED, WITHDRAWN)
        try:
            if intent.from_index is not None:
                policy_store.point_alias(
                    self.engine, intent.alias, intent.from_index, expected=intent.to_index, also=steps
                )
            else:
                self.engine.update_aliases([
                    {"remove": {"index": intent.to_index, "alias": intent.alias, "must_exist": True}},
                    *steps,
                ])
            moved_back = True
        except policy_store.AliasMoved:
            moved_back = False
        except EngineError as error:
            if error.status not in (400, 404) or intent.to_index in self.engine.alias_targets(intent.alias):
                return False  # claimed by a reader, or not moved back: it stands
            moved_back = False
        if not moved_back and not self._try(steps):
            return self.state_of(intent.intent_id) == WITHDRAWN
        note = "its event could not be written; " + (
            "the alias was moved back" if moved_back else "another move stands on top: not moved back"
        )
        self._close(intent.as_json(), WITHDRAWN, note)
        return True

    # --- anyone --------------------------------------------------------------------------

    def settle(self) -> list[Settled]:
        """Complete every intent whose owner is gone or whose lease passed (module); what
        was done. Cheap when nothing is open: one read of the journal's aliases."""
        marks = self._marks()
        if not marks:
            return []
        done: list[Settled] = []
        documents = self._open_documents()
        for intent_id, document in sorted(documents.items()):  # oldest first
            settled = self._settle(document, marks.get(intent_id))
            if settled is not None:
                done.append(settled)
        for intent_id, state in marks.items():
            if intent_id not in documents:
                self._tidy(intent_id, state)
        return done

    def journal(
        self, *, env: str | None = None, states: Sequence[str] = UNRECORDED, limit: int = 100
    ) -> list[Entry]:
        """The intents in ``states`` (of ``env``), newest first; an open one with its marker.
        Settles nothing (the caller settles first, as a history read does)."""
        filters: list[dict[str, Any]] = [{"terms": {"state": list(states)}}]
        if env is not None:
            filters.append({"term": {"env": env}})
        body = {"size": limit, "query": {"bool": {"filter": filters}},
                "sort": [{"seq": "desc"}, {"intent_id": "desc"}]}
        try:
            hits = self.engine.search(self.index, body)["hits"]["hits"]
        except EngineError as error:
            if error.status == 404:  # no move was ever written down under this prefix
                return []
            raise
        documents = [hit["_source"] for hit in hits]
        marks = self._marks() if any(d["state"] == OPEN for d in documents) else {}
        return [Entry(d, marks.get(d["intent_id"]) if d["state"] == OPEN else None) for d in documents]

    def state_of(self, intent_id: str) -> str | None:
        """The intent's marker now (None: it has none)."""
        return self._marks(intent_id).get(intent_id)

    def _settle(self, document: Mapping[str, Any], state: str | None) -> Settled | None:
        intent = Intent.from_json(document)
        for _ in range(len(MARKERS)):  # each turn moves the marker on, or reads it again
            if state is None:
                state = self.state_of(intent.intent_id)
            if state is None and not self._still_open(intent.intent_id):
                return None  # closed by another reader meanwhile (it closes, then unmarks)
            if state is None or state in (DROPPED, WITHDRAWN):
                note = "no marker: the move was never made" if state is None else "closed by a reader"
                return self._close_after(document, state or DROPPED, note)
            if state == RECORDING:
                self._record(intent)  # what must not fail quietly: the history names the move
                return self._close_after(document, RECORDED, "its event was recovered by a reader")
            if not self._expired(intent):
                return None  # in its owner's hands
            end = DROPPED if state == OPEN else RECORDING
            state = end if self._try(self.step(intent.intent_id, state, end)) else None
        return None

    def _close_after(self, document: Mapping[str, Any], state: str, note: str) -> Settled:
        """Close what is settled (the marker already says it): a failure to write the
        journal is logged, and the next reader closes it; the history read goes on."""
        try:
            return self._close(document, state, note)
        except EngineError as error:
            log.warning("intent %s: %s, not closed: %s", document["intent_id"], state, error)
            return Settled(str(document["intent_id"]), state, str(document["env"]),
                           str(document["action"]), str(document["actor"]), document.get("version"))

    def _record(self, intent: Intent) -> None:
        me = self.owner()
        recovered = replace(intent.event, details={
            **(intent.event.details or {}),
            "recovered": {"at": iso(self.clock()), "by": describe(me), "intent": intent.intent_id,
                          "owner": describe(intent.owner)},
        })
        self.history.record_once(recovered)

    def _expired(self, intent: Intent) -> bool:
        return self.now_ns() >= intent.expires_ns or gone(intent.owner, self.owner())

    def _tidy(self, intent_id: str, state: str) -> None:
        """A marker without an open document when the journal was searched: its intent
        closed (the marker is left over), or a token whose document was never written (its
        owner died in between), or one written since (an intent just opened: left alone)."""
        found = self.engine.get_document(self.index, intent_id)
        if found is not None:
            if found["_source"]["state"] != OPEN:
                self._try([{"remove": {"index": self.index, "alias": self.marker(intent_id, state)}}])
        elif state == OPEN and self.now_ns() >= int(intent_id[:20]) + int(self.lease_s * 1e9):
            # its owner never got to write the intent; removing the token fences the move
            token = self.marker(intent_id, OPEN)
            self._try([{"remove": {"index": self.index, "alias": token, "must_exist": True}}])

    # --- engine --------------------------------------------------------------------------

    def _marks(self, intent_id: str = "") -> dict[str, str]:
        """intent id -> its marker, for every marker on the journal (or one intent's)."""
        try:
            if intent_id:
                answer = self.engine.request("GET", f"/{self.index}/_alias/{self.base}{intent_id}*")
            else:
                answer = self.engine.request("GET", f"/{self.index}/_alias")
        except EngineError as error:
            if error.status == 404:
                return {}
            raise
        marks: dict[str, str] = {}
        for entry in (answer or {}).values():
            for alias in entry.get("aliases", {}):
                parsed = self._parse(alias)
                if parsed is not None:
                    marks[parsed[0]] = parsed[1]
        return marks

    def _still_open(self, intent_id: str) -> bool:
        found = self.engine.get_document(self.index, intent_id)
        return found is not None and found["_source"]["state"] == OPEN

    def _open_documents(self) -> dict[str, dict[str, Any]]:
        result = self.engine.search(self.index, {
            "size": 1000, "query": {"term": {"state": OPEN}}, "sort": [{"seq": "asc"}],
        })
        return {hit["_source"]["intent_id"]: hit["_source"] for hit in result["hits"]["hits"]}

    def _try(self, actions: Sequence[Mapping[str, Any]]) -> bool:
        """Apply alias actions; False when a condition failed (a marker or alias that must
        exist did not)."""
        try:
            self.engine.update_aliases(actions)
        except EngineError as error:
            if error.status in (400, 404):
                return False
            raise
        return True

    def _write(self, document: Mapping[str, Any]) -> None:
        self.engine.index_document(self.index, str(document["intent_id"]), document, refresh=True)

    def _close(self, document: Mapping[str, Any], state: str, note: str) -> Settled:
        """Close the intent document (every closer writes the same state: the marker it is
        read from no longer changes), then remove its marker, whichever it is now (one call:
        the intent's id is a fixed-length prefix of its markers' names alone)."""
        intent_id = str(document["intent_id"])
        closed = {"at": iso(self.clock()), "by": describe(self.owner()), "note": note}
        self._write({**document, "state": state, "closed": closed})
        self._try([{"remove": {"index": self.index, "alias": f"{self.base}{intent_id}*"}}])
        return Settled(intent_id, state, str(document["env"]), str(document["action"]),
                       str(document["actor"]), document.get("version"))
