"""The engine seen from the event loop: the one call of a search served from a cached plan.

A search whose plan is cached (ADR 0030) makes one engine request, its tiers' ``_msearch``.
Sent from the API's event loop, it costs no thread-pool hop and no blocking client: this
client writes the request on a kept-alive connection, parses the answer with httptools
(llhttp, the parser uvicorn serves with) and decodes it as the synchronous adapters do
(:mod:`control_plane.engine.codec`), so the loop serves other requests meanwhile.
Everything else (percolation, loading a policy set, the workflow) goes through the
synchronous adapters of :mod:`control_plane.engine`.

It keeps their contract: the request's deadline bounds the call (:func:`deadline.call_timeout`,
:class:`~control_plane.deadline.DeadlineExceeded` once it passed), an unreachable engine
raises :class:`EngineUnavailable`, one that does not answer in time :class:`EngineTimeout`,
an error status :class:`EngineError` with the engine's reason, and an ``_msearch`` item
that failed or lacks a shard raises as :meth:`Engine.msearch` does (fail closed). Each call
counts in :func:`counted_requests`. A connection that failed is dropped, never reused; a
kept-alive connection the engine closed while it sat idle is replaced once, for a request
nothing of which was answered (searches are reads: sending one again changes nothing).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Sequence
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import httptools

from control_plane import deadline
from control_plane.bounded import keep
from control_plane.engine import codec
from control_plane.engine.base import (
    EngineError,
    EngineTimeout,
    EngineUnavailable,
    error_reason,
    msearch_lines,
    msearch_responses,
    note_request,
)

FRAMED_KEPT = 256
"""framed ``_msearch`` requests a client keeps: a plan cache's worth of bodies per tier"""


class _Dropped(ConnectionError):
    """The connection ended before the answer did; ``answered``: some of it had come."""

    def __init__(self, message: str, *, answered: bool) -> None:
        super().__init__(message)
        self.answered = answered


def _expire(answer: asyncio.Future[Any]) -> None:
    """An answer's time is up (a timer's callback)."""
    if not answer.done():
        answer.set_exception(TimeoutError())


