"""The HTTP API: search (``POST /v1/search``, ``POST /v1/compile``), ``/healthz``,
``/readyz``; the agent gateway, workflow (``/v1/policies``) and audit routers are included."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool

from control_plane.api import document, errors, readiness
from control_plane.api.answer import explanation_of, search_answer
from control_plane.api.auth import require_internals, require_preview, search_guard
from control_plane.api.fast_lane import LanedApp, Refused
from control_plane.api.limits import BodyLimit, RequestDeadline
from control_plane.api.models import CompileResponse, Health, SearchBody, SearchResponse
from control_plane.api.policies import router as policies_router
from control_plane.api.search_route import SearchRoute
from control_plane.api.serving import size_thread_pool
from control_plane.engine.aio import AsyncEngine
from control_plane.lifecycle.keys import KeyStore
from control_plane.lifecycle.workflow import Workflow
from control_plane.service import SearchService
from control_plane.times import Clock


def served_catalog(service: SearchService, body: Any) -> None:
    """400 ``catalog_not_served`` when the request names a catalog this process does not serve."""
    if body.catalog is None:  # most requests: no settings read (a pydantic private attribute)
        return
    served = service.settings.selected_catalog
    if body.catalog != served:
        raise errors.ApiError(
            400, "catalog_not_served",
            f"this server serves catalog {served!r}, not {body.catalog!r}",
            [{"field": "catalog", "served": served}],
        )


def refusal_recorder(recorder: Any) -> Refused:
    """How the fast lane records a search it refused before the handler recorded it: what
    ``RecordRefused`` does for a refusal the stack answers (ADR 0036)."""
    from control_plane.audit.router import record_refusal  # lazy: import cycle

    async def refused(request: Request, status: int) -> None:
        await record_refusal(recorder, request, status, "search")

    return refused


def create_app(service: SearchService, *, clock: Clock) -> FastAPI:
    """The API over ``service``. ``clock`` is the one clock of the app: the instant a
    request is evaluated at (unless it previews another with ``now``), record times,
    workflow events, agent budgets."""
    app = LanedApp(
        title="govsearch",
        version="0.1.0",
        description="Deterministic policy control plane for e-commerce search.",
        generate_unique_id_function=document.operation_id,
        # FastAPI's native OpenTelemetry off: govsearch's traces are its own (``telemetry``,
        # spans per stage); a process-wide provider would otherwise trace every request
        # through the whole stack, off the fast lane, and is looked up on every request
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.openapi = lambda: document.build(app)  # type: ignore[method-assign]
    app.state.service = service
    app.state.clock = clock
    app.state.keys = KeyStore(service.engine, service.settings.auth.keys_index)
    app.state.workflow = Workflow(
        service.settings, service.engine, service.profile, clock=clock, on_move=service.alias_moved
    )
    errors.install(app)
    search_key = [Depends(search_guard(service.settings.auth.search_requires_key))]
    from control_plane.audit.router import install as install_audit  # lazy: import cycle
    from control_plane.audit.router import recorded_search

    inner = app.router.lifespan_context

    app.state.loop_engine = None
    """the service's engine seen from the event loop the app was started on (ADR 0030);
    None until the lifespan starts (an app never started serves every search in threads)"""

    @asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[Any]:
        size_thread_pool(service.settings.api.threads)  # the sync hop: engine calls, audit waits
        # a move whose process died before its history event is completed before serving
        # (ADR 0053); a reader of the history would do it too
        await run_in_threadpool(app.state.workflow.settle_moves)
        if service.settings.api.cached_on_loop:
            app.state.loop_engine = AsyncEngine(
                service.engine.url, service.engine.timeout_s,
                connections=service.settings.engine.connections,
            )
        try:
            async with inner(app_) as state:
                yield state
        finally:
            loop_engine, app.state.loop_engine = app.state.loop_engine, None
            if loop_engine is not None:
                loop_engine.close()  # its connections, on the loop they were opened on

    app.router.lifespan_context = lifespan
    app.add_middleware(RequestDeadline, seconds=service.settings.request_deadline_s())
    app.add_middleware(BodyLimit, limit=service.settings.api.max_body_bytes)

    async def search(body: SearchBody, request: Request) -> Response:
        served_catalog(service, body)
        if body.now is not None:
            await require_preview(request)
        if body.explain:
            await require_internals(request, "explain")
        # service.search at body.now or the clock, with its decision record
        outcome = await recorded_search(request, body, body.now)
        # the bytes search_response(...).model_dump_json() gives, written without pydantic
        # (ADR 0041); the schema stays SearchResponse
        answer = search_answer(errors.request_id(request), body, outcome, service.profile)
        return Response(answer, media_type="application/json")

    # a well-formed request goes straight to the handler, any other through FastAPI's (ADR 0033)
    app.router.add_api_route(
        "/v1/search", search, methods=["POST"], response_model=SearchResponse, tags=["search"],
        dependencies=search_key, route_class_override=SearchRoute,
    )

    @app.post(
        "/v1/compile", response_model=CompileResponse, tags=["search"], dependencies=search_key,
        summary="Compile",
    )
    async def compile_(body: SearchBody, request: Request) -> CompileResponse:
        """Match, compose and render a search request without running it: the plan, the
        strict tier's DSL and the explanation. Internal (margin weights, sponsored and hidden
        ids, every conflict decision): it needs an API key with the author, approver or
        auditor role, or admin (401 missing_api_key or invalid_api_key without a valid key,
        403 explain_forbidden with another role), unless the server runs with
        auth.open_internals (local development only). With auth.search_requires_key the key
        needs the search role as well (403 forbidden_role); a request with now needs the
        author, approver or auditor role (403 preview_forbidden), as on /v1/search."""
        served_catalog(service, body)
        if body.now is not None:
            await require_preview(request)
        await require_internals(request, "/v1/compile")
        now = body.now or clock()
        compiled = await run_in_threadpool(service.compile, body, now)
        dsl = service.render(compiled, body, "strict")
        return CompileResponse(
            request_id=errors.request_id(request),
            policy_set_version=compiled.policy_set_version,
            now=now,
            plan=json.loads(compiled.composition.plan.model_dump_json()),
            dsl=dsl,
            explanation=explanation_of(compiled, "strict", dsl),
        )

    @app.get("/healthz", response_model=Health, tags=["operations"])
    async def healthz() -> Health:
        return Health(status="ok")

    @app.get(
        "/readyz",
        response_model=Health,
        responses={503: {"model": errors.ErrorResponse}},
        tags=["operations"],
    )
    async def readyz(request: Request) -> Any:
        """200 only when this instance can serve governed answers now (see
        ``control_plane.api.readiness``); else 503 with the failing check's code."""
        report = await run_in_threadpool(readiness.check, service, app.state.recorder)
        if report.ready:
            return Health(status="ok", checks=report.checks)
        details = [{"check": name, "status": value} for name, value in report.checks.items()]
        return errors.error_response(request, 503, report.code or "not_ready", report.message, details)

    from agent_gateway.router import build_agent_router  # lazy: the agent gateway is an edge module

    app.include_router(build_agent_router(service, clock), dependencies=search_key)
    app.include_router(policies_router)
    from control_plane.console import install as install_console  # lazy: the console is an edge module

    install_console(app)
    install_audit(app, service, clock)  # audit routes, /metrics, recorder (last: outermost middleware)
    if service.settings.api.fast_lane:  # a well-formed search in front of the stack (ADR 0036)
        app.enable_lane(
            limit=service.settings.api.max_body_bytes,
            deadline_s=service.settings.request_deadline_s(),
            refused=refusal_recorder(app.state.recorder),
        )
    return app
