"""The HTTP cycle in process (ADR 0045): the event loop's CPU that one keep-alive request
costs uvicorn's httptools protocol, against the least an httptools protocol can do, with
no socket, no engine and no app work.

``python -m bench.http_cycle [--rounds 7] [--requests 20000] [--out FILE]`` feeds the same
``POST /v1/search`` (the headers an httpx client sends, a 20-byte JSON body) to one
connection of each protocol on a uvloop loop, through a transport that only keeps what is
written, and answers every request with the same 2,700 bytes (about a warm search answer):

- ``bare``: httptools' parser and one write of head and body (what ``bench.floor`` serves
  with);
- ``uvicorn``: uvicorn's ``HttpToolsProtocol`` as ``govsearch serve`` configures it (proxy
  headers on, keep-alive, the ``date`` and ``server`` headers its server adds), an ASGI app
  that reads the body and sends the two messages, no access line (``api.access_log: false``);
- ``uvicorn_access``: the same, with the access line ``govsearch serve`` writes
  (``serving.log_config``'s formatter, ``lean_log_records``), to a file.

It keeps the minimum over the rounds of the **thread CPU** per request
(``time.thread_time``), in microseconds, the variants alternating every round. The figures
are the cost of the protocol itself, less noisy than a server measured over loopback on a
shared machine. Every answer must reach the transport whole (status line, body, and for
``uvicorn_access`` one access line per request), or the bench ends. Writes
``bench/results/<UTC date>-http-cycle.json`` with the command, the machine and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import logging.config
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import httptools
import uvloop
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from bench import environment
from control_plane.api.serving import lean_log_records, log_config
from control_plane.times import system_clock

RESULTS = Path(__file__).resolve().parent / "results"
BODY = b'{"intent":"oranges"}'
REQUEST = (
    b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept: */*\r\n"
    b"Accept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\nUser-Agent: python-httpx/0.28.1\r\n"
    b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n" % len(BODY)
) + BODY
ANSWER = b"x" * 2700
DATE = b"Wed, 02 Dec 2026 06:00:00 GMT"
"""a ``date`` header as uvicorn's server writes it (which instant does not matter here)"""
VARIANTS = ("bare", "uvicorn", "uvicorn_access")


class Kept:
    """A transport that keeps the number of writes and of answers written (a write that
    ends with the answer's body: ``bare`` writes head and body at once, uvicorn the body
    alone)."""

    def __init__(self) -> None:
        self.writes = 0
        self.answers = 0
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.answers += data.endswith(ANSWER)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 5555)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class Bare(asyncio.Protocol):
    """httptools' parser; each request answered by one write, as ``bench.floor`` does."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self.body = []

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        asyncio.get_running_loop().create_task(self._answer(b"".join(self.body)))

    async def _answer(self, raw: bytes) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        self.transport.write(head % len(ANSWER) + ANSWER)


async def answering(scope: Any, receive: Any, send: Any) -> None:
    """The ASGI app: the body read, the answer sent as two messages."""
    await receive()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2700"), (b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": ANSWER})


def connection(variant: str, loop: asyncio.AbstractEventLoop, access: TextIO) -> tuple[Any, Kept]:
    """A protocol of ``variant`` connected to a :class:`Kept` transport (uvicorn's access
    line into ``access``)."""
    transport = Kept()
    protocol: Any
    if variant == "bare":
        protocol = Bare()
    else:
        config = Config(answering, access_log=variant == "uvicorn_access", log_config=None)
        config.load()
        if config.access_log:  # configured after the Config, which drops the access handlers when off
            _access_log(access)
        state = ServerState()  # the headers a running server sets on each tick: date, server
        state.default_headers = [(b"date", DATE), *config.encoded_headers]
        protocol = HttpToolsProtocol(config, state, app_state={}, _loop=loop)
    protocol.connection_made(transport)
    return protocol, transport


def _access_log(stream: TextIO) -> None:
    """The access line of ``govsearch serve`` (its logging configuration), into ``stream``."""
    logging.config.dictConfig(log_config())
    handler = logging.getLogger("uvicorn.access").handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)


@contextmanager
def _logging_as_served() -> Iterator[None]:
    """``lean_log_records`` and uvicorn's loggers as configured meanwhile; both as they were after."""
    switches = ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing")
    kept = {name: getattr(logging, name) for name in switches}
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "uvicorn.access")]
    states = [(logger.handlers[:], logger.level, logger.propagate, logger.disabled) for logger in loggers]
    lean_log_records()
    try:
        yield
    finally:
        for name, value in kept.items():
            setattr(logging, name, value)
        for logger, (handlers, level, propagate, disabled) in zip(loggers, states, strict=True):
            logger.handlers[:], logger.level = handlers, level
            logger.propagate, logger.disabled = propagate, disabled


