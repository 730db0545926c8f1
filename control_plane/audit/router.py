"""The audit API, outcome events and ``/metrics``; and the hooks ``create_app`` uses to
record every ``/v1/search``.

``/v1/audit/*`` needs an API key with the ``auditor`` role (or ``admin``); ``/v1/events``
is a search-side call: open, or the ``search`` role when ``auth.search_requires_key`` is on.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_plane.api import errors
from control_plane.api.auth import require, search_guard
from control_plane.audit import impact as impact_stage
from control_plane.audit import replay as replay_stage
from control_plane.audit.metrics import CONTENT_TYPE
from control_plane.audit.record import ErrorOut, EventRecord
from control_plane.audit.recorder import Recorder
from control_plane.audit.writer import AuditBacklog
from control_plane.service import IDENTIFIER, Outcome, SearchRequest, SearchService
from control_plane.times import Clock, iso, parse_time

CLIENT_HEADER = "x-govsearch-client"
CLIENT_HEADER_BYTES = CLIENT_HEADER.encode("ascii")
log = logging.getLogger("govsearch.audit")

RECORDED_PATHS = {"/v1/search": "search", "/v1/agent/query": "agent"}
"""path -> the record's ``endpoint``; the agent gateway records its own requests once its handler runs"""


def recorder_of(request: Request) -> Recorder:
    recorder: Recorder = request.app.state.recorder
    return recorder


def client_of(request: Request) -> str | None:
    """Who asked: the API key's principal when the request presented one (search keys are
    required with ``auth.search_requires_key``), else :func:`client_from_headers`."""
    principal = getattr(request.state, "principal", None)
    if principal is not None:
        return str(principal.name)
    return client_from_headers(request.scope["headers"])


