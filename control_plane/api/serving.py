"""How ``govsearch serve`` runs uvicorn: its logging (a plain, cheap access line), the
API thread pool's size, and the listening socket of ``--workers N``.

The access line keeps uvicorn's text (``INFO:     127.0.0.1:5555 - "GET /healthz HTTP/1.1"
200``) through a plain :class:`logging.Formatter`: uvicorn's own access formatter colours
and looks up the status phrase on every request, about twice the cost on this machine
(bench/RESULTS.md). ``api.access_log: false`` writes none.

With ``--workers N`` (N > 1) uvicorn's supervisor binds the socket the workers share with
``socket.socket(family)``, leaving its protocol number at 0; asyncio turns ``TCP_NODELAY``
on for an accepted connection only when the socket says ``IPPROTO_TCP``, so every response
after a connection's first waited for the client's delayed ACK (Nagle), about 40 ms on
Linux (uvicorn issue 3149, open). :func:`run_workers` binds the socket itself, as a TCP
socket, and hands it to the same supervisor.

uvicorn's httptools protocol puts no bound on a request's head (its line and headers):
llhttp hands a header's value over once it is whole, and httptools keeps the pieces until
then, so one connection sending a header that never ends grew the worker by 58 MB per 64 MB
sent, until memory ran out. :class:`BoundedHttpToolsProtocol` (what ``serve`` runs) answers
431 ``request_header_too_large`` in the one JSON error shape and closes the connection once
a head passes :data:`MAX_HEAD_BYTES`, as a server behind no proxy must.

Nor does it bound a request's time: its only timer is the keep-alive one, between requests,
which any byte cancels, so a head sent a byte at a time (slowloris) held its connection for
as long as the client liked, and a body announced and never sent left the app's
``receive()`` waiting for ever (the request deadline, :mod:`control_plane.deadline`, bounds
engine calls, not the body's upload). The protocol answers 408 ``request_timeout`` in the
one error shape and closes the connection when a head is not whole :attr:`head_timeout_s`
after its first byte, or when a body's next bytes do not come within
:attr:`body_timeout_s` of the last ones (nginx's ``client_header_timeout`` and
``client_body_timeout``), or when a body is not whole :attr:`body_timeout_s` after it
began plus a second per :attr:`body_min_bytes_per_s` bytes received (Apache's
``MinRate``; ``api.head_timeout_s``, ``api.body_timeout_s``, ``api.body_min_bytes_per_s``,
set for the process by :func:`bound_client_times`). ADR 0055.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import math
import socket
import uuid
from typing import Any

import anyio.to_thread
from uvicorn.config import LOGGING_CONFIG, Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.supervisors import Multiprocess

from control_plane.config import ApiSettings

ACCESS_FORMAT = "%(levelname)s:     %(message)s"

MAX_HEAD_BYTES = 65_536
"""bytes a request's line and headers may take (nginx takes 32 KB, Node.js 16 KB by default)"""


BODY_REFUSED = "govsearch.body_refused"
"""the key of the request's scope state under which the protocol leaves its refusal's
status and message when it refused the request inside its body (the body stopped coming or
came too slowly: 408; a chunked body's trailers too large: 431): the app, told the client
is gone, answers (and records) that refusal instead (``limits.BodyLimit``)"""

_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\n"
_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\n"

ARRIVED = "govsearch.arrived"
"""the key of the request's scope state under which a protocol that read the request's body
before handing it to the app (the search lane on the wire, ADR 0057) leaves when the
request arrived (a ``time.monotonic()`` reading): the request deadline counts from then, as
it does when the app reads the body itself (``limits.RequestDeadline``, the fast lane)"""

Refusal = tuple[bytes, str, str]
"""a status line, an error code and its message"""