class _Connection(asyncio.Protocol):
    """One kept-alive HTTP/1.1 connection: one request at a time."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._answer: asyncio.Future[tuple[int, bytes, bool]] | None = None
        self._body: list[bytes] = []
        self._received = False
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(_Dropped(f"unreadable answer: {error}", answered=True))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(_Dropped(f"connection closed: {exc or 'by the engine'}", answered=self._received))

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        answer = self._answer
        if answer is not None and not answer.done():
            status = self._parser.get_status_code()
            answer.set_result((status, b"".join(self._body), self._parser.should_keep_alive()))

    def _fail(self, error: Exception) -> None:
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_exception(error)

    async def exchange(self, request: bytes, when: float) -> tuple[int, bytes, bool]:
        """Send ``request``; (status, body, whether the connection may be kept).
        ``TimeoutError`` if the answer has not come by the loop's time ``when`` (the
        connection is then spent: the caller closes it)."""
        if self.closed or self._transport is None:
            raise _Dropped("connection closed while idle", answered=False)
        self._body = []
        self._received = False
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[tuple[int, bytes, bool]] = loop.create_future()
        self._answer = answer
        timer = loop.call_at(when, _expire, answer)
        try:
            self._transport.write(request)
            return await answer
        finally:
            timer.cancel()

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()


class AsyncEngine:
    """``POST /_msearch`` (and any JSON request) to the engine at ``url`` from the event
    loop, over at most ``connections`` kept-alive connections per loop."""

    def __init__(self, url: str, timeout_s: float, *, connections: int = 10) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"engine url {url!r}: expected http(s)://host[:port]")
        self.url = url
        self.timeout_s = timeout_s
        self._host = parts.hostname
        self._port = parts.port or 9200  # as the client libraries read a URL without a port
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._prefix = parts.path.rstrip("/")
        authority = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        headers = [f"Host: {authority}", "Connection: keep-alive", "Accept: application/json"]
        if parts.username is not None:
            secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            headers.append("Authorization: Basic " + base64.b64encode(secret).decode("ascii"))
        self._headers = ("\r\n".join(headers) + "\r\n").encode("latin-1")
        self._connections = connections
        self._framed: dict[tuple[tuple[str, Any], ...], bytes] = {}
        """``_msearch`` requests by their searches, framed (the oldest dropped first)"""
        self._idle: list[_Connection] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        """at most ``connections`` requests in flight per loop, as the thread pool bounded
        them (a burst waits for a slot within its deadline, it does not open a socket each)"""

    async def msearch(self, searches: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
        """As :meth:`Engine.msearch`: each answer, or raise on the first item that failed or
        lacks a shard. The request of searches given as text (a cached plan's bodies) is
        framed once and kept (:data:`FRAMED_KEPT` of them): a repeated search sends the same
        bytes without building them again."""
        key = tuple(searches)
        kept = all(type(body) is str for _, body in key)
        framed = self._framed.get(key) if kept else None
        if framed is None:
            framed = self.framed("POST", "/_msearch", msearch_lines(searches).encode("utf-8"),
                                 "application/x-ndjson")
            if kept:
                keep(self._framed, key, framed, FRAMED_KEPT)
        result = await self._send("POST", "/_msearch", framed)
        return msearch_responses(searches, result["responses"])

    async def request(
        self, method: str, path: str, body: bytes = b"", content_type: str = "application/json"
    ) -> Any:
        """One ``GET`` or ``POST``; the decoded JSON answer (raise as the synchronous
        adapters do). Answers are read by their length or chunks: no ``HEAD``."""
        if method not in ("GET", "POST"):
            raise ValueError(f"AsyncEngine sends GET and POST only, not {method}")
        return await self._send(method, path, self.framed(method, path, body, content_type))

    async def _send(self, method: str, path: str, framed: bytes) -> Any:
        """:meth:`request` with the request framed already."""
        note_request()
        timeout = deadline.call_timeout(self.timeout_s)
        # the request's deadline, not the engine timeout, bounds this call
        cut = deadline.current() is not None and timeout < self.timeout_s
        slots = self._loop_slots()
        # one instant bounds the call: a timer on the answer, not a timeout scope around the
        # call (which costs the loop more than the exchange's own Python, ADR 0044); waiting
        # for a slot or a new connection, when there is such a wait, is bounded by it too
        when = asyncio.get_running_loop().time() + timeout
        try:
            if slots.locked():
                async with asyncio.timeout_at(when):
                    await slots.acquire()
            else:
                await slots.acquire()  # free: taken without a wait
            try:
                status, payload = await self._exchange(framed, when)
            finally:
                slots.release()
        except TimeoutError as error:
            if cut or deadline.expired():  # uvloop's timers may fire a little early
                raise deadline.DeadlineExceeded(
                    f"the request deadline passed waiting for the engine at {self.url}"
                ) from error
            raise EngineTimeout(f"the engine at {self.url} timed out after {timeout:g}s") from error
        except (OSError, ConnectionError) as error:
            raise EngineUnavailable(f"the engine at {self.url} is unreachable: {error}") from error
        ok = 200 <= status < 300
        try:
            info = codec.decode(payload) if payload else None
        except ValueError as error:
            if ok:
                raise EngineError(
                    f"{method} {path}: the engine's answer is not JSON", status=status
                ) from error
            info = payload.decode("utf-8", "replace")
        if not ok:
            raise EngineError(
                f"{method} {path} failed ({status}): {error_reason(info)}", status=status, info=info
            )
        return info

    def framed(self, method: str, path: str, body: bytes, content_type: str) -> bytes:
        """The whole HTTP/1.1 request this client sends for ``method path`` with ``body``."""
        head = (
            f"{method} {self._prefix}{path} HTTP/1.1\r\n".encode("latin-1")
            + self._headers
            + f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode("latin-1")
        )
        return head + body

    async def _exchange(self, request: bytes, when: float) -> tuple[int, bytes]:
        """On an idle connection (or a new one); once more on a new one if a kept-alive
        connection turns out closed before any of the answer came. ``TimeoutError`` at the
        loop's time ``when``."""
        reused = self._take()
        connection = reused or await self._open(when)
        try:
            status, payload, keep = await connection.exchange(request, when)
        except _Dropped as dropped:
            connection.close()
            if reused is None or dropped.answered:
                raise
            connection = await self._open(when)
            try:
                status, payload, keep = await connection.exchange(request, when)
            except BaseException:
                connection.close()
                raise
        except BaseException:  # a timeout or a cancellation mid-answer: the connection is spent
            connection.close()
            raise
        if keep and len(self._idle) < self._connections:
            self._idle.append(connection)
        else:
            connection.close()
        return status, payload

    def _loop_slots(self) -> asyncio.Semaphore:
        """The running loop's request slots; connections and slots belong to the loop that
        made them (another loop starts afresh: a closed loop's sockets are closed with it)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._slots is None:
            self._idle, self._loop, self._slots = [], loop, asyncio.Semaphore(self._connections)
        return self._slots

    def _take(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
        return None

    async def _open(self, when: float) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout_at(when):
            _, connection = await loop.create_connection(
                _Connection, self._host, self._port, ssl=self._ssl
            )
        return connection

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle = []
