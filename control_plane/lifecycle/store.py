"""The lifecycle's memory, in the engine: a registry of versions and test suites, and an
append-only history of every change.

Two indices per policies prefix:

* ``PREFIX-registry``: one document per policy-set version (``version:<sha256>``: its
  index, parent and when it was first written) and one per test suite
  (``suite:<sha256>``: the cases). Both are written once (``op_type=create``) and never
  changed, like the policies indices they describe.
* ``PREFIX-history``: one event per action (apply, draft, test, approve, promote,
  rollback, disable, bootstrap, suggest) and per refusal, with its actor, time, reason,
  the environment and versions involved, and the policy diff. Nothing is updated or
  deleted; every state the workflow needs (who authored a version, which tests passed,
  who approved it, what was live before) is read back from these events. A move's event
  is written once under its intent's id (``op_type=create``), whoever writes it.

A third, ``PREFIX-intents``, holds each environment move written down before it is made
(:mod:`control_plane.lifecycle.intents`): a move whose process died before writing its
event is completed from there before the history is read.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from control_plane.engine import Engine, EngineError
from control_plane.times import iso

_KEYWORD = {"type": "keyword"}
_OPAQUE = {"type": "object", "enabled": False}

REGISTRY_MAPPING: dict[str, Any] = {
    "settings": {"number_of_shards": 1, "number_of_replicas": 0},
    "mappings": {
        "dynamic": False,
        "properties": {
            "type": _KEYWORD,
            "version": _KEYWORD,
            "index": _KEYWORD,
            "parent": _KEYWORD,
            "sha256": _KEYWORD,
            "created_at": {"type": "date"},
            "suite": _OPAQUE,
            "files": _OPAQUE,
        },
    },
}

HISTORY_MAPPING: dict[str, Any] = {
    "settings": {"number_of_shards": 1, "number_of_replicas": 0},
    "mappings": {
        "dynamic": False,
        "properties": {
            "event_id": _KEYWORD,
            "seq": {"type": "long"},
            "time": {"type": "date"},
            "actor": _KEYWORD,
            "action": _KEYWORD,
            "outcome": _KEYWORD,
            "code": _KEYWORD,
            "env": _KEYWORD,
            "version": _KEYWORD,
            "previous_version": _KEYWORD,
            "suite_sha256": _KEYWORD,
            "policy_ids": _KEYWORD,
            "reason": {"type": "text"},
            "diff": _OPAQUE,
            "details": _OPAQUE,
        },
    },
}

@dataclass(frozen=True)
class Event:
    """One history event, as stored."""

    event_id: str
    seq: int
    time: str
    actor: str
    action: str
    outcome: str = "done"
    """``done``, or ``refused`` (with ``code``)"""
    code: str | None = None
    env: str | None = None
    version: str | None = None
    previous_version: str | None = None
    suite_sha256: str | None = None
    policy_ids: tuple[str, ...] = ()
    reason: str | None = None
    diff: Mapping[str, Any] | None = None
    details: Mapping[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        data = {
            "event_id": self.event_id,
            "seq": self.seq,
            "time": self.time,
            "actor": self.actor,
            "action": self.action,
            "outcome": self.outcome,
            "code": self.code,
            "env": self.env,
            "version": self.version,
            "previous_version": self.previous_version,
            "suite_sha256": self.suite_sha256,
            "policy_ids": list(self.policy_ids),
            "reason": self.reason,
            "diff": dict(self.diff) if self.diff is not None else None,
            "details": dict(self.details) if self.details is not None else None,
        }
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        return cls(**{**data, "policy_ids": tuple(data.get("policy_ids") or ())})


class LifecycleStore:
    """Registry and history for one policies prefix."""

    def __init__(self, engine: Engine, prefix: str) -> None:
        self.engine = engine
        self.registry = f"{prefix}-registry"
        self.history = f"{prefix}-history"
        self._ready = False
        self.before_read: Callable[[], object] | None = None
        """called before the history is read: completes the moves whose owner died between
        the alias move and the event (:mod:`control_plane.lifecycle.intents`); once per
        :meth:`one_call` when the reads are made in one"""
        self._call = threading.local()

    def ensure(self) -> None:
        if self._ready:
            return
        for name, mapping in ((self.registry, REGISTRY_MAPPING), (self.history, HISTORY_MAPPING)):
            self.engine.ensure_index(name, mapping)
        self._ready = True

    # --- registry -----------------------------------------------------------------

    def _create_once(self, doc_id: str, document: Mapping[str, Any]) -> None:
        self.ensure()
        try:
            self.engine.request(
                "PUT",
                f"/{self.registry}/_create/{doc_id}",
                body=document,
                params={"refresh": "true"},
            )
        except EngineError as error:
            if error.status != 409:  # 409: written before, and immutable
                raise

    def register_version(
        self,
        version: str,
        index: str,
        parent: str | None,
        at: datetime,
        files: Mapping[str, str] | None = None,
    ) -> None:
        """``files``: policy id -> the file it was authored in (for export)."""
        self._create_once(
            f"version:{version}",
            {"type": "version", "version": version, "index": index, "parent": parent,
             "created_at": iso(at), "files": dict(files or {})},
        )

    def version(self, version: str) -> dict[str, Any] | None:
        self.ensure()
        found = self.engine.get_document(self.registry, f"version:{version}")
        return found["_source"] if found else None

    def find_version(self, prefix: str) -> str | None:
        """The full version a 12+ character prefix names, if exactly one does."""
        self.ensure()
        result = self.engine.search(
            self.registry,
            {"size": 2, "query": {"bool": {"filter": [
                {"term": {"type": "version"}}, {"prefix": {"version": prefix}},
            ]}}, "_source": ["version"]},
        )
        hits = result["hits"]["hits"]
        return str(hits[0]["_source"]["version"]) if len(hits) == 1 else None

    def save_suite(self, sha256: str, suite: Mapping[str, Any]) -> None:
        self._create_once(f"suite:{sha256}", {"type": "suite", "sha256": sha256, "suite": suite})

    def suite(self, sha256: str) -> dict[str, Any] | None:
        self.ensure()
        found = self.engine.get_document(self.registry, f"suite:{sha256}")
        return found["_source"]["suite"] if found else None

    # --- history ------------------------------------------------------------------

    def record(self, event: Event) -> Event:
        self.ensure()
        self.engine.index_document(self.history, event.event_id, event.as_json(), refresh=True)
        return event

    def record_once(self, event: Event) -> bool:
        """Write a move's event unless an event with its id is there already (its intent's
        owner or another reader wrote it: ADR 0053); True when this call wrote it."""
        self.ensure()
        try:
            self.engine.request(
                "PUT", f"/{self.history}/_doc/{event.event_id}", body=event.as_json(),
                params={"op_type": "create", "refresh": "true"},
            )
        except EngineError as error:
            if error.status == 409:
                return False
            raise
        return True

    def has_event(self, event_id: str) -> bool:
        self.ensure()
        return self.engine.get_document(self.history, event_id, source=["event_id"]) is not None

    def new_event(self, actor: str, action: str, at: datetime, **fields: Any) -> Event:
        seq = time.time_ns()
        return Event(
            event_id=f"{seq:020d}-{uuid.uuid4().hex[:8]}",
            seq=seq,
            time=iso(at),
            actor=actor,
            action=action,
            **fields,
        )

    @contextmanager
    def one_call(self) -> Iterator[None]:
        """The history reads of one workflow call (on this thread): :attr:`before_read` runs
        before the first of them only. Settling again before each later read of the same
        call would add nothing the call can rely on: a move whose owner dies, or whose lease
        passes, while the call runs may as well do so after its last read (the next call
        settles it), and the call's own move is a compare-and-swap on what it read."""
        outer = getattr(self._call, "depth", 0)
        if outer == 0:
            self._call.settled = False
        self._call.depth = outer + 1
        try:
            yield
        finally:
            self._call.depth = outer

    def _before_read(self) -> None:
        if self.before_read is None:
            return
        in_call = getattr(self._call, "depth", 0) > 0
        if in_call and self._call.settled:
            return
        self.before_read()
        if in_call:
            self._call.settled = True

    def events(
        self,
        *,
        env: str | None = None,
        action: str | Sequence[str] | None = None,
        version: str | Sequence[str] | None = None,
        policy_id: str | None = None,
        actor: str | None = None,
        outcome: str | None = "done",
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 1000,
    ) -> list[Event]:
        """History events matching every filter given, newest first (moves whose owner died
        before writing their event completed first)."""
        self.ensure()
        self._before_read()
        filters: list[dict[str, Any]] = []
        for field, value in (
            ("env", env), ("policy_ids", policy_id), ("actor", actor), ("outcome", outcome),
        ):
            if value is not None:
                filters.append({"term": {field: value}})
        if version is not None:
            versions = [version] if isinstance(version, str) else list(version)
            filters.append({"terms": {"version": versions}})
        if action is not None:
            actions = [action] if isinstance(action, str) else list(action)
            filters.append({"terms": {"action": actions}})
        window: dict[str, str] = {}
        if since is not None:
            window["gte"] = iso(since)
        if until is not None:
            window["lt"] = iso(until)
        if window:
            filters.append({"range": {"time": window}})
        body = {
            "size": limit,
            "query": {"bool": {"filter": filters}},
            "sort": [{"seq": "desc"}, {"event_id": "desc"}],
        }
        result = self.engine.search(self.history, body)
        return [Event.from_json(hit["_source"]) for hit in result["hits"]["hits"]]
