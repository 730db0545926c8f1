"""The search lane on the wire: a plain ``POST /v1/search`` served by the HTTP protocol
itself, past uvicorn's ASGI cycle and the app (ADR 0057).

The fast lane (ADR 0036, :mod:`control_plane.api.fast_lane`) answers a well-formed search at
the app's outermost ASGI boundary. Around it, each search still crossed uvicorn's ASGI
plumbing (the proxy-headers middleware, the ``receive`` and ``send`` messages, the answer's
head checked header by header and written apart from its body), and the lane itself built a
Starlette ``Request`` and ``Response``, a request id through the request's state, a guard
call and the endpoint's checks, about 120 Python calls a search that the pipeline behind it
does not need. Measured on the figure sheet, govsearch's pipeline without any HTTP stack
(``bench.floor --pipeline``) served 8-13% more searches at concurrency 4 and 16 than ``serve``.

:class:`WireLaneProtocol` is the protocol ``govsearch serve`` runs (uvicorn's httptools
protocol with the head's bounds, :class:`~control_plane.api.serving.BoundedHttpToolsProtocol`).
For a request it is sure about, it does the search itself, in one coroutine:

- only when the app is govsearch's, with its fast lane on and ready (:meth:`WireLane.of`:
  the lane the app itself would take, ``auth.search_requires_key`` off), wrapped in nothing
  but uvicorn's proxy-headers middleware; only ``POST /v1/search`` (no query string), with
  ``Content-Type: application/json`` exactly (any case), a ``Content-Length`` of 1 to
  ``api.max_body_bytes``, no ``Transfer-Encoding``, no ``Expect`` and no ``X-Forwarded-For`` or
  ``X-Forwarded-Proto`` header (what uvicorn's proxy-headers middleware reads: a trusted
  proxy's would change the request's client and scheme);
- the body read whole (as the app's ``receive`` gives it), then validated as the route
  validates it (:func:`~control_plane.api.search_route.well_formed`), and plain: no ``now``
  (a preview needs a role), no ``explain``, no ``catalog`` other than the one served, and
  the app with no dependency overrides. Any other request, or a body that does not arrive
  whole, goes to the app exactly as before, the messages read replayed and the time the
  request arrived handed on (``serving.ARRIVED``: its request deadline counts from then,
  the body's upload included, as when the app reads the body itself);
- a plain search: a request id (as the app makes one), the request deadline from when the
  request's task started (as the app's), the recorder's ``search_cached`` on the loop's
  engine client or ``search`` in the thread pool (what :func:`~control_plane.audit.router.recorded_search`
  does, through the same function), the answer's bytes (``search_answer``), sent in one
  write with the head uvicorn would write for them, and uvicorn's access line. A search that
  fails (the engine, the deadline, the audit backlog, a bug) is recorded by the recorder as
  before and answered by the app's exception handlers, through the same code as the fast
  lane's (:meth:`~control_plane.api.fast_lane.LanedApp.handled`).

Keep-alive, pipelined requests, flow control, the client going away and the access log are
uvicorn's: the lane completes the request's cycle as uvicorn's ``send`` does.
``api.fast_lane: false`` turns this lane off with the other. ``tests/api/test_wire_lane.py``
sends the same corpus to two servers, one running this protocol and one uvicorn's, and
requires the same bytes and the same records.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from typing import Any

from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
from uvicorn.protocols.utils import get_client_addr

from control_plane import deadline
from control_plane.api.answer import search_answer
from control_plane.api.fast_lane import PATH, LanedApp, replaying
from control_plane.api.search_route import well_formed
from control_plane.api.serving import ARRIVED, BoundedHttpToolsProtocol
from control_plane.audit.router import client_from_headers, recorded

_NOT_BUILT = object()
_OK = b"HTTP/1.1 200 OK\r\n"
_JSON = b"content-type: application/json\r\n"
_CLOSE = b"connection: close\r\n"
_FALLBACK_HEADERS = frozenset({
    b"transfer-encoding", b"expect", b"x-forwarded-for", b"x-forwarded-proto",
})
"""headers that send a search to the app: the body's framing, ``100-continue``, and what a
trusted proxy's middleware would read"""


