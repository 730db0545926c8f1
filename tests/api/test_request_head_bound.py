"""A request's head (its line and headers) is bounded in ``govsearch serve``: past
``MAX_HEAD_BYTES`` the answer is 431 ``request_header_too_large`` in the one error shape and
the connection closes, whatever else arrives. uvicorn's httptools protocol has no such bound:
before, a header that never ended grew the worker by 58 MB per 64 MB sent, until memory ran
out (one connection was enough). Served for real, with one worker and with two (the
supervisor's workers get the protocol through uvicorn's configuration)."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from control_plane.api.serving import MAX_HEAD_BYTES
from tests.drills.harness import serve

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module", params=[1, 2], ids=["one-worker", "two-workers"])
def served(
    request: pytest.FixtureRequest, engine_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, int]]:
    """(port, pid of ``govsearch serve``)."""
    served = serve(engine_url, tmp_path_factory.mktemp("head"), f"workers-{request.param}",
                   workers=request.param)
    try:
        yield served.port, served.process.pid
    finally:
        served.stop()


def _serving(pid: int) -> list[int]:
    """``pid`` and its children (the workers of ``--workers 2``)."""
    return [pid] + [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def _exchange(port: int, data: bytes) -> bytes:
    """Send ``data`` (while reading, so a refusal is read even if the sending is cut short);
    everything the server answered until it closed or went quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        received = b""
        sock.settimeout(5)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return received


def _error(answer: bytes) -> tuple[str, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), json.loads(body)


def test_a_head_under_the_bound_is_served_and_one_over_it_is_431(served: tuple[int, int]) -> None:
    port, _ = served
    near = b"a" * (MAX_HEAD_BYTES - 2048)
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Near: " + near + b"\r\nConnection: close\r\n\r\n"
    ok = _exchange(port, head)
    assert ok.startswith(b"HTTP/1.1 200 "), ok[:200]
    over = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Over: " + b"a" * 4_194_304 + b"\r\n\r\n"
    status, body = _error(_exchange(port, over))
    assert status == "HTTP/1.1 431 Request Header Fields Too Large"
    error = body["error"]
    assert isinstance(error, dict) and error["code"] == "request_header_too_large"
    assert set(error) == {"code", "message", "request_id", "details"}
    many = b"".join(b"X-H%d: v\r\n" % n for n in range(400_000))  # small headers, 4.5 MB
    assert _error(_exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n"))[0].startswith(
        "HTTP/1.1 431 "
    )


def test_kept_alive_and_pipelined_requests_each_get_their_own_bound(served: tuple[int, int]) -> None:
    """Many requests on one connection, sent at once: each head counts from the end of the
    request before it, so their sum may be far above the bound."""
    port, _ = served
    one = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"c" * (MAX_HEAD_BYTES // 4) + b"\r\n\r\n"
    answers = _exchange(port, one * 7 + b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answers.count(b"HTTP/1.1 200 ") == 8, answers[:300]
    assert b"431" not in answers


def test_a_header_that_never_ends_costs_the_server_nothing_it_keeps(served: tuple[int, int]) -> None:
    port, pid = served
    pids = _serving(pid)
    before = _rss_mb(pids)
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Endless: ")
        chunk = b"d" * 1_048_576
        try:
            while sent < 256 * 1_048_576:  # before: the worker held about 230 MB of it
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
    assert sent < 32 * 1_048_576, f"the server read {sent} bytes of one head"
    assert _rss_mb(pids) - before < 32
    assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
