"""One HTTP/1.1 exchange on a connection of the client library's own urllib3 pool.

The client libraries spend more CPU on a request than the engine answer is worth on the hot
path (``http.client``'s header parsing through ``email``, urllib3's response object and
retry bookkeeping, the library's logging and lower-casing): about 0.3 ms of a 0.45 ms
``_msearch`` on this machine (``bench/engine_client.py``, ADR 0026). :class:`Wire` keeps
what they do for the connection -- the pool (its size, dropped-connection check, TLS, the
connect timeout) and the headers (user agent, basic auth from the URL) -- and writes the
request and reads the answer itself: the request line, the headers and the body in one
``sendall``; the status line and headers split as bytes; the body by ``Content-Length``,
chunked or until the connection closes (then the connection is not reused).

The timeout bounds the whole exchange, not each read: an engine that keeps sending a byte
now and then still times out once the timeout has passed since the exchange began (a
socket's own timeout is per ``recv``, so each read is given what remains).

A failure closes the connection (a later request opens a new one) and raises
:class:`WireTimeout` (the whole answer not in within the timeout) or :class:`WireError`
(refused, reset, TLS, a malformed answer): the adapter maps them as it maps the library's.
"""

from __future__ import annotations

import gzip
import socket
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

import urllib3
from urllib3.connection import HTTPConnection
from urllib3.exceptions import HTTPError as Urllib3Error

_CHUNK = 65536
_HEAD_END = b"\r\n\r\n"
_SLACK_S = 0.001
"""a read may start with up to this much more than what remains (no system call to cut it)"""


class WireError(Exception):
    """The exchange failed before a whole answer was read."""


class WireTimeout(WireError):
    """The request could not be sent, or its whole answer read, within the timeout."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    """lower-cased names (a repeated header's values joined by ``, ``)"""
    body: bytes


class Wire:
    """Exchanges over the pool ``pool_of()`` returns (one host; asked on every exchange, so
    a client closed and used again opens a new pool, as the library does), sending
    ``headers`` with every request."""

    def __init__(
        self, pool_of: Callable[[], urllib3.HTTPConnectionPool], headers: Mapping[str, str]
    ) -> None:
        self.pool_of = pool_of
        pool = pool_of()
        host = pool.host if ":" not in pool.host else f"[{pool.host}]"
        default_port = 443 if pool.scheme == "https" else 80
        authority = host if pool.port in (None, default_port) else f"{host}:{pool.port}"
        fixed = {"host": authority, **{k.lower(): v for k, v in headers.items()}}
        fixed.pop("content-type", None)
        fixed.pop("content-length", None)
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())

    def exchange(
        self, method: str, target: str, body: bytes | None, content_type: str, timeout: float
    ) -> Answer:
        """Send one request, read its whole answer (any status), all within ``timeout``."""
        expires = time.monotonic() + timeout
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed}"
        if body is not None:
            head += f"content-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
        elif method in ("POST", "PUT"):
            head += "content-length: 0\r\n"
        payload = (head + "\r\n").encode("latin-1") + (body or b"")
        pool = self.pool_of()
        try:
            conn = cast(HTTPConnection, pool._get_conn())
        except Urllib3Error as error:  # the pool is closed
            raise WireError(f"{type(error).__name__}: {error}") from error
        reusable = False
        try:
            fresh = conn.sock is None
            if fresh:
                conn.timeout = timeout
                conn.connect()
            sock = conn.sock
            assert sock is not None
            if sock.gettimeout() != timeout:  # two system calls saved when it is the same
                sock.settimeout(timeout)
            if fresh:  # connecting took part of it
                _bound(sock, expires)
            sock.sendall(payload)  # bounded as a whole by the socket's timeout
            answer, reusable = _read_answer(sock, method, expires)
            return answer
        except TimeoutError as error:
            raise WireTimeout(f"timed out after {timeout:g}s: {error}") from error
        except (OSError, Urllib3Error, ValueError, zlib.error) as error:
            raise WireError(f"{type(error).__name__}: {error}") from error
        finally:
            if not reusable:
                conn.close()
            pool._put_conn(conn)


def _bound(sock: socket.socket, expires: float) -> None:
    """Cut the socket's timeout to what remains until ``expires`` (``time.monotonic``);
    ``TimeoutError`` when nothing does."""
    remaining = expires - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("the whole answer did not come within the timeout")
    if remaining < (sock.gettimeout() or float("inf")) - _SLACK_S:
        sock.settimeout(remaining)


def _read_answer(sock: socket.socket, method: str, expires: float) -> tuple[Answer, bool]:
    """The answer on ``sock`` and whether the connection may carry another request; every
    read ends by ``expires``."""
    _bound(sock, expires)  # no system call when sending took under a millisecond
    data = sock.recv(_CHUNK)  # on loopback, mostly the whole answer
    if (end := data.find(_HEAD_END)) < 0:
        buffer = bytearray(data)
        while (end := buffer.find(_HEAD_END)) < 0:
            _receive(sock, buffer, expires)
        data = bytes(buffer)
    lines = data[:end].decode("latin-1").split("\r\n")
    rest = data[end + 4 :]
    version, _, status_text = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    status = int(status_text[:3])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed header line: {line[:80]!r}")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        body = b""
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        body = _chunked(sock, bytearray(rest), expires)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if len(rest) < length:
            buffer = bytearray(rest)
            while len(buffer) < length:
                _receive(sock, buffer, expires)
            rest = bytes(buffer)
        body = rest if len(rest) == length else rest[:length]
    else:  # delimited by the connection's end
        keep = False
        buffer = bytearray(rest)
        while _receive(sock, buffer, expires, eof_ok=True):
            pass
        body = bytes(buffer)
    encoding = headers.get("content-encoding", "").lower()
    if encoding == "gzip":
        body = gzip.decompress(body)
    elif encoding == "deflate":
        body = zlib.decompress(body)
    return Answer(status, headers, body), keep


def _receive(sock: socket.socket, buffer: bytearray, expires: float, *, eof_ok: bool = False) -> bool:
    """Append what arrives by ``expires`` to ``buffer``; False at the connection's end (an
    error unless ``eof_ok``)."""
    _bound(sock, expires)
    data = sock.recv(_CHUNK)
    if not data:
        if eof_ok:
            return False
        raise ConnectionResetError("the engine closed the connection before a whole answer")
    buffer += data
    return True


def _chunked(sock: socket.socket, rest: bytearray, expires: float) -> bytes:
    body = bytearray()
    while True:
        while (end := rest.find(b"\r\n")) < 0:
            _receive(sock, rest, expires)
        size = int(bytes(rest[:end]).split(b";")[0].strip(), 16)
        del rest[: end + 2]
        if size == 0:  # trailers, then an empty line
            while (end := rest.find(b"\r\n")) != 0:
                if end < 0:
                    _receive(sock, rest, expires)
                else:
                    del rest[: end + 2]
            return bytes(body)
        while len(rest) < size + 2:
            _receive(sock, rest, expires)
        body += rest[:size]
        del rest[: size + 2]
