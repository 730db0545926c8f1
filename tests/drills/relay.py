"""A TCP relay between ``govsearch`` and a real engine, for the drills: a slow network path,
a request held on the wire, and a log of what was asked. It forwards the engine's bytes
unchanged and in order (it never invents, drops or alters an answer): it can only make
them late.

- ``latency_s``: every chunk of an answer leaves the relay that long after it came from
  the engine (a delay line: an engine that answers every call late, whatever its size);
- ``drip``: ``(piece, gap_s)``, an answer leaves in pieces of ``piece`` bytes, ``gap_s``
  apart (a slow link: a byte keeps coming, the whole answer takes long);
- ``hold(match)``: the first request whose ``(method, path)`` ``match`` accepts stops on
  the wire before the engine sees any of it (``held`` is set) until :meth:`release`;
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
        self._hold: Callable[[str, str], bool] | None = None
        self._released = threading.Event()
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

    def hold(self, match: Callable[[str, str], bool]) -> None:
        self.held.clear()
        self._released.clear()
        self._hold = match

    def release(self) -> None:
        self._hold = None
        self._released.set()

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
            threading.Thread(target=self._answers_in, args=(engine, answers), daemon=True).start()
            threading.Thread(target=self._answers_out, args=(client, engine, answers), daemon=True).start()

    def _requests(self, connection: int, client: socket.socket, engine: socket.socket) -> None:
        """Client to engine, unchanged; request heads logged; a matching one held."""
        buffer = b""
        skip = 0  # body bytes of the current request still to come
        try:
            while True:
                data = client.recv(_CHUNK)
                if not data:
                    break
                buffer += data
                while True:
                    if skip:
                        taken = min(skip, len(buffer))
                        skip -= taken
                        buffer = buffer[taken:]
                        if skip:
                            break
                    end = buffer.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    head, buffer = buffer[:end].decode("latin-1"), buffer[end + 4 :]
                    method, path, headers = _parse(head)
                    skip = int(headers.get("content-length", "0") or 0)
                    seen = Seen(time.monotonic(), connection, method, path, headers.get("user-agent"))
                    self.requests.append(seen)
                    match = self._hold
                    if match is not None and match(method, path):
                        self._hold = None
                        self.held.set()
                        self._released.wait()
                engine.sendall(data)
            with contextlib.suppress(OSError):
                engine.shutdown(socket.SHUT_WR)
        except OSError:
            _close(engine)
            _close(client)

    def _answers_in(
        self, engine: socket.socket,
        answers: queue.Queue[tuple[float, float, tuple[int, float] | None, bytes] | None],
    ) -> None:
        """Engine to the delay line: each chunk with the moment it arrived."""
        try:
            while True:
                data = engine.recv(_CHUNK)
                if not data:
                    break
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
