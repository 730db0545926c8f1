"""Slow clients on a real ``govsearch serve`` (ADR 0055): a request head sent a byte at a
time, a body announced and never sent, a connection on which nothing is asked. Before,
uvicorn's httptools protocol had only its keep-alive timer, between requests, which any
byte cancels: each of these held its connection (and, for the body, the app's ``receive()``)
for as long as the client liked. Now a head not whole ``api.head_timeout_s`` after its first
byte, or a body with no byte for ``api.body_timeout_s``, gets 408 ``request_timeout`` in the
one error shape, after the answers of the requests before it, and the connection closes.

The bounds are configured small (0.5 s) and the tests wait on the socket with generous
timeouts: they assert what arrives, never how long it took."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.drills.harness import ROOT, Served, checkout_env, free_port, serve, wait_until
from tests.drills.relay import Relay

pytestmark = pytest.mark.engine

BOUND_S = "0.5"
SLOW = {"GOVSEARCH_API_HEAD_TIMEOUT": BOUND_S, "GOVSEARCH_API_BODY_TIMEOUT": BOUND_S}
PATIENCE_S = 30.0
"""how long a test waits for an answer (60 times the bound): only a server that never answers
makes it wait that long"""


@pytest.fixture(scope="module", params=[1, 2], ids=["one-worker", "two-workers"])
def served(
    request: pytest.FixtureRequest, engine_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, Path]]:
    """The port of a ``govsearch serve --workers N`` whose bounds are 0.5 s (the workers of
    ``--workers 2`` read them from the environment the supervisor hands on), and the
    directory of its decision records."""
    served = serve(engine_url, tmp_path_factory.mktemp("slow"), f"workers-{request.param}",
                   workers=request.param, **SLOW,
                   GOVSEARCH_POLICIES_INDEX_PREFIX=f"slow-{uuid.uuid4().hex[:8]}")
    try:
        yield served.port, served.audit_path.parent
    finally:
        served.stop()


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _rest(sock: socket.socket) -> tuple[bytes, bool]:
    """Everything the server sends until it closes the connection (True), or until it has
    been quiet for :data:`PATIENCE_S` (False)."""
    received = b""
    sock.settimeout(PATIENCE_S)
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return received, False
    except ConnectionResetError:
        pass
    return received, True


def _drip(sock: socket.socket, data: bytes, gap_s: float = 0.05) -> None:
    """Send ``data`` a byte at a time, ``gap_s`` apart, until the server answers or hangs up."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        for byte in data:
            if select.select([sock], [], [], 0)[0]:
                return
            sock.sendall(bytes([byte]))
            time.sleep(gap_s)


def _answers(data: bytes) -> list[tuple[str, dict[str, str], bytes]]:
    """The HTTP answers in ``data``, in order: (status line, headers, body by its length)."""
    found = []
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines[1:])
        length = int(headers.get("content-length", "0"))
        found.append((lines[0], headers, data[:length]))
        data = data[length:]
    return found


def _read(sock: socket.socket, count: int) -> list[tuple[str, dict[str, str], bytes]]:
    """The next ``count`` answers on a connection kept open."""
    return _read_after(sock, b"", count)


def _read_after(sock: socket.socket, received: bytes, count: int) -> list[tuple[str, dict[str, str], bytes]]:
    """The next ``count`` answers on a connection kept open, ``received`` their start."""
    sock.settimeout(PATIENCE_S)
    while True:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {received[:300]!r}"
        received += chunk
        with contextlib.suppress(ValueError):  # (an answer cut short)
            answers = _answers(received)
            _, headers, body = answers[-1]
            if len(answers) == count and len(body) == int(headers.get("content-length", "0")):
                return answers


def _timed_out(answer: tuple[str, dict[str, str], bytes], part: str) -> None:
    status, headers, body = answer
    assert status == "HTTP/1.1 408 Request Timeout"
    assert headers["connection"] == "close" and headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message", "request_id", "details"}
    assert error["code"] == "request_timeout" and part in error["message"], error


