"""A TCP relay between ``govsearch`` and a real engine, for the drills: a slow network path,
a request held on the wire, and a log of what was asked. It forwards the engine's bytes
unchanged and in order (it never invents, drops or alters an answer): it can only make
them late.

- ``latency_s``: every chunk of an answer leaves the relay that long after it came from
  the engine (a delay line: an engine that answers every call late, whatever its size);
- ``drip``: ``(piece, gap_s)``, an answer leaves in pieces of ``piece`` bytes, ``gap_s``
  apart (a slow link: a byte keeps coming, the whole answer takes long);
- ``hold(match, body=None)``: the first request whose ``(method, path)`` ``match`` accepts
  (and, with ``body``, whose whole body it accepts) stops on the wire before the engine sees
  any of it (``held`` is set) until :meth:`release`, or :meth:`cut` (it never reaches the
  engine: its connection is closed, like a process killed before its request left, or a
  network cut); after a release, the first bytes of the engine's answer to it are in
  ``held_answer`` (``answered`` is set), even when its client is gone;
- ``requests``: every request seen, ``(time.monotonic(), connection, method, path,
  user agent)``, read from the request heads (bodies are skipped by their length).

Settings may change while connections are open; a chunk is delayed by the settings of the
moment it arrived. Threads only, one listening socket on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

_CHUNK = 65536


@dataclass(frozen=True)
class Seen:
    at: float
    """``time.monotonic()`` when the head was read"""
    connection: int
    method: str
    path: str
    user_agent: str | None


class Relay:
    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").rstrip("/").rpartition(":")
        self.upstream = (host, int(port))
        self.latency_s = 0.0
        self.drip: tuple[int, float] | None = None
        self.requests: list[Seen] = []
        self.held = threading.Event()
        self.answered = threading.Event()
        self.held_answer = b""
        self._hold: Callable[[str, str], bool] | None = None
        self._hold_body: Callable[[bytes], bool] | None = None
        self._released = threading.Event()
        self._cut = False
        self._held_connection: int | None = None
        self._capture: int | None = None
        self._ids = itertools.count(1)
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, name="relay-accept", daemon=True).start()

    # --- control ----------------------------------------------------------------------

    def slow(self, latency_s: float = 0.0, drip: tuple[int, float] | None = None) -> None:
        self.latency_s, self.drip = latency_s, drip

    def hold(self, match: Callable[[str, str], bool], body: Callable[[bytes], bool] | None = None) -> None:
        self.held.clear()
        self.answered.clear()
        self.held_answer = b""
        self._released.clear()
        self._cut = False
        self._held_connection = self._capture = None
        self._hold, self._hold_body = match, body

    def release(self) -> None:
        self._hold = self._hold_body = None
        self._capture = self._held_connection
        self._released.set()

    def cut(self) -> None:
        """The held request never reaches the engine: its connection is closed."""
        self._hold = self._hold_body = None
        self._cut = True
        self._released.set()

    def held_status(self) -> int | None:
        """The status of the engine's answer to the held request, once it came."""
        line = self.held_answer.split(b"\r\n", 1)[0].split()
        return int(line[1]) if len(line) > 1 and line[1].isdigit() else None

    def close(self) -> None:
        self._closed = True
        self.release()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _close(sock)

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- pumps --------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            connection = next(self._ids)
            try:
                engine = socket.create_connection(self.upstream, timeout=10)
                engine.settimeout(None)
            except OSError:  # the engine is gone: the client sees its connection closed
                _close(client)
                continue
            for sock in (client, engine):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets.update((client, engine))
            answers: queue.Queue[tuple[float, float, tuple[int, float] | None, bytes] | None] = queue.Queue()
            threading.Thread(target=self._requests, args=(connection, client, engine), daemon=True).start()
            threading.Thread(
                target=self._answers_in, args=(connection, engine, answers), daemon=True
            ).start()
            threading.Thread(target=self._answers_out, args=(client, engine, answers), daemon=True).start()

    def _requests(self, connection: int, client: socket.socket, engine: socket.socket) -> None:
        """Client to engine, unchanged and in order; request heads logged; a matching
        request held (a head goes on once whole, and a request a body test is asked about
        once its body is whole)."""
        pending = bytearray()  # received, not forwarded yet
        skip = 0  # body bytes of the current request still to forward
        logged = False
        try:
            while True:
                data = client.recv(_CHUNK)
                if not data:
                    break
                pending += data
                while pending:
                    if skip:
                        taken = min(skip, len(pending))
                        engine.sendall(pending[:taken])
                        del pending[:taken]
                        skip -= taken
                        continue
                    end = pending.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    method, path, headers = _parse(pending[:end].decode("latin-1"))
                    length = int(headers.get("content-length", "0") or 0)
                    if not logged:
                        self.requests.append(
                            Seen(time.monotonic(), connection, method, path, headers.get("user-agent"))
                        )
                        logged = True
                    if self._body_pending(method, path, len(pending) - end - 4, length):
                        break  # the whole body first: the hold is asked about it
                    if self._picks(method, path, bytes(pending[end + 4 : end + 4 + length])):
                        self._held_connection = connection
                        self.held.set()
                        self._released.wait()
                        if self._cut:
                            _close(engine)
                            _close(client)
                            return
                    engine.sendall(pending[: end + 4])
                    del pending[: end + 4]
                    skip, logged = length, False
            if pending:
                engine.sendall(pending)
        except OSError:
            self._answer_first(connection)
            _close(engine)
            _close(client)
            return
        self._answer_first(connection)
        with contextlib.suppress(OSError):
            engine.shutdown(socket.SHUT_WR)

    def _answer_first(self, connection: int) -> None:
        """A released held request whose client is gone (killed while it was held): the
        engine answers it before its connection closes (a request that left a dead process
        still reaches the engine, and is answered to nobody)."""
        if self._capture == connection:
            self.answered.wait(30)

    def _body_pending(self, method: str, path: str, have: int, length: int) -> bool:
        match, body = self._hold, self._hold_body
        return match is not None and body is not None and have < length and match(method, path)

    def _picks(self, method: str, path: str, body: bytes) -> bool:
        with self._lock:
            match, test = self._hold, self._hold_body
            if match is None or not match(method, path) or (test is not None and not test(body)):
                return False
            self._hold = self._hold_body = None
            return True

    def _answers_in(
        self, connection: int, engine: socket.socket,
        answers: queue.Queue[tuple[float, float, tuple[int, float] | None, bytes] | None],
    ) -> None:
        """Engine to the delay line: each chunk with the moment it arrived (and the answer to
        a released held request kept)."""
        try:
            while True:
                data = engine.recv(_CHUNK)
                if not data:
                    break
                if self._capture == connection and not self.answered.is_set():
                    self.held_answer = data
                    self.answered.set()
                answers.put((time.monotonic(), self.latency_s, self.drip, data))
        except OSError:
            pass
        answers.put(None)

    def _answers_out(
        self, client: socket.socket, engine: socket.socket,
        answers: queue.Queue[tuple[float, float, tuple[int, float] | None, bytes] | None],
    ) -> None:
        """The delay line to the client: each chunk ``latency_s`` after it arrived, dripped
        when asked; at the engine's end, the client's connection closes."""
        try:
            while (item := answers.get()) is not None:
                arrived, latency, drip, data = item
                wait = arrived + latency - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if drip is None:
                    client.sendall(data)
                    continue
                piece, gap = drip
                for start in range(0, len(data), piece):
                    if start:
                        time.sleep(gap)
                    client.sendall(data[start : start + piece])
        except OSError:
            pass
        _close(client)
        _close(engine)
        with self._lock:
            self._sockets.difference_update((client, engine))


def _parse(head: str) -> tuple[str, str, dict[str, str]]:
    lines = head.split("\r\n")
    method, _, rest = lines[0].partition(" ")
    path = rest.rpartition(" ")[0] or rest
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return method, path, headers


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
