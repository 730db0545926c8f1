"""HTTP/1.1 framing of the engine client's exchange (:class:`control_plane.engine.wire.Wire`),
against a scripted HTTP peer on an ephemeral port: the framings the real engine does not send
on loopback (chunked, delimited by the connection's end, gzip, ``Connection: close``), broken
answers and silence. What is sent, and when a connection is reused or dropped, is checked on
the peer's side. The engine's own answers are tested against the real engine
(``tests/integration/test_engine_codec.py``)."""

from __future__ import annotations

import gzip
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import urllib3

from control_plane.engine.wire import Wire, WireError, WireTimeout


class Closing(bytes):
    """An answer after which the peer closes the connection."""


class Dripping(bytes):
    """An answer the peer sends one byte at a time, :data:`DRIP_GAP_S` apart."""


DRIP_GAP_S = 0.02


@dataclass
class Peer:
    """Accepts connections; answers each request with the next scripted raw answer (None:
    say nothing)."""

    answers: list[bytes | None]
    port: int = 0
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0

    def serve(self, server: socket.socket) -> None:
        while self.answers:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                self._answer_on(conn)

    def _answer_on(self, conn: socket.socket) -> None:
        buffer = b""
        while self.answers:
            while b"\r\n\r\n" not in buffer:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            head, _, rest = buffer.partition(b"\r\n\r\n")
            length = next(
                (int(line.split(b":")[1]) for line in head.split(b"\r\n")
                 if line.lower().startswith(b"content-length:")), 0
            )
            while len(rest) < length:
                rest += conn.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + rest[:length])
            buffer = rest[length:]
            answer = self.answers.pop(0)
            if answer is None:
                conn.recv(1)  # until the client gives up and closes
                return
            if isinstance(answer, Dripping):
                try:
                    for byte in answer:
                        conn.sendall(bytes([byte]))
                        time.sleep(DRIP_GAP_S)
                except OSError:  # the client gave up
                    return
                continue
            conn.sendall(answer)
            if b"content-length" not in answer.lower() and b"chunked" not in answer.lower():
                return  # delimited by the end of the connection
            if b"connection: close" in answer.lower() or isinstance(answer, Closing):
                return


@pytest.fixture()
def peer(request: pytest.FixtureRequest) -> Iterator[Peer]:
    scripted = Peer(list(request.param))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    scripted.port = server.getsockname()[1]
    thread = threading.Thread(target=scripted.serve, args=(server,), daemon=True)
    thread.start()
    yield scripted
    server.close()
    thread.join(timeout=5)


def _wire(peer: Peer) -> Wire:
    pool = urllib3.HTTPConnectionPool("127.0.0.1", peer.port, maxsize=1)
    return Wire(lambda: pool, {"user-agent": "t", "authorization": "Basic dTpw", "content-type": "x"})


