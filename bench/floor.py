"""The floor: the least a front end in Python costs in front of the engine.

``python -m bench.floor --engine-url URL --port P --bodies FILE [--workers N]`` serves
``POST /v1/search`` the way the thinnest possible governed service would, and nothing more:
uvloop's event loop, httptools' parser (what ``govsearch serve`` runs on), the request body
read as JSON, its intent looked up in ``FILE`` (intent -> the ``_msearch`` body govsearch sends
for it on a warm search, written by :mod:`bench.http`), that body sent through
govsearch's own engine client (:class:`~control_plane.engine.aio.AsyncEngine`, one kept-alive
connection per request in flight) and the engine's answer bytes sent back unchanged. No
policy, no plan cache, no record, no validation, no middleware, no logging.

``--pipeline`` (no ``--bodies``; the settings from the environment, as a ``govsearch serve``
worker reads them) serves instead with govsearch's own search pipeline and nothing of its
HTTP stack: the body validated as ``SearchBody``, the recorder's ``search_cached`` (the plan
cache, the tiers through the loop's engine client, the decision record appended and its
commit awaited; a search its cached plan does not serve runs ``Recorder.search`` in a
thread, as the API does), the answer built and serialised as ``POST /v1/search`` builds it.
No FastAPI, Starlette or uvicorn: no middleware, routing, dependency, body limit, deadline,
access log. It is not a server to deploy (no error shapes, no auth, no refusal records):
the difference between it and ``govsearch serve`` is what the HTTP stack costs; between it
and the floor, what the pipeline and the record cost.

It is a measuring instrument, not a server: :mod:`bench.http` runs it beside ``govsearch
serve`` and the raw engine, interleaved, so the figure sheet shows how much of governed
search's distance to the raw engine is the second HTTP hop through Python at all (the
floor / raw ratio), and how much is govsearch's own work (governed / floor). ``N`` worker
processes share the listening socket as ``govsearch serve --workers N``'s do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import uuid
from pathlib import Path
from typing import Any

import httptools
import uvloop

from control_plane.engine.aio import AsyncEngine

_HEAD = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"


class _Front(asyncio.Protocol):
    """One client connection: each request's body to the engine, the answer back."""

    def __init__(self, engine: AsyncEngine, bodies: dict[str, bytes]) -> None:
        self.engine = engine
        self.bodies = bodies
        self.parser = httptools.HttpRequestParser(self)
        self.transport: Any = None
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # uvloop's TCPTransport: not an asyncio.Transport subclass

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._send(400, b"Bad Request", b'{"error":"bad request"}')
            if self.transport is not None:
                self.transport.close()

    def on_message_begin(self) -> None:
        self.body = []

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        asyncio.get_running_loop().create_task(self._answer(b"".join(self.body)))

    async def _answer(self, raw: bytes) -> None:
        try:
            request = self.bodies[json.loads(raw)["intent"]]
            when = asyncio.get_running_loop().time() + self.engine.timeout_s
            status, payload = await self.engine._exchange(request, when)
        except Exception as error:  # an instrument: say what failed, keep serving
            self._send(500, b"Internal Server Error", json.dumps({"error": repr(error)}).encode())
            return
        self._send(status, b"OK" if status == 200 else b"Error", payload)

    def _send(self, status: int, reason: bytes, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_HEAD % (status, reason, len(payload)) + payload)


class _Pipeline(_Front):
    """One client connection served by govsearch's pipeline and recorder (``--pipeline``)."""

    def __init__(self, app: Any, engine: AsyncEngine) -> None:
        super().__init__(engine, {})
        self.app = app

    async def _answer(self, raw: bytes) -> None:
        from control_plane.api.answer import search_answer
        from control_plane.api.models import SearchBody

        service, recorder = self.app.state.service, self.app.state.recorder
        try:
            body = SearchBody.model_validate_json(raw)
            rid = uuid.uuid4().hex
            outcome = await recorder.search_cached(service, body, rid, None, engine=self.engine)
            if outcome is None:
                outcome = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: recorder.search(service, body, rid, None)
                )
            payload = search_answer(rid, body, outcome, service.profile)
        except Exception as error:  # an instrument: say what failed, keep serving
            self._send(500, b"Internal Server Error", json.dumps({"error": repr(error)}).encode())
            return
        self._send(200, b"OK", payload)


def _requests(engine: AsyncEngine, bodies: dict[str, str]) -> dict[str, bytes]:
    """The whole HTTP request to the engine for each intent, as the engine client frames it."""
    return {
        intent: engine.framed("POST", "/_msearch", body.encode("utf-8"), "application/x-ndjson")
        for intent, body in bodies.items()
    }


def _serve(sock: socket.socket, url: str, bodies: dict[str, str] | None) -> None:
    async def main() -> None:
        engine = AsyncEngine(url, 30.0, connections=64)
        loop = asyncio.get_running_loop()
        if bodies is None:
            from control_plane.api.worker import build

            app = build()  # the service, its recorder and writer, as a serve worker has them
            server = await loop.create_server(lambda: _Pipeline(app, engine), sock=sock)
        else:
            framed = _requests(engine, bodies)
            server = await loop.create_server(lambda: _Front(engine, framed), sock=sock)
        async with server:
            await server.serve_forever()

    uvloop.run(main())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bodies", type=Path, help="JSON: intent -> _msearch body (the floor)")
    parser.add_argument("--pipeline", action="store_true",
                        help="govsearch's pipeline and record without its HTTP stack, instead")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    if (args.bodies is None) != args.pipeline:
        parser.error("give --bodies (the floor) or --pipeline")
    bodies = None if args.pipeline else json.loads(args.bodies.read_text(encoding="utf-8"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(1024)
    sock.setblocking(False)
    for _ in range(args.workers - 1):  # the caller ends them all: one process group
        if os.fork() == 0:
            break
    _serve(sock, args.engine_url, bodies)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
