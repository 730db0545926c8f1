"""One JSON error shape for every 4xx and 5xx::

{"error": {"code": "engine_unavailable", "message": "...", "request_id": "...", "details": [...]}}
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from control_plane.engine import EngineError

log = logging.getLogger("govsearch.api")


class ErrorBody(BaseModel):
    code: str
    message: str
    request_id: str
    details: list[dict[str, Any]] = []


class ErrorResponse(BaseModel):
    error: ErrorBody


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, details: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details or []


HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "request_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    431: "request_header_too_large",
}


def request_id(request: Request) -> str:
    """The request's id, made on first use: ``request.state.request_id``, read from the
    scope's state dict that ``request.state`` wraps (Starlette's ``State`` keeps its
    attributes in ``scope["state"]``), without building a ``State`` on every call."""
    state = request.scope.setdefault("state", {})
    rid = state.get("request_id")
    if rid is None:
        rid = state["request_id"] = uuid.uuid4().hex
    return str(rid)


def error_response(
    request: Request,
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorResponse(
        error=ErrorBody(
            code=code, message=message, request_id=request_id(request), details=details or []
        )
    )
    return JSONResponse(
        status_code=status, content=body.model_dump(), headers=dict(headers) if headers else None
    )


#: What a 503 says: a fixed sentence per code. The engine's own text (index names, hosts,
#: its error bodies) goes to the log and the decision record, never to the caller.
ENGINE_MESSAGES = {
    "engine_unavailable": "the search engine cannot be reached; no ungoverned results are served",
    "engine_timeout": "the search engine did not answer in time; no ungoverned results are served",
    "engine_error": "the search engine failed; no ungoverned results are served",
    "engine_partial_results": "the search engine answered from only some of its shards;"
    " no ungoverned results are served",
    "deadline_exceeded": "the request's deadline passed before the search engine answered;"
    " no ungoverned results are served",
    "policy_set_ambiguous": "the live policies alias points to more than one index;"
    " nothing is served until it points to exactly one",
    "catalog_ambiguous": "the catalog alias points to more than one index;"
    " nothing is served until it points to exactly one",
}


def engine_message(error: EngineError) -> str:
    """The fixed sentence for ``error``'s code; "no policy set is published" (our own words,
    naming only the environment) as is."""
    from control_plane.service import NoLivePolicySet  # lazy: the service imports the engine

    if isinstance(error, NoLivePolicySet):
        return f"{error}; nothing is served"
    return ENGINE_MESSAGES.get(error.code, ENGINE_MESSAGES["engine_error"])


AUDIT_BACKLOG_MESSAGE = (
    "the decision log is behind: this request's record cannot be queued; nothing is served"
    " without one (retry later)"
)
AUDIT_UNAVAILABLE_MESSAGE = (
    "the decision log's writer cannot start (the process is out of threads): this request's"
    " record cannot be taken; nothing is served without one (retry later)"
)


def install(app: FastAPI) -> None:
    from control_plane.audit.writer import AuditBacklog, AuditUnavailable  # lazy: audit imports the API

    @app.exception_handler(AuditBacklog)
    async def _backlog(request: Request, error: AuditBacklog) -> JSONResponse:
        log.warning("audit record not taken, refusing (request %s): %s", request_id(request), error)
        message = AUDIT_UNAVAILABLE_MESSAGE if isinstance(error, AuditUnavailable) else AUDIT_BACKLOG_MESSAGE
        return error_response(request, 503, error.code, message)

    @app.exception_handler(ApiError)
    async def _api(request: Request, error: ApiError) -> JSONResponse:
        return error_response(request, error.status, error.code, error.message, error.details)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        details = [
            {"location": ".".join(str(p) for p in e.get("loc", ())), "message": e.get("msg", "")}
            for e in error.errors()
        ]
        return error_response(
            request, 422, "invalid_request", "the request does not match the schema", details
        )

    @app.exception_handler(HTTPException)
    async def _http(request: Request, error: HTTPException) -> JSONResponse:
        code = HTTP_CODES.get(error.status_code, "http_error")
        # keeps the router's headers: a 405 names the methods the path allows (Allow)
        return error_response(
            request, error.status_code, code, str(error.detail), headers=error.headers
        )

    @app.exception_handler(EngineError)
    async def _engine(request: Request, error: EngineError) -> JSONResponse:
        log.warning(
            "engine failure, failing closed (request %s, %s): %s",
            request_id(request), error.code, error,
        )
        return error_response(request, 503, error.code, engine_message(error))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error_response(
            request, 500, "internal_error", f"{type(error).__name__}: internal error"
        )
