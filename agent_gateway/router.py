"""``POST /v1/agent/query``: a whole user message in, a governed search and a grounded
answer out. Errors use the API's one JSON shape: 413 ``message_too_large``, 429
``rate_limited``, 503 ``llm_unavailable`` (and the engine's 503s, failing closed).

Who the caller is decides its budgets (:func:`caller_of`): the API key's principal when a
key is presented (a presented key must be valid: 401 otherwise, even where the search
endpoints need none), else the client address (behind a proxy, run uvicorn with
``--proxy-headers`` and ``--forwarded-allow-ips`` so the address is the shopper's).
``X-Client-Id`` is only a label (:func:`client_of`).

Once the handler runs, the gateway writes the request's one decision record; a request
refused before (422 body, 413 body size, 422 ``X-Client-Id``) is recorded by the audit
middleware (``control_plane.audit.router``)."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from agent_gateway.errors import GATEWAY_ERRORS, api_error
from agent_gateway.gateway import AgentGateway
from agent_gateway.models import AgentQuery, AgentResponse
from agent_gateway.settings import gateway_settings
from control_plane.api import errors
from control_plane.api.auth import authenticate, presented_key
from control_plane.api.errors import ApiError
from control_plane.service import IDENTIFIER, SearchService
from control_plane.times import Clock

ANONYMOUS = "anonymous"


def client_of(request: Request) -> str:
    """The label the request gives itself: ``X-Client-Id``, else the API key's principal,
    else ``anonymous``. A label, never a budget key."""
    client = request.headers.get("x-client-id")
    if client is not None:
        if not re.match(IDENTIFIER, client):
            raise ApiError(422, "invalid_request", "X-Client-Id must match " + IDENTIFIER)
        return client
    principal = getattr(request.state, "principal", None)
    return str(principal.name) if principal is not None else ANONYMOUS


async def caller_of(request: Request) -> str:
    """Who is charged: ``key:<principal>`` when an API key is presented (authenticated here
    if the route's guard did not), else ``address:<client host>``."""
    principal = getattr(request.state, "principal", None)
    if principal is None and presented_key(request) is not None:
        principal = await authenticate(request)
    if principal is not None:
        return f"key:{principal.name}"
    host = request.client.host if request.client is not None else "unknown"
    return f"address:{host}"


def gateway_of(request: Request, service: SearchService, clock: Clock) -> AgentGateway:
    """The app's gateway (``app.state.agent_gateway``), built on first use from the settings."""
    gateway = getattr(request.app.state, "agent_gateway", None)
    if gateway is None:
        gateway = request.app.state.agent_gateway = AgentGateway(service, gateway_settings(), clock=clock)
    return gateway


def build_agent_router(service: SearchService, clock: Clock) -> APIRouter:
    router = APIRouter(tags=["agent"])

    @router.post("/v1/agent/query", response_model=AgentResponse,
                 responses={code: {"model": errors.ErrorResponse} for code in (413, 422, 429, 503)})
    async def agent_query(body: AgentQuery, request: Request) -> AgentResponse:
        from control_plane.api.app import served_catalog  # lazy: the app includes this router

        served_catalog(service, body)
        caller = await caller_of(request)
        client = client_of(request)
        gateway = gateway_of(request, service, clock)
        rid = errors.request_id(request)
        request.state.audited = True  # from here on, the gateway writes the one decision record
        try:
            return await run_in_threadpool(gateway.query, body, client=client, caller=caller, request_id=rid)
        except GATEWAY_ERRORS as error:
            raise api_error(error) from error

    return router
