"""The search fast lane: a plainly well-formed ``POST /v1/search`` answered at the app's
outermost ASGI boundary, past the middleware stack (ADR 0036).

Between uvicorn and the search handler the app's stack is eleven layers (FastAPI's
telemetry check, Starlette's server-error, FastAPI's exception-telemetry and body-limit
middlewares, our ``RecordRefused``, ``BodyLimit`` and ``RequestDeadline``, the exception
middleware, FastAPI's exit-stack middleware, the router, the route), most of which wrap
``send`` too, so each of the answer's two messages crosses every wrapper. For a warm search
that was about a third of the event loop's Python.

:class:`LanedApp` is the :class:`~fastapi.FastAPI` app ``create_app`` builds. For a request
the lane is sure about it does what the stack does, in one coroutine:

- only in an app whose middlewares are the three it stands in for (``RecordRefused``,
  ``BodyLimit``, ``RequestDeadline``: another one, CORS or a tracer, means no lane), only
  ``POST /v1/search`` (no root path, FastAPI's native telemetry off, no dependency
  overrides, no app-wide body size, not in debug), ``Content-Type: application/json``
  exactly (any case) and a ``Content-Length`` of 1 to ``api.max_body_bytes`` bytes. Any
  other request goes to the full stack untouched;
- the body is read; a body that did not arrive whole (the client gone, more bytes than
  the limit) or that is not a JSON object the body model validates (the route's
  :func:`~control_plane.api.search_route.well_formed`, ADR 0033) goes to the full stack too,
  its messages replayed through a wrapped ``receive``, so every 400, 413 and 422 comes
  from the same code as before;
- a well-formed one: the request id (as ``BodyLimit`` makes it), the request deadline (as
  ``RequestDeadline``, counted from when the request arrived, its body's upload included),
  the route's guards and endpoint (as ``SearchRoute``); an exception
  answered by the handler the exception middleware would pick (the app's registered
  handlers, looked up as Starlette does), an exception none handles by the app's 500
  handler, then re-raised (as ``ServerErrorMiddleware`` does: uvicorn logs it); a refused
  answer (status 400 or more) that did not record its search recorded as ``RecordRefused``
  records it, before the answer is sent; the answer sent straight to uvicorn, which writes
  the access line as for any other request. An exception from anything else the lane does
  (the refusal record, a handler, sending) is answered as ``ServerErrorMiddleware`` answers
  it: the app's 500 handler when nothing was sent yet, then raised again.

The lane is on by default; ``api.fast_lane: false`` (``GOVSEARCH_API_FAST_LANE``) sends
every request through the stack. ``tests/api/test_fast_lane.py`` sends the same corpus of
requests through an app with and one without the lane and requires the same answers and
records.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from starlette._exception_handler import (  # what the exception middleware uses
    ExceptionHandlers,
    StatusHandlers,
    _lookup_exception_handler,
)
from starlette._utils import is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Message, Receive, Scope, Send

from control_plane import deadline
from control_plane.api import errors
from control_plane.api.limits import BodyLimit, RequestDeadline
from control_plane.api.search_route import Guard, SearchRoute, shortcut_shape, well_formed
from control_plane.api.serving import ARRIVED

PATH = "/v1/search"
Refused = Callable[[Request, int], Awaitable[None]]


class Lane:
    """What the lane needs of the app, found once, when the app first serves a search:
    the route, its shape, the child scope the router would give it, the exception handlers
    the stack would use. None (no lane) when the route is not the one the router would
    pick, or when the app has a middleware besides the three the lane stands in for."""

    def __init__(
        self,
        route: SearchRoute,
        shape: tuple[type[BaseModel], str, str, tuple[tuple[Guard, str], ...]],
        child_scope: dict[str, Any],
        handlers: ExceptionHandlers,
        status_handlers: StatusHandlers,
        error_handler: Callable[..., Any] | None,
    ) -> None:
        self.route = route
        self.model, self.body_name, self.request_name, self.guards = shape
        self.endpoint = route.endpoint
        self.child_scope = child_scope
        self.handlers = handlers
        self.status_handlers = status_handlers
        self.error_handler = error_handler

    @classmethod
    def of(cls, app: FastAPI) -> Lane | None:
        from control_plane.audit.router import RecordRefused  # lazy: the audit package imports the API

        # the lane does what these do; a middleware it does not know would be skipped
        known: tuple[Any, ...] = (RecordRefused, BodyLimit, RequestDeadline)
        if any(m.cls not in known for m in app.user_middleware):
            return None
        sample: Scope = {"type": "http", "path": PATH, "root_path": "", "method": "POST"}
        for route in app.router.routes:
            match, child = route.matches(sample)
            if match is Match.FULL:
                break
        else:
            return None
        if not isinstance(route, SearchRoute):
            return None
        shape = shortcut_shape(route)
        if shape is None:
            return None
        error_handler = None
        handlers: dict[Any, Any] = {}
        for key, value in app.exception_handlers.items():  # as FastAPI.build_middleware_stack
            if key in (500, Exception):
                error_handler = value
            else:
                handlers[key] = value
        middleware = ExceptionMiddleware(app.router, handlers=handlers, debug=app.debug)
        return cls(
            route, shape, {**child, "route": route}, middleware._exception_handlers,
            middleware._status_handlers, error_handler,
        )


class LanedApp(FastAPI):
    """The app, with the search fast lane in front of its middleware stack (see the module)."""

    lane_limit: int | None = None
    """``api.max_body_bytes`` when the lane is on; None: every request takes the stack"""
    lane_deadline_s: float = 0.0
    lane_refused: Refused | None = None
    """records a search the lane refused before its handler recorded it (``RecordRefused``'s)"""
    _lane: Lane | None = None
    _lane_built = False

    def enable_lane(self, *, limit: int, deadline_s: float, refused: Refused) -> None:
        self.lane_limit, self.lane_deadline_s, self.lane_refused = limit, deadline_s, refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.lane_limit
        if (
            limit is None
            or scope["type"] != "http"
            or scope["path"] != PATH
            or scope["method"] != "POST"
            or scope.get("root_path")
            or self.root_path
            or "fastapi.telemetry" in scope
            or MAX_BODY_SIZE_SCOPE_KEY in scope
        ):
            await super().__call__(scope, receive, send)
            return
        # the request deadline counts from here, as the stack's (or from before a protocol
        # read the body: ARRIVED)
        arrived = scope.get("state", {}).get(ARRIVED) or time.monotonic()
        lane = self._lane if self._lane_built else self._build_lane()
        content_type = length = None
        for name, value in scope["headers"]:
            if name == b"content-type":
                if content_type is None:
                    content_type = value
            elif name == b"content-length" and length is None:
                length = value
        if (
            lane is None
            or content_type is None
            or content_type.lower() != b"application/json"
            or length is None
            or not length.isdigit()
            or not 0 < int(length) <= limit
            or self.dependency_overrides
            or self.debug
            or self.max_body_size is not None
            or self._native_telemetry.enabled()
        ):
            await super().__call__(scope, receive, send)
            return
        # the body, kept to be replayed if the stack is to answer after all
        messages: list[Message] = []
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # the client gone: the stack answers it
                await super().__call__(scope, replaying(messages, receive), send)
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > limit:  # more than it declared: the stack's BodyLimit refuses it
                await super().__call__(scope, replaying(messages, receive), send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        try:
            body = well_formed(raw, "application/json", lane.model)
        except Exception:  # e.g. JSON nested too deep for the parser: whatever the stack answers
            body = None
        if body is None:  # not JSON, not an object, not a valid request: the stack's 400/422
            await super().__call__(scope, replaying(messages, receive), send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self._serve(lane, body, raw, arrived, scope, replaying(messages, receive), sending)
        except Exception as error:  # as ServerErrorMiddleware, which the stack has outermost
            if not started:
                await _server_error(lane, scope, receive, send, error)
            raise

    def _build_lane(self) -> Lane | None:
        if self.middleware_stack is None:  # as a first request through the stack would: the
            self.middleware_stack = self.build_middleware_stack()  # app is started, add_middleware refuses
        self._lane, self._lane_built = Lane.of(self), True
        return self._lane

    async def _serve(
        self, lane: Lane, body: BaseModel, raw: bytes, arrived: float, scope: Scope, receive: Receive,
        send: Send,
    ) -> None:
        request = self.routed(lane, scope, receive, send)
        request._body = raw  # read above: the endpoint's request has it, as FastAPI's would
        errors.request_id(request)  # as BodyLimit: every answer, refusals included, has one
        try:
            with deadline.requested(self.lane_deadline_s, since=arrived):  # as RequestDeadline
                for guard, name in lane.guards:
                    await guard(**{name: request})
                response: Response = await lane.endpoint(
                    **{lane.body_name: body, lane.request_name: request}
                )
        except Exception as error:
            response = await self.handled(lane, request, error, scope, receive, send)
        refused = self.lane_refused
        if response.status_code >= 400 and refused and not getattr(request.state, "audited", False):
            await refused(request, response.status_code)  # as RecordRefused, before the answer
        await response(scope, receive, send)

    def routed(self, lane: Lane, scope: Scope, receive: Receive, send: Send) -> Request:
        """The request as the router hands it to the search route: ``scope`` completed with
        what Starlette's app and router set on the way in."""
        scope["app"] = self
        scope.setdefault("router", self.router)
        scope.update(lane.child_scope)
        scope["path_params"] = {}  # the router's: a dict of each request's own
        return Request(scope, receive, send)

    async def handled(
        self, lane: Lane, request: Request, error: Exception, scope: Scope, receive: Receive, send: Send
    ) -> Response:
        """The answer the stack gives to ``error``: the handler the exception middleware
        would pick; else the app's 500 handler's, sent, and ``error`` raised again (as
        ``ServerErrorMiddleware`` does)."""
        handler = None
        if isinstance(error, HTTPException):
            handler = lane.status_handlers.get(error.status_code)
        if handler is None:
            handler = _lookup_exception_handler(lane.handlers, error)
        if handler is not None:
            response: Response
            if is_async_callable(handler):  # typed as Starlette types them (ignored there too)
                response = await handler(request, error)  # type: ignore[assignment, arg-type]
            else:
                response = await run_in_threadpool(handler, request, error)  # type: ignore[arg-type]
            error.__traceback__ = None  # as Starlette: a reused exception keeps no tracebacks
            return response
        await _server_error(lane, scope, receive, send, error)
        raise error


async def _server_error(lane: Lane, scope: Scope, receive: Receive, send: Send, error: Exception) -> None:
    """Send the answer ``ServerErrorMiddleware`` gives to ``error``: the app's 500 handler's
    (or a plain 500 when it has none)."""
    request = Request(scope)
    response: Response
    if lane.error_handler is None:
        response = Response("Internal Server Error", status_code=500, media_type="text/plain")
    elif is_async_callable(lane.error_handler):
        response = await lane.error_handler(request, error)
    else:
        response = await run_in_threadpool(lane.error_handler, request, error)
    await response(scope, receive, send)


def replaying(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that gives ``messages`` first, then what the client sends next."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
