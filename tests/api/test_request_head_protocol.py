"""The head bound of :class:`~control_plane.api.serving.BoundedHttpToolsProtocol` on a bare
ASGI app (no engine): a chunked request's trailers, which llhttp parses with the head's
callbacks after ``0\\r\\n``, are counted as a head is (uncounted, 48 MB of one trailer were
read and small trailers grew the worker 419 MB); a 431 for a pipelined request waits for
the answers of the requests before it (HTTP/1.1 answers in order)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.checkout import ROOT, checkout_env

SERVER = """
import sys, uvicorn
from control_plane.api.serving import BoundedHttpToolsProtocol

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        import asyncio
        await asyncio.sleep(0.5)
    body = b'{"ok": true}'
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), http=BoundedHttpToolsProtocol,
            log_level="warning", lifespan="off")
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
def served() -> Iterator[tuple[int, int]]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], cwd=ROOT, env=checkout_env())
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            time.sleep(0.1)
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(timeout=10)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _flood(port: int, start: bytes, chunk: bytes, limit: int) -> int:
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(start)
        try:
            while sent < limit:
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
    return sent


CHUNKED = b"POST /v1/search HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"


def test_a_trailer_that_never_ends_is_bounded_like_a_header(served: tuple[int, int]) -> None:
    port, pid = served
    before = _rss_mb(pid)
    sent = _flood(port, CHUNKED + b"X-Endless: ", b"d" * 1_048_576, 48 * 1_048_576)
    grown = _rss_mb(pid) - before
    assert sent < 32 * 1_048_576 and grown < 32, f"read {sent >> 20} MB of one trailer, grew {grown:.0f} MB"


def test_a_flood_of_trailers_is_bounded_like_one_of_headers(served: tuple[int, int]) -> None:
    port, pid = served
    before = _rss_mb(pid)
    many = b"".join(b"X-H%d: v\r\n" % n for n in range(100_000))  # about 1.2 MB
    sent = _flood(port, CHUNKED, many, 48 * 1_048_576)
    grown = _rss_mb(pid) - before
    assert sent < 32 * 1_048_576 and grown < 32, f"read {sent >> 20} MB of trailers, grew {grown:.0f} MB"


def test_chunked_bodies_and_short_trailers_are_still_served(served: tuple[int, int]) -> None:
    port, _ = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(CHUNKED[: -len(b"0\r\n")])
        for _ in range(50):  # dripped: a size line, then its data, one send each
            sock.sendall(b"400\r\n")
            time.sleep(0.002)
            sock.sendall(b"x" * 1024 + b"\r\n")
        sock.sendall(b"0\r\nX-Checksum: abc\r\n\r\n")
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received.count(b"HTTP/1.1 200 ") == 2, received[:300]
    assert b"431" not in received


def test_a_pipelined_head_over_the_bound_does_not_take_the_answer_of_the_request_before_it(
    served: tuple[int, int],
) -> None:
    """HTTP/1.1 answers in request order: the 431 for the second request may not be read as
    the first one's answer (which the server computed, and recorded, meanwhile)."""
    port, _ = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(4):
                sock.sendall(b"b" * 65536)
                time.sleep(0.01)
        received = b""
        sock.settimeout(3)
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := sock.recv(65536):
                received += chunk
    assert received.startswith(b"HTTP/1.1 200 "), received[:200]
