"""``POST /v1/agent/query``: a whole user message in, a governed search and a grounded
answer out. Errors use the API's one JSON shape: 413 ``message_too_large``, 429
``rate_limited``, 503 ``llm_unavailable`` (and the engine's 503s, failing closed).

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
from control_plane.api.errors import ApiError
from control_plane.service import IDENTIFIER, SearchService
from control_plane.times import Clock

ANONYMOUS = "anonymous"


def client_of(request: Request) -> str:
    """The API key's principal when the request presented one, else ``X-Client-Id``."""
    principal = getattr(request.state, "principal", None)
    if principal is not None:
        return str(principal.name)
    client = request.headers.get("x-client-id")
    if client is None:
        return ANONYMOUS
    if not re.match(IDENTIFIER, client):
        raise ApiError(422, "invalid_request", "X-Client-Id must match " + IDENTIFIER)
    return client


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
        client = client_of(request)
        gateway = gateway_of(request, service, clock)
        rid = errors.request_id(request)
        request.state.audited = True  # from here on, the gateway writes the one decision record
        try:
            return await run_in_threadpool(gateway.query, body, client=client, request_id=rid)
        except GATEWAY_ERRORS as error:
            raise api_error(error) from error

    return router