def client_from_headers(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The ``X-Client-Id`` (or ``X-Govsearch-Client``) header of a request without a key,
    when it is a plain identifier: the first of each, read as ``request.headers`` reads it."""
    value = other = None
    for name, raw in headers:
        if name == b"x-client-id":
            if value is None:
                value = raw
        elif name == CLIENT_HEADER_BYTES and other is None:
            other = raw
    found = (value or other or b"").decode("latin-1")
    return found if found and re.match(IDENTIFIER, found) else None


async def recorded_search(request: Request, body: SearchRequest, now: datetime | None = None) -> Outcome:
    """:func:`recorded` for the request's app, its request id and client."""
    request.state.audited = True
    return await recorded(request.app.state, body, errors.request_id(request), client_of(request), now)


async def recorded(
    state: Any, body: SearchRequest, request_id: str, client: str | None, now: datetime | None
) -> Outcome:
    """``service.search`` at ``now`` (default: the recorder's clock), recorded (success or
    failure): on the event loop when a cached plan serves it with one engine call (the
    app's ``loop_engine``, ADR 0030), else in the thread pool. ``state``: the app's."""
    recorder: Recorder = state.recorder
    service: SearchService = state.service
    loop_engine = getattr(state, "loop_engine", None)
    if loop_engine is not None:
        outcome = await recorder.search_cached(service, body, request_id, client, engine=loop_engine, now=now)
        if outcome is not None:
            return outcome
    return await run_in_threadpool(lambda: recorder.search(service, body, request_id, client, now=now))


def install(app: FastAPI, service: SearchService, clock: Clock) -> Recorder:
    """Create (or reuse ``service.recorder``) the recorder, add the routes and the middleware
    that records requests refused before the handler ran (413, 422)."""
    recorder = service.recorder or Recorder.from_settings(service.settings, service.engine, clock=clock)
    recorder.open()  # the audit key: a missing one stops the app here, not at the first record
    service.recorder = recorder
    recorder.watch(service)
    app.state.recorder = recorder
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[Any]:
        async with inner(app_) as state:
            yield state
        await run_in_threadpool(recorder.close)  # shutdown: the writer's last checkpoints

    app.router.lifespan_context = lifespan
    app.include_router(router)
    app.include_router(audit_router, dependencies=[Depends(require("auditor"))])
    app.include_router(
        events_router, dependencies=[Depends(search_guard(service.settings.auth.search_requires_key))]
    )

    app.add_middleware(RecordRefused, recorder=recorder)
    return recorder


class RecordRefused:
    """Records a ``/v1/search`` or ``/v1/agent/query`` refused before its handler ran (413,
    422, 401...) once its status is known, before the answer is sent (the record is written
    first, as for every other request). A plain ASGI middleware: nothing is copied, no task
    is spawned, other paths pass straight through."""

    def __init__(self, app: ASGIApp, recorder: Recorder) -> None:
        self.app = app
        self.recorder = recorder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = RECORDED_PATHS.get(scope["path"]) if scope["type"] == "http" else None
        if endpoint is None:
            await self.app(scope, receive, send)
            return

        async def recorded(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400:
                request = Request(scope)
                if not getattr(request.state, "audited", False):
                    await record_refusal(self.recorder, request, int(message["status"]), endpoint)
            await send(message)

        await self.app(scope, receive, recorded)


async def record_refusal(recorder: Recorder, request: Request, status: int, endpoint: str) -> None:
    """The failure record of a request refused (``status``) before its handler recorded it:
    what ``RecordRefused`` writes for the stack, and the search fast lane for itself."""
    error = ErrorOut(
        code=errors.HTTP_CODES.get(status, "http_error"),
        message="the request was refused before it was compiled",
        status=status,
    )
    try:
        await run_in_threadpool(
            recorder.failure, errors.request_id(request), error, client=client_of(request),
            endpoint=endpoint,
        )
    except AuditBacklog:  # the refusal is answered as it is: nothing was served
        log.warning("audit queue full: refusal of request %s not recorded", errors.request_id(request))


router = APIRouter()
audit_router = APIRouter()
events_router = APIRouter()


def _time(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as error:
        raise errors.ApiError(400, "invalid_time", f"{name}: not an ISO 8601 time: {value!r}") from error


def _record(recorder: Recorder, request_id: str) -> dict[str, Any]:
    record = recorder.find(request_id)
    if record is None:
        raise errors.ApiError(
            404, "decision_not_found", f"no decision is recorded for request {request_id!r}"
        )
    return record


@router.get("/metrics", tags=["operations"], response_class=Response)
async def metrics(request: Request) -> Response:
    return Response(recorder_of(request).metrics.render(), media_type=CONTENT_TYPE)


@audit_router.get("/v1/audit/decisions/{request_id}", tags=["audit"])
async def decision(request_id: str, request: Request) -> dict[str, Any]:
    return await run_in_threadpool(_record, recorder_of(request), request_id)


@audit_router.get("/v1/audit/decisions", tags=["audit"])
async def decisions(
    request: Request,
    policy_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> dict[str, Any]:
    """Decisions in ``[since, until)``, those ``policy_id`` fired on when given, and how
    often each policy fired (was applied) on them."""
    start, end = _time(since, "since"), _time(until, "until")
    records = await run_in_threadpool(recorder_of(request).decision_records, start, end)
    if policy_id is not None:
        records = [r for r in records if policy_id in r.get("applied_policies", [])]
    counts = Counter(p for r in records for p in r.get("applied_policies", []))
    return {"total": len(records), "counts": dict(sorted(counts.items())), "decisions": records[-limit:]}


class ReplayBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(min_length=1, max_length=128)
    policy_set_version: str | None = Field(default=None, max_length=64)


@audit_router.post("/v1/audit/replay", tags=["audit"])
async def replay(body: ReplayBody, request: Request) -> dict[str, Any]:
    recorder = recorder_of(request)
    record = await run_in_threadpool(_record, recorder, body.request_id)
    try:
        result: dict[str, Any] = await run_in_threadpool(
            replay_stage.replay, request.app.state.service, record, body.policy_set_version
        )
    except replay_stage.ReplayRefused as refused:
        status = 404 if refused.code == "unknown_version" else 409
        raise errors.ApiError(status, refused.code, str(refused)) from refused
    return result


class EventBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(min_length=1, max_length=128)
    type: Literal["click", "add_to_cart", "purchase", "feedback"]
    product_id: str | None = Field(default=None, max_length=128)
    rating: int | None = Field(default=None, ge=1, le=5)


@events_router.post("/v1/events", tags=["audit"], status_code=201)
async def event(body: EventBody, request: Request) -> dict[str, Any]:
    recorder = recorder_of(request)
    await run_in_threadpool(_record, recorder, body.request_id)
    record = EventRecord(
        event_id=recorder.new_event_id(),
        time=iso(recorder.clock()),
        **body.model_dump(),
    )
    return await run_in_threadpool(recorder.event, record)


@audit_router.get("/v1/audit/policies/{policy_id}/impact", tags=["audit"])
async def impact(
    policy_id: str, request: Request, since: str | None = None, until: str | None = None
) -> dict[str, Any]:
    recorder = recorder_of(request)
    start, end = _time(since, "since"), _time(until, "until")
    records = await run_in_threadpool(recorder.decision_records, start, end)
    # events are counted for the selected requests whenever they came
    events = await run_in_threadpool(recorder.event_records)
    return impact_stage.impact(policy_id, records, events)