def _ok(body: bytes, *extra: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + b"".join(extra)
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


CHUNKED = (
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    b"4;ext=1\r\n{\"a\"\r\n6\r\n: \"b\"}\r\n0\r\ntrailer: x\r\n\r\n"
)


@pytest.mark.parametrize(
    "peer", [[_ok(b'{"n":1}', b"warning: a\r\n", b"Warning: b\r\n"), CHUNKED]], indirect=True
)
def test_lengths_and_chunks_on_one_kept_connection(peer: Peer) -> None:
    wire = _wire(peer)
    first = wire.exchange("POST", "/i/_search?x=1", b'{"q":1}', "application/json", 5)
    second = wire.exchange("GET", "/", None, "application/json", 5)
    assert (first.status, first.body, first.headers["warning"]) == (200, b'{"n":1}', "a, b")
    assert second.body == b'{"a": "b"}'
    assert peer.connections == 1
    sent = peer.requests[0].split(b"\r\n")
    assert sent[0] == b"POST /i/_search?x=1 HTTP/1.1"
    assert {b"host: 127.0.0.1:%d" % peer.port, b"authorization: Basic dTpw",
            b"content-type: application/json", b"content-length: 7"} <= set(sent)
    assert sent[-1] == b'{"q":1}' and b"content-type: x" not in sent
    assert b"content-length" not in peer.requests[1]


@pytest.mark.parametrize(
    "peer",
    [[b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"end\": true}",
      _ok(gzip.compress(b'{"z":1}'), b"content-encoding: gzip\r\n", b"connection: close\r\n"),
      _ok(b"{}")]],
    indirect=True,
)
def test_an_answer_ended_by_the_connection_is_read_whole_and_not_reused(peer: Peer) -> None:
    wire = _wire(peer)
    assert wire.exchange("GET", "/a", None, "application/json", 5).body == b'{"end": true}'
    assert wire.exchange("GET", "/b", None, "application/json", 5).body == b'{"z":1}'
    assert wire.exchange("GET", "/c", None, "application/json", 5).body == b"{}"
    assert peer.connections == 3


@pytest.mark.parametrize(
    "peer",
    [[Closing(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{\"a\""),
      b"SSH-2.0-not-http\r\n\r\n",
      _ok(b"{}")]],
    indirect=True,
)
def test_a_truncated_or_foreign_answer_is_an_error_and_drops_the_connection(peer: Peer) -> None:
    wire = _wire(peer)
    with pytest.raises(WireError, match="closed the connection"):
        wire.exchange("GET", "/a", None, "application/json", 5)
    with pytest.raises(WireError, match="not an HTTP"):
        wire.exchange("GET", "/b", None, "application/json", 5)
    assert wire.exchange("GET", "/c", None, "application/json", 5).body == b"{}"
    assert peer.connections == 3


@pytest.mark.parametrize("peer", [[None, _ok(b'{"late": false}')]], indirect=True)
def test_silence_is_a_timeout_and_the_next_request_gets_its_own_answer(peer: Peer) -> None:
    wire = _wire(peer)
    with pytest.raises(WireTimeout):
        wire.exchange("GET", "/slow", None, "application/json", 0.2)
    assert wire.exchange("GET", "/next", None, "application/json", 5).body == b'{"late": false}'
    assert peer.connections == 2


@pytest.mark.parametrize("peer", [[Dripping(_ok(b'{"n": 1}' * 20)), _ok(b'{"late": false}')]], indirect=True)
def test_an_answer_that_keeps_coming_byte_by_byte_times_out_by_the_whole_timeout(peer: Peer) -> None:
    """A byte every 20 ms never leaves a read waiting 0.3 s; the whole answer (about 4 s of
    it) does not come within 0.3 s: the exchange times out then, not once it is in."""
    wire = _wire(peer)
    started = time.monotonic()
    with pytest.raises(WireTimeout):
        wire.exchange("GET", "/drip", None, "application/json", 0.3)
    assert time.monotonic() - started < 1.5  # the timeout, and a generous margin; not the ~4 s drip
    assert wire.exchange("GET", "/next", None, "application/json", 5).body == b'{"late": false}'


def test_a_refused_connection_is_an_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
        wire = Wire(lambda: urllib3.HTTPConnectionPool("127.0.0.1", port), {})
        with pytest.raises(WireError) as refused:
            wire.exchange("GET", "/", None, "application/json", 1)
        assert not isinstance(refused.value, WireTimeout)


def test_over_tls_a_slowly_read_request_times_out_by_the_whole_timeout(tmp_path: Path) -> None:
    """A large body to an engine over TLS that reads 16 KB every 50 ms (8 MB would take
    25 s): the exchange fails at its timeout. (``ssl``'s write gives one deadline to the
    whole of each write, and ``sendall`` over TLS is one write: checked, since a plain
    socket's ``sendall`` is bounded as a whole only since Python 3.5.)"""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
         str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    stop = threading.Event()

    def slow_reader() -> None:
        try:
            conn, _ = server.accept()
            with context.wrap_socket(conn, server_side=True) as tls:
                while not stop.is_set() and tls.recv(16384):
                    time.sleep(0.05)
        except OSError:
            return

    thread = threading.Thread(target=slow_reader, daemon=True)
    thread.start()
    pool = urllib3.HTTPSConnectionPool("127.0.0.1", port, maxsize=1, cert_reqs="CERT_NONE")
    wire = Wire(lambda: pool, {})
    started = time.monotonic()
    try:
        with pytest.raises(WireTimeout):
            wire.exchange("POST", "/_bulk", b"x" * 8_000_000, "application/x-ndjson", 0.5)
        assert time.monotonic() - started < 3  # the timeout and a generous margin; not ~30 s
    finally:
        stop.set()
        server.close()
        thread.join(timeout=5)
