"""The recorder: builds one decision record per request (in the request's thread) and
hands it to the log's background writer (``control_plane.audit.writer``), which seals the
chain in order and appends in batches; the request waits for its batch's fsync (group
commit), never for a lock held over I/O.

A sink failure never drops a record silently: the records stay queued (oldest first) and
are retried in order; the failure is counted (``govsearch_audit_sink_failures``), logged,
and reported by ``/readyz`` until the queue is empty. When the queue is full, requests are
refused (503 ``audit_backlog``, counted in ``govsearch_audit_backlog_refusals``) instead.

Each log also checkpoints its writer's head (``control_plane.audit.checkpoints``) every N
records or T seconds and on ``close`` (the API's shutdown, the CLI's exit), which first
drains the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import threading
import time as monotonic_time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from control_plane.audit.checkpoints import CheckpointStore, checkpoint_store
from control_plane.audit.decision import decision_data, dsl_digest
from control_plane.audit.keys import KeyRing, load_key_ring
from control_plane.audit.metrics import Metrics
from control_plane.audit.record import (
    AnswerOut,
    DecisionRecord,
    ErrorOut,
    EventRecord,
    Extraction,
    TierRunOut,
    Usage,
    explanation_fields,
    intent_fields,
    pseudonym,
    request_params,
    sha256_json,
)
from control_plane.audit.sinks import EngineSink, JsonlSink, Sink
from control_plane.audit.telemetry import Telemetry
from control_plane.audit.writer import RETRY_CHECKPOINT_S, AuditBacklog, ChainedLog, Checkpointing, Commit
from control_plane.config import Settings
from control_plane.engine import Engine, EngineError
from control_plane.intent_text import normalise_intent
from control_plane.times import Clock, iso

__all__ = ["RETRY_CHECKPOINT_S", "AgentTurn", "AuditBacklog", "ChainedLog", "Checkpointing", "Recorder"]

if TYPE_CHECKING:
    from control_plane.engine.aio import AsyncEngine
    from control_plane.service import Compiled, Outcome, SearchRequest, SearchService

log = logging.getLogger("govsearch.audit")


CANCELLED = ErrorOut(
    code="request_cancelled",
    message="the request was cancelled while its engine call ran (shutdown, or the client went"
    " away); it was not answered",
    status=503,
)
"""the error of a search cancelled on the event loop (ADR 0030)"""


def error_of(error: BaseException) -> ErrorOut:
    """The code and status the API answers with for this exception (same mapping)."""
    from control_plane.api.errors import ApiError

    if isinstance(error, ApiError):
        return ErrorOut(code=error.code, message=error.message, status=error.status)
    if isinstance(error, EngineError):
        return ErrorOut(code=error.code, message=str(error), status=503)
    if isinstance(error, AuditBacklog):
        return ErrorOut(code=error.code, message=str(error), status=503)
    return ErrorOut(code="internal_error", message=f"{type(error).__name__}: internal error", status=500)


@dataclass(frozen=True)
class AgentTurn:
    """What the agent gateway reports about one ``POST /v1/agent/query`` for its record.
    There is deliberately no field for the message: it is never recorded."""

    client: str | None = None
    session_id: str | None = None
    caller: str | None = None
    reason_code: str | None = None
    cohorts: tuple[str, ...] = ()
    market: str | None = None
    user_id: str | None = None
    extraction: Extraction | None = None
    intent: str | None = None
    """the validated intent, when the extraction produced one"""
    reason: str | None = None
    usage: Usage | None = None
    answer: AnswerOut | None = None


def _compiled_fields(compiled: Compiled, raw: bool, served: bool = True) -> dict[str, Any]:
    """What the plan says. ``served=False`` (the agent abstained after compiling): the
    policies matched, but nothing was applied to a search."""
    explanation = explanation_fields(compiled.explanation_data(), raw)  # dumped once per cached plan
    fields: dict[str, Any] = {
        "policy_set_version": compiled.policy_set_version,
        "cached": compiled.cached,
        **intent_fields(compiled.intent, raw, compiled.normalisation),
        **explanation,
    }
    if served:
        fields["applied_policies"] = list(compiled.composition.plan.applied)
        fields["plan_sha256"] = compiled.renderings.memo(
            "plan_sha256", lambda: sha256_json(compiled.plan_data())
        )
    else:
        fields["applied"] = []
    return fields


def _received_intent_fields(intent: str | None, raw: bool) -> dict[str, Any]:
    """The intent fields of a request that compiled nothing: its intent normalised here."""
    if not intent:
        return intent_fields(None, raw)
    normalised = normalise_intent(intent)
    return intent_fields(normalised.text, raw, normalised)


def _outcome_fields(outcome: Outcome, raw: bool) -> dict[str, Any]:
    execution = outcome.execution
    return {
        **_compiled_fields(outcome.compiled, raw),
        "dsl_sha256": dsl_digest(outcome.compiled, execution.dsl),
        "status": execution.status,
        "tier": execution.tier,
        "tiers": [
            TierRunOut(tier=r.tier, total=r.total, took_ms=r.took_ms, replayed=r.replayed)
            for r in execution.runs
        ],
        "hits": execution.total,
        "hit_ids": [hit.id for hit in execution.hits],
        "latency_ms": dict(outcome.latency_ms),
    }


def default_writer_id() -> str:
    """``<host>:<pid>:<random>``: a new chain for every process, so workers on one host
    appending to one log never share a chain."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Recorder:
    def __init__(
        self,
        decisions: Sink,
        events: Sink,
        *,
        instance_id: str | None = None,
        store_raw_intent: bool = True,
        queue_size: int = 10_000,
        batch: int = 256,
        commit: Commit = "group",
        telemetry: Telemetry | None = None,
        keys: KeyRing | Callable[[], KeyRing] | None = None,
        checkpoints: CheckpointStore | None = None,
        checkpoint_every_records: int = 100,
        checkpoint_every_s: float = 60.0,
        monotonic: Callable[[], float] = monotonic_time.monotonic,
        clock: Clock,
    ) -> None:
        """``keys``: the ring that seals records and checkpoints (or a function that loads
        it, called on the first write or ``open``); None: hash chain only, no MAC.
        ``checkpoints``: where the writer's heads go (None: no checkpoints).
        ``queue_size``: records not yet written a log holds before requests are refused;
        ``batch``: records per append and fsync at most; ``commit``: ``group`` (a request
        waits for its record's sync to disk), ``written`` (for its write to the file; the
        sync follows) or ``queued`` (it does not wait)."""
        self.writer = instance_id or default_writer_id()
        self.store_raw_intent = store_raw_intent
        self.metrics = Metrics()
        self.telemetry = telemetry or Telemetry.off()
        self.clock = clock
        """when a record is written (its ``time``); the instant policies were evaluated at
        is the request's own ``now``, passed in"""
        self._key_source = keys
        self._key_ring: KeyRing | None = keys if isinstance(keys, KeyRing) else None
        self._key_lock = threading.Lock()
        checkpointing = (
            Checkpointing(checkpoints, checkpoint_every_records, checkpoint_every_s, clock, monotonic)
            if checkpoints is not None
            else None
        )
        options: dict[str, Any] = {
            "keys": self.keys, "checkpointing": checkpointing, "fresh": instance_id is None,
            "batch": batch, "commit": commit,
        }
        self.decisions = ChainedLog(decisions, self.writer, self.metrics, queue_size, name="decisions",
                                    **options)
        self.events = ChainedLog(events, self.writer, self.metrics, queue_size, name="events", **options)

    def keys(self) -> KeyRing | None:
        """The key ring, loaded once (``AuditKeyError`` when it cannot be)."""
        with self._key_lock:
            if self._key_ring is None and callable(self._key_source):
                self._key_ring = self._key_source()
            return self._key_ring

    def open(self) -> None:
        """Load the key ring now (the API does at start: a missing key stops it there)."""
        self.keys()

    def close(self) -> None:
        """Drain both queues into their sinks, stop the writers, checkpoint (shutdown)."""
        for chained in (self.decisions, self.events):
            chained.close("shutdown")

    @classmethod
    def from_settings(cls, settings: Settings, engine: Engine | None, *, clock: Clock) -> Recorder:
        audit = settings.audit
        decisions: Sink
        events: Sink
        if audit.sink == "engine":
            if engine is None:
                raise ValueError("audit.sink 'engine' needs an engine")
            decisions, events = EngineSink(engine, audit.index), EngineSink(engine, audit.index + "-events")
        else:
            path = Path(audit.path)
            decisions, events = JsonlSink(path), JsonlSink(path.with_name("events.jsonl"))
        return cls(
            decisions,
            events,
            instance_id=audit.instance_id,
            store_raw_intent=audit.store_raw_intent,
            queue_size=audit.queue_size,
            batch=audit.batch,
            commit=audit.commit,
            telemetry=Telemetry.from_settings(settings.telemetry),
            keys=lambda: load_key_ring(audit.key_file, audit.key, generate=audit.generate_key),
            checkpoints=checkpoint_store(audit, engine),
            checkpoint_every_records=audit.checkpoint_every_records,
            checkpoint_every_s=audit.checkpoint_every_s,
            clock=clock,
        )

    def watch(self, service: SearchService) -> None:
        """Export the service's plan-cache and speculation counters with these metrics."""
        cache = service.cache
        self.metrics.watch_cache(lambda: (cache.hits, cache.misses))
        self.metrics.watch_speculation(service.speculations.counts)

    # --- writing ------------------------------------------------------------------

    def search(
        self,
        service: SearchService,
        request: SearchRequest,
        request_id: str,
        client: str | None = None,
        *,
        now: datetime | None = None,
    ) -> Outcome:
        """Run ``service.search`` at ``now`` (default: this recorder's clock, read once) and
        record it, success or failure (then re-raise)."""
        self.decisions.admit()  # a full queue refuses before any work is done
        time = self.clock()
        now = now or time
        try:
            outcome = service.search(request, now)
        except Exception as error:
            self.failure(request_id, error_of(error), request=request, client=client, time=time, now=now)
            raise
        self.decision(request_id, request, outcome, client=client, time=time, now=now)
        return outcome

    async def search_cached(
        self,
        service: SearchService,
        request: SearchRequest,
        request_id: str,
        client: str | None = None,
        *,
        engine: AsyncEngine,
        now: datetime | None = None,
    ) -> Outcome | None:
        """:meth:`search` from the event loop, for a search its cached plan serves with
        one engine call (:meth:`SearchService.search_cached`, through ``engine``), recorded
        the same way, the record's wait awaited. None, with nothing recorded, when the
        search needs more: the caller runs :meth:`search` in a thread."""
        self.decisions.admit()
        time = self.clock()
        now = now or time
        try:
            outcome = await service.search_cached(request, now, engine)
        except asyncio.CancelledError:  # never answered (shutdown, or the client went away):
            data = self._failure_data(request_id, CANCELLED, request=request, client=client,
                                      time=time, now=now)  # its record is written all the same
            with contextlib.suppress(AuditBacklog):
                self.decisions.append_nowait(data)
                self._observe(data, ())
            raise
        except Exception as error:
            data = self._failure_data(request_id, error_of(error), request=request, client=client,
                                      time=time, now=now)
            await self.decisions.append_async(data)
            self._observe(data, ())
            raise
        if outcome is not None:
            data = self._decision_data(request_id, request, outcome, client=client, time=time, now=now)
            await self.decisions.append_async(data)
            self._observe(data, outcome.stages)
        return outcome

    def decision(
        self,
        request_id: str,
        request: SearchRequest,
        outcome: Outcome,
        *,
        client: str | None = None,
        extraction: Extraction | None = None,
        time: datetime | None = None,
        now: datetime | None = None,
        endpoint: str = "search",
        status: str | None = None,
    ) -> dict[str, Any] | None:
        data = self._decision_data(
            request_id, request, outcome, client=client, extraction=extraction, time=time, now=now,
            endpoint=endpoint, status=status,
        )
        self._write(data, outcome.stages)
        return data

    def _decision_data(
        self,
        request_id: str,
        request: SearchRequest,
        outcome: Outcome,
        *,
        client: str | None = None,
        extraction: Extraction | None = None,
        time: datetime | None = None,
        now: datetime | None = None,
        endpoint: str = "search",
        status: str | None = None,
    ) -> dict[str, Any]:
        return decision_data(  # the plan's parts once per cached plan, the request's own here
            request_id,
            request,
            outcome,
            raw=self.store_raw_intent,
            **self._instants(time, now),
            client=client,
            endpoint=endpoint,
            extraction=extraction.model_dump(mode="json") if extraction is not None else None,
            status=status,
        )

    def agent(
        self,
        request_id: str,
        turn: AgentTurn,
        *,
        status: str,
        outcome: Outcome | None = None,
        compiled: Compiled | None = None,
        error: ErrorOut | None = None,
        time: datetime | None = None,
        now: datetime | None = None,
        endpoint: str = "agent",
    ) -> dict[str, Any]:
        """The one record of an agent request (``endpoint``: ``agent`` for
        ``/v1/agent/query``, ``mcp`` for the MCP tool): served (``outcome``), abstained after
        compiling (``compiled``: what matched, nothing applied), abstained before (a refused
        extraction), or failed (``error``; ``status`` is then ``error``)."""
        raw = self.store_raw_intent
        fields: dict[str, Any]
        try:
            if outcome is not None:
                fields = _outcome_fields(outcome, raw)
            elif compiled is not None:
                fields = _compiled_fields(compiled, raw, served=False)
            else:
                fields = _received_intent_fields(turn.intent, raw)
            fields["status"] = "error" if error is not None else status
            record = DecisionRecord(
                request_id=request_id,
                **self._instants(time, now),
                client=turn.client,
                caller=pseudonym(turn.caller, raw),
                endpoint=endpoint,
                session_id=pseudonym(turn.session_id, raw),
                extraction=turn.extraction,
                request=request_params(turn.cohorts, turn.market, turn.user_id, 1, 10, raw),
                reason=turn.reason,
                reason_code=turn.reason_code,
                usage=turn.usage,
                answer=turn.answer,
                error=error,
                **fields,
            )
            data = record.model_dump(mode="json")
        except Exception as failure:  # the request still gets its one record: a minimal one
            log.exception("decision record %s could not be built; writing a minimal one", request_id)
            data = self.minimal(request_id, failure, status=status, error=error, client=turn.client,
                                endpoint=endpoint, time=time, now=now)
            outcome = None
        self._write(data, outcome.stages if outcome is not None else ())
        return data

    def minimal(
        self,
        request_id: str,
        failure: BaseException,
        *,
        status: str,
        error: ErrorOut | None = None,
        client: str | None = None,
        endpoint: str = "agent",
        time: datetime | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """The record of a request whose full record could not be built (not written here):
        its id, instants, endpoint, client and status, and the error ``record_incomplete``
        naming the failure (and the error the request answered with, if any)."""
        answered = f"; the request answered {error.status} {error.code}" if error is not None else ""
        record = DecisionRecord(
            request_id=str(request_id),
            **self._instants(time, now),
            client=client if isinstance(client, str) else None,
            endpoint=str(endpoint),
            status="error" if error is not None else str(status),
            error=ErrorOut(
                code="record_incomplete",
                message=f"the decision record could not be built ({type(failure).__name__}){answered}",
                status=error.status if error is not None else 200,
            ),
        )
        return record.model_dump(mode="json")

    def failure(
        self,
        request_id: str,
        error: ErrorOut,
        *,
        request: SearchRequest | None = None,
        client: str | None = None,
        extraction: Extraction | None = None,
        time: datetime | None = None,
        now: datetime | None = None,
        endpoint: str = "search",
    ) -> dict[str, Any]:
        data = self._failure_data(request_id, error, request=request, client=client,
                                  extraction=extraction, time=time, now=now, endpoint=endpoint)
        self._write(data, ())
        return data

    def _failure_data(
        self,
        request_id: str,
        error: ErrorOut,
        *,
        request: SearchRequest | None = None,
        client: str | None = None,
        extraction: Extraction | None = None,
        time: datetime | None = None,
        now: datetime | None = None,
        endpoint: str = "search",
    ) -> dict[str, Any]:
        raw = self.store_raw_intent
        record = DecisionRecord(
            request_id=request_id,
            **self._instants(time, now),
            client=client,
            endpoint=endpoint,
            extraction=extraction,
            request=(
                request_params(
                    request.cohorts, request.market, request.user_id, request.page, request.size, raw
                )
                if request
                else None
            ),
            status="error",
            error=error,
            **_received_intent_fields(request.intent if request else None, raw),
        )
        data: dict[str, Any] = record.model_dump(mode="json")
        return data

    def _instants(self, time: datetime | None, now: datetime | None) -> dict[str, str]:
        """A record's ``time`` (given, else the clock's) and ``now`` (given, else ``time``)."""
        time = time or self.clock()
        written = iso(time)
        return {"time": written, "now": written if now is None or now is time else iso(now)}

    def _write(self, data: dict[str, Any], stages: Any) -> None:
        self.decisions.append(data)
        self._observe(data, stages)

    def _observe(self, data: dict[str, Any], stages: Any) -> None:
        """A decision record written (or held): its metrics and its telemetry."""
        self.metrics.observe_decision(data)
        try:
            self.telemetry.emit(data, stages)
        except Exception:  # telemetry must never fail a request
            log.exception("telemetry export failed")

    def event(self, event: EventRecord) -> dict[str, Any]:
        data = event.model_dump(mode="json")
        sealed = self.events.append(data)
        self.metrics.events.labels(event.type).inc()
        return sealed or data

    def new_event_id(self) -> str:
        return uuid.uuid4().hex

    # --- reading ------------------------------------------------------------------

    def find(self, request_id: str) -> dict[str, Any] | None:
        found = None
        for record in self.decisions.select(request_id=request_id):
            found = record
        return found

    def decision_records(
        self, since: datetime | None = None, until: datetime | None = None
    ) -> list[dict[str, Any]]:
        return list(self.decisions.select(since=since, until=until))

    def event_records(
        self, since: datetime | None = None, until: datetime | None = None
    ) -> list[dict[str, Any]]:
        return list(self.events.select(since=since, until=until))

    def status(self) -> str:
        """``ok``, or what is wrong with the sinks (``/readyz`` fails while not ``ok``)."""
        problems = []
        for name, chained in (("decisions", self.decisions), ("events", self.events)):
            chained.retry()
            chained.checkpoint(due_only=True)
            if chained.checkpoint_error:
                problems.append(f"{name}: {chained.checkpoint_error}")
            held = chained.buffered_total()
            if held and chained.last_error is not None:
                problems.append(
                    f"{name} sink {chained.sink.describe()} failing,"
                    f" {held} record(s) buffered: {chained.last_error}"
                )
            elif chained.sync_error is not None:
                problems.append(
                    f"{name} sink {chained.sink.describe()} failed to sync records already written:"
                    f" {chained.sync_error}"
                )
            elif chained.full():
                problems.append(f"{name}: the audit queue is full ({held} records not yet written)")
        return "; ".join(problems) or "ok"

