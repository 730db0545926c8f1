"""Per-request limits, as plain ASGI middlewares (no ``BaseHTTPMiddleware``: no extra task
or body copy per request).

- :class:`BodyLimit`: a body over ``api.max_body_bytes`` answers 413 ``request_too_large``,
  whether it declares its length (refused before a byte is read) or is streamed with
  chunked encoding (counted as it is received, refused as soon as it passes the limit).
- :class:`BodyRefused`: a body that stopped coming, or came too slowly, answers 408
  ``request_timeout`` (a chunked body's trailers too large, 431). The HTTP protocol decides
  it (``api.body_timeout_s``, ``api.body_min_bytes_per_s``, :mod:`control_plane.api.serving`),
  answers the client itself and tells the app the client is gone, leaving the status and
  reason in the request's scope state: the app's answer (written to no one) and its
  decision record then say the same, under the request id the client got, not 400.
- :class:`RequestDeadline`: the serving routes run under a total deadline
  (``api.request_deadline_s``, :mod:`control_plane.deadline`); an engine call that would
  outlive it is cut short and the request answers 503 ``deadline_exceeded``.
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_plane import deadline
from control_plane.api import errors
from control_plane.api.serving import ARRIVED, BODY_REFUSED

SERVING_PATHS = frozenset({"/v1/search", "/v1/compile"})
"""the routes bounded by the request deadline (workflow writes, audit reads and the agent
gateway, which waits on an LLM with its own timeout, are not)"""


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once the streamed body passes the limit. FastAPI re-raises an
    ``HTTPException`` met while reading the body, so the app's handler answers it in the
    one error shape (and the refusal is recorded like any other)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request bodies are limited to {limit} bytes")


class BodyRefused(HTTPException):
    """Raised from ``receive`` when the client is gone because the protocol refused its
    body (module docstring); answered and recorded as :class:`BodyTooLarge` is."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message)


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        errors.request_id(request)  # every answer, refusals included, carries one
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._refuse(request, scope, receive, send, BodyTooLarge(self.limit))
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            elif refused := scope.get("state", {}).get(BODY_REFUSED):
                raise BodyRefused(*refused)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except (BodyTooLarge, BodyRefused) as refused:  # read outside FastAPI's body parsing:
            if started:  # answer here
                raise
            await self._refuse(request, scope, receive, send, refused)

    async def _refuse(
        self, request: Request, scope: Scope, receive: Receive, send: Send, refused: HTTPException
    ) -> None:
        status = refused.status_code
        response = errors.error_response(request, status, errors.HTTP_CODES[status], refused.detail)
        await response(scope, receive, send)


class RequestDeadline:
    def __init__(
        self, app: ASGIApp, seconds: float, paths: Collection[str] = SERVING_PATHS
    ) -> None:
        self.app = app
        self.seconds = seconds
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        # from when the request arrived: here, or before a protocol read its body (ARRIVED);
        # the context follows the request into threads
        with deadline.requested(self.seconds, since=scope.get("state", {}).get(ARRIVED)):
            await self.app(scope, receive, send)