def measure(rounds: int, requests: int) -> dict[str, Any]:
    """Per variant: the minimum over ``rounds`` of the thread CPU per request, in us."""
    loop = uvloop.new_event_loop()
    samples: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="govsearch-bench-http-cycle-") as directory, \
            _logging_as_served():
        access_file = Path(directory) / "access.log"
        with access_file.open("a", encoding="utf-8") as access:
            try:
                for number in range(rounds + 1):  # the first round warms up
                    order = VARIANTS if number % 2 == 0 else VARIANTS[::-1]
                    for variant in order:
                        protocol, transport = connection(variant, loop, access)
                        lines = _lines(access_file)
                        spent = loop.run_until_complete(_drive(protocol.data_received, requests))
                        access.flush()
                        _check(variant, transport, requests, _lines(access_file) - lines)
                        protocol.connection_lost(None)  # uvicorn's keep-alive timer cancelled
                        if number:
                            samples[variant].append(spent * 1e6 / requests)
            finally:
                loop.close()
    best = {variant: round(min(values), 2) for variant, values in samples.items()}
    return {"rounds": rounds, "requests": requests, "cpu_us_per_request": best,
            "uvicorn_over_bare_us": round(best["uvicorn"] - best["bare"], 2),
            "access_line_us": round(best["uvicorn_access"] - best["uvicorn"], 2)}


async def _drive(feed: Callable[[bytes], None], requests: int) -> float:
    """Feed ``requests`` requests, one at a time (each answered before the next, as a
    keep-alive client does); the loop thread's CPU seconds it took."""
    started = time.thread_time()
    for _ in range(requests):
        feed(REQUEST)
        await asyncio.sleep(0)  # the request's task runs
        await asyncio.sleep(0)  # ... and finishes
    return time.thread_time() - started


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _check(variant: str, transport: Kept, requests: int, lines: int) -> None:
    if transport.closed:
        raise SystemExit(f"{variant}: the protocol closed a keep-alive connection")
    if transport.answers != requests:
        raise SystemExit(f"{variant}: {transport.answers} answers written for {requests} requests")
    expected = requests if variant == "uvicorn_access" else 0
    if lines != expected:
        raise SystemExit(f"{variant}: {lines} access lines for {requests} requests (expected {expected})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http_cycle", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=20000, help="requests per round and variant")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-http-cycle.json)")
    args = parser.parse_args(argv)
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-http-cycle.json"
    command = "python -m bench.http_cycle " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = environment.recorded(command, out, lambda: {"http_cycle": measure(args.rounds, args.requests)})
    figures = result["http_cycle"]
    print("| protocol | loop CPU us per request |\n| --- | --- |")
    for variant, value in figures["cpu_us_per_request"].items():
        print(f"| {variant} | {value} |")
    loads = f"{result['load_average_at_start']} -> {result['load_average_at_end']}"
    print(f"\nuvicorn over bare {figures['uvicorn_over_bare_us']} us, access line"
          f" {figures['access_line_us']} us; load average {loads}; written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