class WireLane:
    """What the protocol needs to serve a plain search itself (see the module), found once
    per app: None when the app would not take its own fast lane, or needs a key."""

    def __init__(self, app: LanedApp, limit: int) -> None:
        lane = app._lane
        assert lane is not None
        self.app = app
        self.limit = limit
        self.model = lane.model
        self.lane = lane
        self.service = app.state.service
        self.served = self.service.settings.selected_catalog

    @staticmethod
    def of(asgi: Any) -> WireLane | None:
        """The lane for uvicorn's app ``asgi`` (cached on the govsearch app)."""
        app = asgi.app if type(asgi) is ProxyHeadersMiddleware else asgi
        if not isinstance(app, LanedApp):
            return None
        found: Any = app.__dict__.get("_wire_lane", _NOT_BUILT)
        if found is _NOT_BUILT:
            found = app.__dict__["_wire_lane"] = WireLane._built(app)
        lane: WireLane | None = found
        return lane

    @staticmethod
    def _built(app: LanedApp) -> WireLane | None:
        limit = app.lane_limit
        if limit is None or app.debug or app.max_body_size is not None or app.root_path:
            return None
        lane = app._lane if app._lane_built else app._build_lane()
        if lane is None or app.state.service.settings.auth.search_requires_key:
            return None
        return WireLane(app, limit)

    def takes(self, scope: Any) -> bool:
        """A request the lane serves if its body is plain (see the module)."""
        if scope["method"] != "POST" or scope["path"] != PATH or scope["query_string"]:
            return False
        if scope["root_path"] or scope["raw_path"] != b"/v1/search":
            return False
        content_type = length = None
        for name, value in scope["headers"]:
            if name == b"content-type":
                if content_type is not None:
                    return False
                content_type = value
            elif name == b"content-length":
                if length is not None:
                    return False
                length = value
            elif name in _FALLBACK_HEADERS:
                return False
        return (
            content_type is not None
            and content_type.lower() == b"application/json"
            and length is not None
            and length.isdigit()
            and 0 < int(length) <= self.limit
        )

    async def serve(self, cycle: RequestResponseCycle, asgi: Any) -> None:
        """The search of ``cycle``, or the app's answer to it (see the module)."""
        try:
            await self._serve(cycle, asgi)
        except BaseException as error:  # as uvicorn's ``run_asgi``
            cycle.logger.error("Exception in ASGI application\n", exc_info=error)
            if not cycle.response_started:
                await cycle.send_500_response()
            else:
                cycle.transport.close()
        finally:
            cycle.on_response = lambda: None

    async def _serve(self, cycle: RequestResponseCycle, asgi: Any) -> None:
        arrived = time.monotonic()
        read = cycle.receive
        messages: list[Any] = []
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await read()
            messages.append(message)
            if message["type"] != "http.request":
                await self._to_app(cycle, asgi, messages, arrived)
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            chunks.append(chunk)
            if received > self.limit:
                await self._to_app(cycle, asgi, messages, arrived)
                return
            if not message.get("more_body", False):
                break
        raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        app = self.app
        try:
            body: Any = well_formed(raw, "application/json", self.model)
        except Exception:  # whatever the app answers (JSON nested too deep...)
            body = None
        if (
            body is None
            or body.now is not None
            or body.explain
            or (body.catalog is not None and body.catalog != self.served)
            or app.dependency_overrides
            or app._native_telemetry.enabled()
        ):
            await self._to_app(cycle, asgi, messages, arrived)
            return
        scope = cycle.scope
        rid = scope["state"]["request_id"] = uuid.uuid4().hex  # as the app's ``request_id``
        client = client_from_headers(scope["headers"])
        try:
            with deadline.requested(app.lane_deadline_s, since=arrived):
                outcome = await recorded(app.state, body, rid, client, None)
            answer = search_answer(rid, body, outcome, self.service.profile)
        except Exception as error:  # recorded by the recorder: the app's handlers answer it
            await self._failed(cycle, asgi, messages, error)
            return
        if cycle.flow.write_paused and not cycle.disconnected:  # as uvicorn's ``send``
            await cycle.flow.drain()
        self._send(cycle, answer)

    async def _to_app(
        self, cycle: RequestResponseCycle, asgi: Any, messages: list[Any], arrived: float
    ) -> None:
        """The app answers the request, the messages already read given to it first, its
        deadline counted from ``arrived`` (the body's upload included, as when the app
        reads it)."""
        cycle.scope["state"][ARRIVED] = arrived
        await asgi(cycle.scope, _replayed(cycle, messages), cycle.send)

    async def _failed(
        self, cycle: RequestResponseCycle, asgi: Any, messages: list[Any], error: Exception
    ) -> None:
        """The app's answer to ``error`` (its handler's; a 500, then ``error`` raised again)."""
        receive = _replayed(cycle, messages)
        scope: Any = cycle.scope
        send: Any = cycle.send
        request = self.app.routed(self.lane, scope, receive, send)
        response = await self.app.handled(self.lane, request, error, scope, receive, send)
        await response(scope, receive, send)

    @staticmethod
    def _send(cycle: RequestResponseCycle, answer: bytes) -> None:
        """What uvicorn's ``send`` writes for a 200 of ``answer`` (a Starlette ``Response``'s
        headers after the server's), in one write; the cycle completed as it completes it."""
        if cycle.disconnected:
            return
        cycle.response_started = True
        cycle.waiting_for_100_continue = False
        scope = cycle.scope
        if cycle.access_log:
            cycle.access_logger.info(
                '%s - "%s %s HTTP/%s" %d',
                get_client_addr(scope), "POST", PATH, scope["http_version"], 200,
            )
        head = [_OK]
        for name, value in cycle.default_headers:
            head += (name, b": ", value, b"\r\n")
        head += (b"content-length: ", str(len(answer)).encode("ascii"), b"\r\n", _JSON)
        if not cycle.keep_alive:
            head.append(_CLOSE)
        head += (b"\r\n", answer)
        cycle.transport.write(b"".join(head))
        cycle.response_complete = True
        cycle.message_event.set()
        if not cycle.keep_alive:
            cycle.transport.close()
        cycle.on_response()


class WireLaneProtocol(BoundedHttpToolsProtocol):
    """The protocol ``govsearch serve`` runs: a plain search served by :class:`WireLane`,
    every other request as uvicorn serves it."""

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        lane = WireLane.of(app)
        if lane is None or not lane.takes(cycle.scope) or cycle.waiting_for_100_continue:
            super()._start_asgi_task(cycle, app)
            return
        context = contextvars.Context() if self.config.reset_contextvars else None
        task = self.loop.create_task(lane.serve(cycle, app), context=context)
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)


def _replayed(cycle: RequestResponseCycle, messages: list[Any]) -> Any:
    """The cycle's ``receive`` replaced by one that gives ``messages`` (read already) first."""
    original: Any = cycle.receive
    receive: Any = replaying(messages, original)
    cycle.receive = receive  # type: ignore[method-assign]
    return receive