def test_a_head_dripped_a_byte_at_a_time_gets_408_and_its_connection_closes(served: tuple[int, Path]) -> None:
    with socket.create_connection(("127.0.0.1", served[0]), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        _drip(sock, b"X-Slow: " + b"s" * 600)  # 30 s of bytes if nobody stops it
        received, closed = _rest(sock)
    answers = _answers(received)
    assert len(answers) == 1, received[:300]
    _timed_out(answers[0], "headers")
    assert closed
    assert _healthy(served[0])


def test_a_body_that_stops_coming_gets_408_and_its_connection_closes(served: tuple[int, Path]) -> None:
    """``Content-Length`` announced, a part sent, then nothing: the app waits in
    ``receive()`` (the request deadline bounds engine calls, not the upload)."""
    with socket.create_connection(("127.0.0.1", served[0]), timeout=10) as sock:
        sock.sendall(b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"intent\": \"cheap ")
        received, closed = _rest(sock)
    answers = _answers(received)
    assert len(answers) == 1, received[:300]
    _timed_out(answers[0], "body")
    assert closed
    assert _healthy(served[0])
    # the search's decision record says what the client got (the app saw the client gone)
    _recorded_as(served, answers[0], 408, "request_timeout")


def _records(directory: Path, request_id: str) -> list[dict[str, Any]]:
    """The decision records of ``request_id`` (a line being written is skipped; none before
    the first is written)."""
    found = []
    path = directory / "decisions.jsonl"
    for line in path.read_text().splitlines() if path.exists() else ():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if record.get("request_id") == request_id:
                found.append(record)
    return found


def test_a_connection_on_which_nothing_is_asked_is_closed_without_an_answer(served: tuple[int, Path]) -> None:
    with socket.create_connection(("127.0.0.1", served[0]), timeout=10) as sock:
        received, closed = _rest(sock)
    assert (received, closed) == (b"", True)


def test_kept_alive_requests_whose_heads_come_whole_are_not_bounded_by_the_time_between_them(
    served: tuple[int, Path],
) -> None:
    """Only a head's own time counts: three times the bound idle between requests (well
    within uvicorn's keep-alive timeout, 5 s), a head in two writes, a body in two."""
    with socket.create_connection(("127.0.0.1", served[0]), timeout=10) as sock:
        statuses = []
        for round_ in range(3):
            if round_:
                time.sleep(3 * float(BOUND_S))
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            sock.sendall(b"Host: x\r\n\r\n")
            sock.sendall(b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: 4\r\n\r\nab")
            sock.sendall(b"cd")
            statuses += [status for status, _, _ in _read(sock, 2)]
    assert statuses[::2] == ["HTTP/1.1 200 OK"] * 3
    assert not any(" 408 " in status for status in statuses), statuses
    assert all(status.startswith("HTTP/1.1 4") for status in statuses[1::2]), statuses  # (text/plain)


@pytest.fixture()
def relayed(engine_url: str, tmp_path: Path) -> Iterator[tuple[Served, Relay]]:
    """``govsearch serve`` (bounds of 0.5 s) whose engine calls go through a relay."""
    with Relay(engine_url) as relay:
        served = serve(relay.url, tmp_path, "relayed", **SLOW, GOVSEARCH_ENGINE_TIMEOUT="60",
                       GOVSEARCH_POLICIES_INDEX_PREFIX=f"slow-{uuid.uuid4().hex[:8]}")
        try:
            yield served, relay
        finally:
            served.stop()


def test_a_408_for_a_slow_head_comes_after_the_answer_of_the_request_pipelined_before_it(
    relayed: tuple[Served, Relay],
) -> None:
    """A search whose engine call is held on the wire, then the start of a second request's
    head, and nothing more: the head's time runs out while the search is still being
    answered (the log says so); the search's answer, released, comes first, then the 408."""
    served, relay = relayed
    port = served.port
    refused = "was refused (408)"
    relay.hold(lambda method, path: True)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 21\r\n\r\n{\"intent\": \"cheap x\"}"
                     b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        try:
            assert relay.held.wait(PATIENCE_S), "the search made no engine call"
            assert wait_until(lambda: refused in served.log.read_text(), PATIENCE_S) is not None, (
                served.log.read_text()[-2000:]
            )
        finally:
            relay.release()
        received, closed = _rest(sock)
    answers = _answers(received)
    assert len(answers) == 2, received[:600]
    first, _, body = answers[0]
    assert " 408 " not in first
    assert json.loads(body)  # the search's own answer, whatever the engine said
    _timed_out(answers[1], "headers")
    assert closed


SEARCH = b'{"intent": "cheap chocolate"}'


def _plain_search_head(length: int) -> bytes:
    """A search the wire lane takes (ADR 0057): ``application/json``, ``Content-Length``."""
    return (b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % length)


def _refused_and_recorded(served: tuple[int, Path], received: bytes, closed: bool) -> None:
    """One 408 about the body, the connection closed, and the search's decision record
    saying 408 ``request_timeout`` under the id the client got."""
    answers = _answers(received)
    assert len(answers) == 1, received[:300]
    _timed_out(answers[0], "body")
    assert closed
    _recorded_as(served, answers[0], 408, "request_timeout")


def _recorded_as(
    served: tuple[int, Path], answer: tuple[str, dict[str, str], bytes], status: int, code: str
) -> None:
    """The search's decision record says ``status`` and ``code``, under the request id
    ``answer`` gave the client."""
    request_id = json.loads(answer[2])["error"]["request_id"]
    assert wait_until(lambda: _records(served[1], request_id), PATIENCE_S) is not None
    (record,) = _records(served[1], request_id)
    assert (record["error"]["status"], record["error"]["code"]) == (status, code)


def _too_large(answer: tuple[str, dict[str, str], bytes]) -> None:
    status, headers, body = answer
    assert (status, headers["connection"]) == ("HTTP/1.1 431 Request Header Fields Too Large", "close")
    error = json.loads(body)["error"]
    assert error["code"] == "request_header_too_large", error


def test_a_plain_search_whose_body_stalls_gets_408_and_its_record(served: tuple[int, Path]) -> None:
    """A search the wire lane would serve, its last byte never sent: the lane hands it to
    the app, whose record says what the client got."""
    with socket.create_connection(("127.0.0.1", served[0]), timeout=10) as sock:
        sock.sendall(_plain_search_head(len(SEARCH)) + SEARCH[:-1])
        received, closed = _rest(sock)
    _refused_and_recorded(served, received, closed)


def test_a_body_trickled_faster_than_the_body_timeout_is_still_refused(served: tuple[int, Path]) -> None:
    """A plain search's body (padded with spaces, 60 s of bytes) dripped a byte every fifth
    of the body timeout: no gap reaches the timeout, yet the body must be whole within
    the timeout plus a second per ``api.body_min_bytes_per_s`` (500) bytes received."""
    body = SEARCH + b" " * 571
    with socket.create_connection(("127.0.0.1", served[0]), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(_plain_search_head(len(body)))
        _drip(sock, body, gap_s=float(BOUND_S) / 5)
        received, closed = _rest(sock)
    _refused_and_recorded(served, received, closed)


CHUNKED_SEARCH = (b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(SEARCH) + SEARCH + b"\r\n")


@pytest.mark.parametrize(("sent", "dripped"), [
    (CHUNKED_SEARCH + b"0\r\n", b"X-Checksum: " + b"c" * 600),
    (CHUNKED_SEARCH + b"0\r\n", b""),
    (CHUNKED_SEARCH + b"1\r\n", b""),
], ids=["trailer-dripped", "trailers-never-sent", "chunk-data-never-sent"])
def test_a_chunked_body_whose_trailers_or_chunk_stall_gets_408_and_its_record(
    served: tuple[int, Path], sent: bytes, dripped: bytes,
) -> None:
    """The trailers after a chunked body's last chunk (and the span from a chunk's size line
    to its data) are counted as a head is, but they belong to the request being answered,
    whose handler is waiting for the rest of its body: the 408 is that request's answer."""
    with socket.create_connection(("127.0.0.1", served[0]), timeout=10) as sock:
        sock.sendall(sent)
        _drip(sock, dripped)
        received, closed = _rest(sock)
    _refused_and_recorded(served, received, closed)


def test_a_pipelined_body_waiting_for_the_request_before_it_is_not_timed_out(
    relayed: tuple[Served, Relay],
) -> None:
    """A search held at the relay, then a second search whose head and half its body came
    with it: reading is paused while the first is answered (the second waits in the
    pipeline), for many body timeouts. The rest of its body, sent meanwhile, is read once
    the first is answered: both searches are answered, neither with a 408."""
    served, relay = relayed
    port = served.port
    relay.hold(lambda method, path: True)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_plain_search_head(len(SEARCH)) + SEARCH
                     + _plain_search_head(len(SEARCH)) + SEARCH[:10])
        try:
            assert relay.held.wait(PATIENCE_S), "the search made no engine call"
            time.sleep(6 * float(BOUND_S))  # (the timer fires while reading is paused)
            sock.sendall(SEARCH[10:])
            time.sleep(2 * float(BOUND_S))
        finally:
            relay.release()
        answers = _read(sock, 2)
    assert not any(" 408 " in status for status, _, _ in answers), answers
    assert all(json.loads(body) for _, _, body in answers)


GATED_APP = """
import asyncio, sys, uvicorn
from control_plane.api.serving import BoundedHttpToolsProtocol

BoundedHttpToolsProtocol.head_timeout_s = BoundedHttpToolsProtocol.body_timeout_s = float(sys.argv[2])
opened = asyncio.Event()

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/open":
        opened.set()
    elif scope["path"] == "/gated":  # reads its body only once /open was asked
        await opened.wait()
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), http=BoundedHttpToolsProtocol,
            log_level="warning", lifespan="off")
"""


@pytest.fixture()
def gated() -> Iterator[int]:
    """A bare app on the bounded protocol (bounds of 0.5 s) whose ``/gated`` route reads its
    body only once ``/open`` was asked: the protocol's ``100 Continue`` waits until then."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", GATED_APP, str(port), BOUND_S], cwd=ROOT, env=checkout_env(),
    )
    try:
        assert wait_until(lambda: _connects(port), 60, every_s=0.1) is not None
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def _connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_a_body_waiting_for_its_100_continue_is_not_timed_out(gated: int) -> None:
    """``Expect: 100-continue``: the client sends the body once told to, and the protocol
    tells it when the app first reads it. While the app has not (many body timeouts), the
    body's clock does not run; once it has, the body sent at the ``100 Continue`` is read."""
    with socket.create_connection(("127.0.0.1", gated), timeout=10) as sock:
        sock.sendall(b"POST /gated HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        time.sleep(6 * float(BOUND_S))  # (the timer fires while the 100 Continue waits)
        _open(gated)
        sock.settimeout(PATIENCE_S)
        continued = sock.recv(65536)
        assert continued.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), continued
        sock.sendall(b"hello")
        received = continued[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
        answers = _read_after(sock, received, 1)
    assert [(status, body) for status, _, body in answers] == [("HTTP/1.1 200 OK", b"hello")]


def _open(port: int) -> None:
    """Let ``/gated`` requests read their bodies."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as other:
        other.sendall(b"GET /open HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read(other, 1)[0][0] == "HTTP/1.1 200 OK"


def test_a_pipelined_head_read_while_reading_is_paused_is_not_timed_out(gated: int) -> None:
    """A request whose handler waits (at the gate), a whole request queued behind it
    (reading pauses) and the start of a third head in the same write: the third head's
    clock does not run while this side does not read (many head timeouts). Its end, sent
    meanwhile, is read once reading resumes: three answers, no 408."""
    with socket.create_connection(("127.0.0.1", gated), timeout=10) as sock:
        sock.sendall(b"GET /gated HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /c HTTP/1.1\r\n")
        time.sleep(6 * float(BOUND_S))  # (the timer fires while reading is paused)
        sock.sendall(b"Host: x\r\n\r\n")
        time.sleep(2 * float(BOUND_S))
        _open(gated)
        answers = _read(sock, 3)
    assert [status for status, _, _ in answers] == ["HTTP/1.1 200 OK"] * 3


def test_trailers_too_large_get_431_as_their_requests_answer_and_its_record(
    served: tuple[int, Path],
) -> None:
    """A chunked search's trailer past 64 KiB (counted as a head is): the request is the
    one being answered, its handler waiting for the rest of its body, so the 431 is its
    answer (before, the 431 waited for that answer, and nothing came)."""
    with socket.create_connection(("127.0.0.1", served[0]), timeout=10) as sock:
        sock.sendall(CHUNKED_SEARCH + b"0\r\nX-Endless: ")
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(6):  # (apart, so that they are read apart)
                sock.sendall(b"d" * 32_768)
                time.sleep(float(BOUND_S) / 10)
        received, closed = _rest(sock)
    answers = _answers(received)
    assert len(answers) == 1, received[:300]
    _too_large(answers[0])
    assert closed
    _recorded_as(served, answers[0], 431, "request_header_too_large")


@pytest.mark.parametrize("start", [
    b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n5;ext=",
    CHUNKED_SEARCH + b"5;ext=",
], ids=["first-size-line", "later-size-line"])
def test_a_chunk_size_line_too_large_gets_431_as_its_requests_answer_and_its_record(
    served: tuple[int, Path], start: bytes,
) -> None:
    """A chunk's size line whose extension never ends (llhttp reads it without a bound and
    no body limit counts it: before, the line was counted as body bytes, so a client could
    send megabytes of it for as long as the body's time allowed): past 64 KiB, counted as
    a head is, the 431 is its request's answer."""
    with socket.create_connection(("127.0.0.1", served[0]), timeout=10) as sock:
        sock.sendall(start)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(64):  # 2 MiB, apart, so that they are read apart
                if select.select([sock], [], [], 0)[0]:
                    break
                sock.sendall(b"e" * 32_768)
                time.sleep(float(BOUND_S) / 10)
        received, closed = _rest(sock)
    answers = _answers(received)
    assert len(answers) == 1, received[:300]
    _too_large(answers[0])
    assert closed
    _recorded_as(served, answers[0], 431, "request_header_too_large")


@pytest.fixture()
def uneven(request: pytest.FixtureRequest, engine_url: str, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """``govsearch serve`` whose head and body timeouts differ (``request.param``: the head's
    and the body's, one of them 0.5 s, the other far longer than any test waits)."""
    head, body = request.param
    served = serve(engine_url, tmp_path, "uneven", GOVSEARCH_API_HEAD_TIMEOUT=head,
                   GOVSEARCH_API_BODY_TIMEOUT=body,
                   GOVSEARCH_POLICIES_INDEX_PREFIX=f"slow-{uuid.uuid4().hex[:8]}")
    try:
        yield served.port, served.audit_path.parent
    finally:
        served.stop()


@pytest.mark.parametrize("uneven", [("600", BOUND_S)], indirect=True, ids=["head-600s-body-0.5s"])
def test_a_body_that_stops_is_cut_at_the_body_timeout_though_the_head_timeout_is_longer(
    uneven: tuple[int, Path],
) -> None:
    """The connection's one timer was armed, when the connection was made, for the head
    timeout; a body left incomplete then found it pending and did not arm it for its own,
    earlier, bound: the body stopped was held for the head timeout (600 s), not the body's."""
    with socket.create_connection(("127.0.0.1", uneven[0]), timeout=10) as sock:
        sock.sendall(_plain_search_head(len(SEARCH)) + SEARCH[:-1])
        received, closed = _rest(sock)
    _refused_and_recorded(uneven, received, closed)


@pytest.mark.parametrize("uneven", [(BOUND_S, "600")], indirect=True, ids=["head-0.5s-body-600s"])
def test_a_head_dripped_after_a_body_is_cut_at_the_head_timeout_though_the_body_timeout_is_longer(
    uneven: tuple[int, Path],
) -> None:
    """A search whose body came in two writes, apart by more than the head timeout (the
    timer, when it fires meanwhile, is armed again for the body's bound, 600 s), answered,
    then a head dripped on the same connection: its bound is the head's."""
    with socket.create_connection(("127.0.0.1", uneven[0]), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(_plain_search_head(len(SEARCH)) + SEARCH[:10])
        time.sleep(3 * float(BOUND_S))  # (the timer fires while the body is incomplete)
        sock.sendall(SEARCH[10:])
        (first,) = _read(sock, 1)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        _drip(sock, b"X-Slow: " + b"s" * 600)  # 30 s of bytes if nobody stops it
        received, closed = _rest(sock)
    assert " 408 " not in first[0]
    answers = _answers(received)
    assert len(answers) == 1, received[:300]
    _timed_out(answers[0], "headers")
    assert closed