def _refusal_body(code: str, message: str, request_id: str | None) -> bytes:
    """A refusal's body, in the one error shape (the app's request id, or one of its own,
    for the log)."""
    return json.dumps({"error": {
        "code": code, "message": message, "request_id": request_id or uuid.uuid4().hex, "details": [],
    }}).encode("ascii")


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bound on the size of a request head still coming
    in, and on the time a head or a body takes (module docstring).

    **Size.** What is counted is each chunk the head is still incomplete after, from the
    chunk after the one its request began in: so a head is refused once it has taken more
    than :data:`MAX_HEAD_BYTES` beyond that first chunk (a read, at most 256 KB), whatever
    the headers hold, and one that ends inside a chunk is never counted (pipelined
    requests, however many a chunk holds, are read as before). The parser keeps an
    incomplete head's bytes, so that is what a connection can make the worker hold.

    **Time.** A head (what the size bound counts as one: a request's line and headers, a
    chunked body's size line and its last chunk's trailers) has :attr:`head_timeout_s` from
    the read its first byte came in; a body still coming has :attr:`body_timeout_s` between
    two reads, and must be whole :attr:`body_timeout_s` after it began plus a second per
    :attr:`body_min_bytes_per_s` bytes received since (credited up to
    :attr:`max_body_bytes`). Past any, 408 ``request_timeout``, then the connection is
    closed; a chunked body's size line or trailers past the head's bounds refuse the body's
    request (408, or 431 for the size) as a body that stopped does. A head's
    408 waits for the answers of the requests before it, as a 431 does; a body's request is
    the one being answered, so the app's reads of it end (it sees the client gone, and
    what it sends is dropped) and the 408 is its answer. A body whose request was already
    answered (the app did not read it) closes the connection without one. Time when this
    side does not read does not count: a clock that runs out while reading is paused (a
    pipelined request waits for the one before it, the app has not read the body it has,
    or waits to send ``100 Continue``), or while the body's request waits in the pipeline,
    starts again; the bound is then between one and two timeouts after reading resumes.

    A connection on which no request begins is closed, without an answer, after
    :attr:`head_timeout_s` (uvicorn's keep-alive timer is armed only after a first answer,
    so such a connection was held for ever too).

    **Cost.** One timer per connection (``loop.call_at``), armed when it is made, never
    moved or cancelled as bytes come (only when a bound due earlier than the one it is
    armed for begins, which takes the head and body timeouts configured apart): when it
    fires it looks at what is incomplete then and answers 408, or arms itself again for
    the due time of what is still coming, or lapses when nothing is (a later head or body
    left incomplete arms it again, or moves it, above). The end of each
    read checks two flags; only a head or body left incomplete reads the clock (and arms
    the timer if none is pending). So a request whose head and body come in one read, as
    nearly every request does, costs no clock read and no timer work, and a connection
    dripping its head is woken once per timeout, not once per byte.
    """

    head_timeout_s = 20.0
    """seconds a head may take from its first byte (``api.head_timeout_s``)"""
    body_timeout_s = 20.0
    """seconds a body still coming may go without a byte (``api.body_timeout_s``)"""
    body_min_bytes_per_s = 500.0
    """a body must be whole :attr:`body_timeout_s` after it began plus a second per this
    many bytes received (``api.body_min_bytes_per_s``; 0: no such bound)"""
    max_body_bytes = 16_384
    """the bytes a body is credited for at most (``api.max_body_bytes``)"""

    _heading = False
    _head_bytes = 0
    _begun = 0
    _bodying = False
    """the current request's head is whole and its body is not (yet)"""
    _sizing = False
    """no byte of that body was parsed yet: a chunked body's first size line is still coming
    (:meth:`_first_size_line`)"""
    _head_since = 0.0
    """``loop.time()`` of the read the incomplete head began in"""
    _body_read = 0.0
    """``loop.time()`` of the last read of an incomplete body"""
    _body_of: object = None
    """the cycle whose body's clock runs (:meth:`_body_came`)"""
    _body_since = 0.0
    """``loop.time()`` of the first read after which that body was incomplete"""
    _body_bytes = 0
    """bytes read of that body since"""
    _stall_timer: asyncio.TimerHandle | None = None
    _request_id: str | None = None
    """the id of a request whose body timed out (the app's, shared with its record)"""
    _refused: Refusal | None = None
    """a request was refused: nothing more is read, its answer goes once the answers before
    it have"""

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        begun = self._begun
        super().data_received(data)
        if self._heading:  # (a head, or a chunk's size line or the trailers)
            self._head_bytes = self._head_bytes + len(data) if self._begun == begun else 0
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse_head()
                return
            if self._begun != begun:
                self._head_since = self.loop.time()
            if self._bodying:  # a chunk's size line or the trailers: the body's clock runs too
                self._body_came(len(data), self._head_since)
                self._arm(min(self._head_since + self.head_timeout_s, self._body_due()))
            else:
                self._arm(self._head_since + self.head_timeout_s)
        elif self._bodying:
            self._body_read = now = self.loop.time()
            if self._sizing and self._first_size_line(now):
                self._body_came(len(data), now)
                self._arm(min(now + self.head_timeout_s, self._body_due()))
                return
            self._body_came(len(data), now)
            self._arm(now + self.body_timeout_s)

    def on_message_begin(self) -> None:
        self._heading, self._head_bytes, self._begun = True, 0, self._begun + 1
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._heading = False
        self._bodying = self._sizing = True
        super().on_headers_complete()

    # A chunk's size line may carry extensions, which llhttp reads without a bound (and no
    # body limit counts: they are not the body's bytes); a chunked body's last chunk (``0``)
    # is followed by trailer headers, which llhttp parses with the head's callbacks
    # (httptools keeps an incomplete one, uvicorn appends each to the request's headers).
    # So a chunk's size line (from the end of the head or of the chunk before: llhttp calls
    # ``on_chunk_header`` only once the line is whole) to its data, and from the last
    # chunk's size line to the message's end, is counted as a head is.
    def on_chunk_header(self) -> None:
        self._sizing = False
        self._heading, self._head_bytes, self._begun = True, 0, self._begun + 1

    def on_chunk_complete(self) -> None:  # (the next chunk's size line begins)
        self._heading, self._head_bytes, self._begun = True, 0, self._begun + 1

    def on_body(self, body: bytes) -> None:
        self._heading = self._sizing = False
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._heading = self._bodying = self._sizing = False
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # (resumes reading, starts a request queued behind)
        if self._refused:
            self.flow.pause_reading()
            if not self._answering():
                self._send_refusal()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_since = self.loop.time()  # a first request that never begins: closed
        self._arm(self._head_since + self.head_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        super().connection_lost(exc)

    def _answering(self) -> bool:
        """An answer is under way, or requests that came before the refused one wait for
        theirs (HTTP/1.1 answers in the order of the requests)."""
        cycle = self.cycle
        return (cycle is not None and not cycle.response_complete and not cycle.disconnected) or bool(
            self.pipeline
        )

    def _first_size_line(self, now: float) -> bool:
        """A read left a body of which no byte was parsed incomplete: if it is chunked, its
        first size line is coming, counted from now as a head is (told by the headers, only
        here: a body whose first byte comes with its head never asks)."""
        self._sizing = False
        if not any(name == b"transfer-encoding" for name, _ in self.headers):
            return False
        self._heading, self._head_bytes, self._begun, self._head_since = True, 0, self._begun + 1, now
        return True

    def _body_came(self, count: int, now: float) -> None:
        """A read of ``count`` bytes left the body incomplete: credited to the body whose clock
        runs, or the first such read of a new body, whose clock starts (its bytes, which
        came with the head or before any wait, are not credited)."""
        if self._body_of is self.cycle:
            self._body_bytes += count
        else:
            self._body_of, self._body_since, self._body_bytes = self.cycle, now, 0

    def _body_due(self) -> float:
        """When the body must be whole: :attr:`body_timeout_s` after its clock started, plus
        a second per :attr:`body_min_bytes_per_s` bytes received since (at most
        :attr:`max_body_bytes` of them: no larger body is taken)."""
        rate = self.body_min_bytes_per_s
        if not rate:
            return math.inf
        return self._body_since + self.body_timeout_s + min(self._body_bytes, self.max_body_bytes) / rate

    def _arm(self, due: float) -> None:
        """The connection's timer, if it has none pending due as early (one due earlier is
        armed again for what is incomplete when it fires; one due later, armed for another
        bound, the head's or the body's, when they are configured apart, is moved to
        ``due``: as bytes come, due times only grow, so it is not moved then)."""
        timer = self._stall_timer
        if timer is not None:
            if timer.when() <= due:
                return
            timer.cancel()
        self._stall_timer = self.loop.call_at(due, self._stalled)

    def _stalled(self) -> None:
        """The timer: a head or body past its time is refused; one that still has time, or
        whose clock stood still because this side was not reading, arms it again."""
        self._stall_timer = None
        if self._refused or self.transport.is_closing() or self.transport.get_protocol() is not self:
            return  # (refused, closing, or upgraded to another protocol)
        now = self.loop.time()
        if not self._begun:  # no request began since the connection was made
            if now >= self._head_since + self.head_timeout_s:
                self.transport.close()  # as nginx: nothing asked, nothing answered
            else:
                self._arm(self._head_since + self.head_timeout_s)
        elif self._bodying:  # (a chunk's size line or the trailers included)
            cycle = self.cycle
            if self._body_of is not cycle:
                self._body_came(0, now)
            if self.flow.read_paused or self.pipeline or cycle is None or cycle.waiting_for_100_continue:
                self._head_since = self._body_read = self._body_since = now
                self._body_bytes = 0
            elif late := self._body_late(now):
                self._refuse_body(_TIMEOUT, late)
                return
            if self._heading:
                due = self._head_since + self.head_timeout_s
            else:
                due = self._body_read + self.body_timeout_s
            self._arm(min(due, self._body_due()))
        elif self._heading:
            if self.flow.read_paused:
                self._head_since = now
            elif now >= self._head_since + self.head_timeout_s:
                self._refuse_slow_head()
                return
            self._arm(self._head_since + self.head_timeout_s)

    def _body_late(self, now: float) -> str | None:
        """Why the body is past its time at ``now`` (its reading not paused), if it is."""
        if self._heading and now >= self._head_since + self.head_timeout_s:
            return (f"the request body stopped coming: a chunk's size line or the trailers not whole "
                    f"{self.head_timeout_s:g} s after their first byte")
        if not self._heading and now >= self._body_read + self.body_timeout_s:
            return f"the request body stopped coming: no byte for {self.body_timeout_s:g} s"
        if now >= self._body_due():
            return (f"the request body came too slowly: not whole {self.body_timeout_s:g} s after it "
                    f"began plus 1 s per {self.body_min_bytes_per_s:g} bytes received")
        return None

    def _refuse_head(self) -> None:
        self.logger.warning("A request head over %d bytes was refused (431).", MAX_HEAD_BYTES)
        if self._bodying:  # a chunked body's trailers (or a chunk's size line): its request's answer
            self._refuse_body(
                _TOO_LARGE, f"a chunk's size line or the trailers take more than {MAX_HEAD_BYTES} bytes"
            )
            return
        self._refuse((
            _TOO_LARGE,
            "request_header_too_large",
            f"the request line and headers take more than {MAX_HEAD_BYTES} bytes",
        ))

    def _refuse_slow_head(self) -> None:
        self.logger.warning(
            "A request head not whole %gs after its first byte was refused (408).", self.head_timeout_s
        )
        self._refuse((
            _TIMEOUT,
            "request_timeout",
            f"the request line and headers did not arrive within {self.head_timeout_s:g} s",
        ))

    def _refuse_body(self, status: bytes, message: str) -> None:
        """The request being answered (nothing is queued behind it: the parser is inside its
        body, trailers included) is refused: the app's reads end as if the client had gone
        and what it sends is dropped; the refusal is the answer, unless one was already
        begun."""
        cycle = self.cycle
        code = int(status.split()[1])
        self.logger.warning("A request body was refused (%d): %s.", code, message)
        state = cycle.scope.setdefault("state", {})
        state[BODY_REFUSED] = (code, message)
        # the app's id for the request (``errors.request_id`` keeps it there): its record and
        # this answer name the same request
        self._request_id = state.setdefault("request_id", uuid.uuid4().hex)
        cycle.disconnected = True  # (the app's receive() says so, its send() writes nothing)
        cycle.message_event.set()
        if cycle.response_started:
            self._bodying = False
            self.transport.close()
            return
        self._refuse((status, "request_timeout" if code == 408 else "request_header_too_large", message))

    def _refuse(self, refusal: Refusal) -> None:
        self._heading = self._bodying = False
        self._refused = refusal
        self.flow.pause_reading()  # nothing more of this connection is read
        if not self._answering():
            self._send_refusal()

    def _send_refusal(self) -> None:
        """The refusal, then the connection closed."""
        assert self._refused is not None
        status, code, message = self._refused
        body = _refusal_body(code, message, self._request_id)
        head = [status]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
        self.transport.write(b"".join(head))
        self.transport.close()


def bound_client_times(api: ApiSettings) -> None:
    """The head and body timeouts of ``api`` for every connection this process serves
    (called where the app is built, in the process that serves: ``serve``, each worker of
    ``serve --workers N``, ``demo``; uvicorn's configuration, which a worker gets pickled,
    can only name the protocol class)."""
    BoundedHttpToolsProtocol.head_timeout_s = api.head_timeout_s
    BoundedHttpToolsProtocol.body_timeout_s = api.body_timeout_s
    BoundedHttpToolsProtocol.body_min_bytes_per_s = api.body_min_bytes_per_s
    BoundedHttpToolsProtocol.max_body_bytes = api.max_body_bytes


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with the plain access formatter."""
    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"] = {"format": ACCESS_FORMAT}
    return config


def lean_log_records() -> None:
    """Log records without the caller's file and line, thread, process or multiprocessing
    names (the ``logging`` module's documented switches, ``logging._srcfile = None`` among
    them): no format of :func:`log_config` shows them, and the access line is written once
    per request (about a third of its cost was finding the calling frame and naming the
    thread and process). Called by ``govsearch serve`` in the process that serves."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def size_thread_pool(threads: int) -> None:
    """Size the thread pool the API's synchronous work runs in (anyio's default limiter;
    called in the event loop, at start)."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = threads


def listening_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A TCP socket bound to ``host:port`` whose protocol is ``IPPROTO_TCP`` (so the event
    loop sets ``TCP_NODELAY`` on every connection it accepts), inheritable by the workers."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run_workers(app: str, *, workers: int, host: str, port: int, **options: Any) -> None:
    """``uvicorn.run(app, workers=workers, ...)`` over :func:`listening_socket`: uvicorn's
    supervisor starts the workers, restarts the ones that die and stops them on a signal."""
    config = Config(app, factory=True, workers=workers, host=host, port=port, **options)
    sock = listening_socket(host, port, config.backlog)
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()
