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
"""

from __future__ import annotations

import copy
import json
import logging
import socket
import uuid
from typing import Any

import anyio.to_thread
from uvicorn.config import LOGGING_CONFIG, Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.supervisors import Multiprocess

ACCESS_FORMAT = "%(levelname)s:     %(message)s"

MAX_HEAD_BYTES = 65_536
"""bytes a request's line and headers may take (nginx takes 32 KB, Node.js 16 KB by default)"""


def _too_large() -> bytes:
    """The 431's body, in the one error shape (its own request id, for the log)."""
    return json.dumps({"error": {
        "code": "request_header_too_large",
        "message": f"the request line and headers take more than {MAX_HEAD_BYTES} bytes",
        "request_id": uuid.uuid4().hex,
        "details": [],
    }}).encode("ascii")


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bound on a request head still coming in (module
    docstring).

    What is counted is each chunk the head is still incomplete after, from the chunk after
    the one its request began in: so a head is refused once it has taken more than
    :data:`MAX_HEAD_BYTES` beyond that first chunk (a read, at most 256 KB), whatever the
    headers hold, and one that ends inside a chunk is never counted (pipelined requests,
    however many a chunk holds, are read as before). The parser keeps an incomplete head's
    bytes, so that is what a connection can make the worker hold."""

    _heading = False
    _head_bytes = 0
    _begun = 0
    _refused = False
    """a head was refused: nothing more is read, the 431 goes once the answers before it have"""

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        begun = self._begun
        super().data_received(data)
        if self._heading:
            self._head_bytes = self._head_bytes + len(data) if self._begun == begun else 0
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse_head()

    def on_message_begin(self) -> None:
        self._heading, self._head_bytes, self._begun = True, 0, self._begun + 1
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._heading = False
        super().on_headers_complete()

    # A chunked body's last chunk (``0``) is followed by trailer headers, which llhttp parses
    # with the head's callbacks (httptools keeps an incomplete one, uvicorn appends each to
    # the request's headers): from a chunk's size line to its data (or to the message's end,
    # after the trailers) is counted as a head is.
    def on_chunk_header(self) -> None:
        self._heading, self._head_bytes, self._begun = True, 0, self._begun + 1

    def on_chunk_complete(self) -> None:
        self._heading = False

    def on_body(self, body: bytes) -> None:
        self._heading = False
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._heading = False
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # (resumes reading, starts a request queued behind)
        if self._refused:
            self.flow.pause_reading()
            if not self._answering():
                self._send_refusal()

    def _answering(self) -> bool:
        """An answer is under way, or requests that came before the refused head wait for
        theirs (HTTP/1.1 answers in the order of the requests)."""
        return (self.cycle is not None and not self.cycle.response_complete) or bool(self.pipeline)

    def _refuse_head(self) -> None:
        self._heading, self._refused = False, True
        self.flow.pause_reading()  # nothing more of this connection is read
        self.logger.warning("A request head over %d bytes was refused (431).", MAX_HEAD_BYTES)
        if not self._answering():
            self._send_refusal()

    def _send_refusal(self) -> None:
        """The 431, then the connection closed."""
        body = _too_large()
        head = [b"HTTP/1.1 431 Request Header Fields Too Large\r\n"]
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
