"""One JSON error shape for every 4xx and 5xx::

{"error": {"code": "engine_unavailable", "message": "...", "request_id": "...", "details": [...]}}
"""

from __future__ import annotations

import logging
import uuid
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
    413: "request_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
}


def request_id(request: Request) -> str:
    rid = getattr(request.state, "request_id", None)
    if rid is None:
        rid = request.state.request_id = uuid.uuid4().hex
    return str(rid)


def error_response(
    request: Request,
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    body = ErrorResponse(
        error=ErrorBody(
            code=code, message=message, request_id=request_id(request), details=details or []
        )
    )
    return JSONResponse(status_code=status, content=body.model_dump())


def install(app: FastAPI) -> None:
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
        return error_response(request, error.status_code, code, str(error.detail))

    @app.exception_handler(EngineError)
    async def _engine(request: Request, error: EngineError) -> JSONResponse:
        code = error.code
        log.warning("engine failure, failing closed: %s", error)
        return error_response(
            request,
            503,
            code,
            f"the search engine failed; no ungoverned results are served: {error}",
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error_response(
            request, 500, "internal_error", f"{type(error).__name__}: internal error"
        )
