"""The search lane on the wire (ADR 0057) answers exactly as uvicorn and the app do.

Two servers over two services on the real engine, alike but for the protocol they run
(:class:`~control_plane.api.wire_lane.WireLaneProtocol` and uvicorn's own, with the head's
bounds), each with its own audit log. The same corpus of raw HTTP requests goes to both,
case by case: every answer must be the same bytes (but for the ``date`` header and the
request id) and leave the same decision record (or the same absence of one), and the lane
must serve exactly the cases it is meant to, every other one going to the app. Then what
the lane leaves to uvicorn: a kept-alive connection, pipelined requests, ``Connection:
close``, HTTP/1.0.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

import control_plane.api.app as app_module
import control_plane.api.wire_lane as wire_module
from control_plane.api import create_app
from control_plane.api.fast_lane import LanedApp
from control_plane.api.limits import RequestDeadline
from control_plane.api.serving import BoundedHttpToolsProtocol
from control_plane.api.wire_lane import WireLane, WireLaneProtocol
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import AuditSettings, Settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from tests.api.test_fast_lane import VOLATILE, as_is, engine_down, engine_silent  # (any .app's loop engine)
from tests.clocks import FIXED_CLOCK
from tests.e2e.conftest import ready, settings  # noqa: F401

DEADLINE_S = 3.0
RID = re.compile(rb"[0-9a-f]{32}")


class Server:
    def __init__(self, name: str, app: LanedApp, service: SearchService, protocol: type) -> None:
        self.name, self.app, self.service = name, app, service
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", http=protocol, timeout_keep_alive=30)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, f"{name} did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()
        self.service.close()


@pytest.fixture(scope="module")
def servers(
    engine: Engine, settings: Settings, ready: Ready, tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
) -> Iterator[dict[str, Server]]:
    directory: Path = tmp_path_factory.mktemp("wire")
    made: dict[str, Server] = {}
    try:
        for name, protocol in (("wire", WireLaneProtocol), ("uvicorn", BoundedHttpToolsProtocol)):
            own = settings.model_copy(update={
                "audit": AuditSettings(
                    path=str(directory / f"{name}.jsonl"), key_file=str(directory / f"{name}.key")
                ),
                # watched values never due during the test: the same requests, the same paths
                "search": settings.search.model_copy(update={"alias_watch_interval_s": 3600.0}),
                "api": settings.api.model_copy(
                    update={"request_deadline_s": DEADLINE_S, "max_body_bytes": 4096}
                ),
            })
            service = SearchService(own, engine, profile_of(own))
            app = create_app(service, clock=FIXED_CLOCK)
            assert isinstance(app, LanedApp)
            made[name] = Server(name, app, service, protocol)
        yield made
    finally:
        for server in made.values():
            server.stop()


@pytest.fixture()
def app_calls(monkeypatch: pytest.MonkeyPatch) -> dict[int, int]:
    """How many requests each app was called for (the wire lane's never reach it)."""
    calls: dict[int, int] = {}
    original = LanedApp.__call__

    async def counted(self: LanedApp, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            calls[id(self)] = calls.get(id(self), 0) + 1
        await original(self, scope, receive, send)

    monkeypatch.setattr(LanedApp, "__call__", counted)
    return calls


def _exchange(port: int, raw: bytes, answers: int = 1, *, closes: bool = False) -> list[bytes]:
    """Send ``raw`` on a new connection; the ``answers`` answers read whole (``closes``: and
    then the connection closed by the server)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(raw)
        return _answers(conn, answers, closes=closes)


def _answers(conn: socket.socket, answers: int = 1, *, closes: bool = False) -> list[bytes]:
    """The next ``answers`` answers on ``conn``, read whole (``closes``: and then the
    connection closed by the server)."""
    buffer = b""
    read: list[bytes] = []
    while len(read) < answers:
        while b"\r\n\r\n" not in buffer:
            chunk = conn.recv(65536)
            assert chunk, f"the connection closed after {len(read)} answers: {buffer!r}"
            buffer += chunk
        head, _, rest = buffer.partition(b"\r\n\r\n")
        if head.startswith(b"HTTP/1.1 1"):  # an interim answer (100 Continue): kept with the next
            read.append(head + b"\r\n\r\n")
            buffer = rest
            answers += 1
            continue
        length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(rest) < length:
            chunk = conn.recv(65536)
            assert chunk, "the connection closed inside a body"
            rest += chunk
        read.append(head + b"\r\n\r\n" + rest[:length])
        buffer = rest[length:]
    if closes:
        assert buffer == b"" and conn.recv(1) == b"", "the connection was not closed"
    return read


def _request(body: bytes | None, headers: dict[str, str], *, method: str = "POST",
             target: str = "/v1/search", version: str = "1.1") -> bytes:
    lines = [f"{method} {target} HTTP/{version}", "host: testserver"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None:
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def _kept(answer: bytes) -> tuple[bytes, list[str]]:
    """The answer without what differs between two servers answering the same request:
    the ``date`` header's value and the request id."""
    body = answer.rpartition(b"\r\n\r\n")[2]  # (after any interim answer)
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    rid = None
    if isinstance(data, dict):
        rid = data.get("request_id") or (data.get("error") or {}).get("request_id")
    if isinstance(rid, str):
        assert RID.fullmatch(rid.encode()), rid
        answer = answer.replace(rid.encode(), b"RID")
    answer = re.sub(rb"(?im)^date: [^\r]*\r\n", b"date: DATE\r\n", answer)
    return answer, [rid] if isinstance(rid, str) else []


def _record(server: Server, request_id: str | None) -> dict[str, Any] | None:
    if request_id is None:
        return None
    found = server.service.recorder.find(request_id)  # type: ignore[union-attr]
    if found is None:
        return None
    record = {key: value for key, value in found.items() if key not in VOLATILE}
    record["tiers"] = [{k: v for k, v in t.items() if k != "took_ms"} for t in record.get("tiers") or ()]
    return record


@contextmanager
def answer_fails(servers: list[Server], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The answer's build raises after the search was recorded: the app's 500."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the answer could not be built")

    with monkeypatch.context() as patch:
        patch.setattr(app_module, "search_answer", broken)
        patch.setattr(wire_module, "search_answer", broken)
        yield


JSON = {"content-type": "application/json"}
SEARCH = json.dumps({"intent": "chocolat sans arachide", "size": 4}).encode()
Case = tuple[str, bytes, bool, Callable[..., Any]]
"""(case, the raw request, whether the wire lane serves it, context)"""


def _json(data: Any) -> bytes:
    return json.dumps(data).encode()


def cases(served: str) -> list[Case]:
    return [
        ("plain, cold", _request(SEARCH, JSON), True, as_is),
        ("plain, warm", _request(SEARCH, JSON), True, as_is),
        ("another intent", _request(_json({"intent": "cheap chocolate"}), JSON), True, as_is),
        ("upper-case content type", _request(SEARCH, {"content-type": "Application/JSON"}), True, as_is),
        ("the catalog served, named", _request(_json({"intent": "orange juice", "catalog": served}), JSON),
         True, as_is),
        ("lax coercion", _request(_json({"intent": "orange juice", "size": "3"}), JSON), True, as_is),
        ("client id header", _request(SEARCH, {**JSON, "x-client-id": "shop-1"}), True, as_is),
        ("client id header, not an identifier", _request(SEARCH, {**JSON, "x-client-id": "a b"}),
         True, as_is),
        ("govsearch client header", _request(SEARCH, {**JSON, "x-govsearch-client": "shop-2"}), True, as_is),
        ("engine down", _request(SEARCH, JSON), True, engine_down),
        ("deadline exceeded", _request(SEARCH, JSON), True, engine_silent),
        ("the answer's build fails", _request(SEARCH, JSON), True, answer_fails),
        # the app's
        ("explain", _request(_json({"intent": "cheap chocolate", "explain": True}), JSON), False, as_is),
        ("now", _request(_json({"intent": "cheap chocolate", "now": "2026-01-01T00:00:00Z"}), JSON),
         False, as_is),
        ("catalog not served", _request(_json({"intent": "cheap chocolate", "catalog": "elsewhere"}), JSON),
         False, as_is),
        ("query string", _request(SEARCH, JSON, target="/v1/search?x=1"), False, as_is),
        ("percent-encoded path", _request(SEARCH, JSON, target="/v1/%73earch"), False, as_is),
        ("forwarded by a trusted proxy", _request(SEARCH, {**JSON, "x-forwarded-for": "10.1.2.3"}),
         False, as_is),
        ("expect 100-continue", _request(SEARCH, {**JSON, "expect": "100-continue"}), False, as_is),
        ("malformed JSON", _request(b'{"intent": "choc', JSON), False, as_is),
        ("an array", _request(b'[{"intent": "chocolate"}]', JSON), False, as_is),
        ("invalid field", _request(_json({"intent": "chocolate", "size": -1}), JSON), False, as_is),
        ("unknown field", _request(_json({"intent": "chocolate", "colour": "red"}), JSON), False, as_is),
        ("charset parameter", _request(SEARCH, {"content-type": "application/json; charset=utf-8"}),
         False, as_is),
        ("two content types", _request(SEARCH, {**JSON, "Content-Type": "application/json"}), False, as_is),
        ("no content type", _request(SEARCH, {}), False, as_is),
        ("oversize, declared", _request(_json({"intent": "c" * 5000}), JSON), False, as_is),
        ("chunked", b"POST /v1/search HTTP/1.1\r\nhost: testserver\r\ncontent-type: application/json\r\n"
         b"transfer-encoding: chunked\r\n\r\n" + b"%x\r\n" % len(SEARCH) + SEARCH + b"\r\n0\r\n\r\n",
         False, as_is),
        ("GET", _request(None, {}, method="GET"), False, as_is),
    ]


def test_the_wire_lane_answers_and_records_every_request_as_uvicorn_and_the_app_do(
    servers: dict[str, Server], app_calls: dict[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    wire, plain = servers["wire"], servers["uvicorn"]
    seen = set()
    laned = 0
    for case, raw, by_lane, context in cases(wire.service.settings.selected_catalog):
        answers = []
        with context([wire, plain], monkeypatch):
            for server in (wire, plain):
                before = app_calls.get(id(server.app), 0)
                answer = b"".join(_exchange(server.port, raw))
                kept, ids = _kept(answer)
                answers.append((kept, _record(server, ids[0] if ids else None),
                                app_calls.get(id(server.app), 0) - before))
        (*by_the_wire, wire_calls), (*by_uvicorn, uvicorn_calls) = answers
        assert by_the_wire == by_uvicorn, case  # the same bytes, the same record
        assert uvicorn_calls == 1, case
        assert wire_calls == (0 if by_lane else 1), case  # the lane served it, or the app did
        laned += by_lane
        seen.add(int(by_the_wire[0].split(b" ")[1]))
    assert laned >= 10
    assert {200, 400, 405, 413, 422, 500, 503} <= seen, seen


def test_the_lane_serves_a_kept_alive_connection_and_pipelined_searches_in_order(
    servers: dict[str, Server], app_calls: dict[int, int]
) -> None:
    """Three searches in one write on one connection, then a fourth that closes it: four
    answers in the order asked, the last with ``connection: close`` and the connection
    closed; the same bytes from both servers."""
    intents = ("cheap chocolate", "orange juice", "chocolat sans arachide", "tea")
    raw = b"".join(_request(_json({"intent": intent}), JSON) for intent in intents[:3])
    raw += _request(_json({"intent": intents[3]}), {**JSON, "connection": "close"})
    results = {}
    for name, server in servers.items():
        before = app_calls.get(id(server.app), 0)
        answers = _exchange(server.port, raw, answers=4, closes=True)
        assert app_calls.get(id(server.app), 0) - before == (0 if name == "wire" else 4)
        ids = [json.loads(answer.partition(b"\r\n\r\n")[2])["request_id"] for answer in answers]
        asked = [server.service.recorder.find(rid)["intent"] for rid in ids]  # type: ignore[union-attr, index]
        assert asked == list(intents), name
        assert b"connection: close" in answers[3].lower() and b"connection: close" not in answers[0].lower()
        results[name] = [_kept(answer)[0] for answer in answers]
    assert results["wire"] == results["uvicorn"]


def test_laned_and_app_requests_mixed_on_one_connection_are_answered_as_uvicorn_answers_them(
    servers: dict[str, Server], app_calls: dict[int, int]
) -> None:
    """In one write on one connection: a search declaring more than the limit (the app
    refuses it without reading its body), a plain search, a ``GET``, a search the lane reads
    and hands on (``explain``, refused without a key), a ``POST`` the router refuses
    unread (405), a plain search with ``Connection: close``, then one more (never read):
    the same answers in order, the same records, from both servers."""
    raw = b"".join((
        _request(_json({"intent": "c" * 5000}), JSON),
        _request(SEARCH, JSON),
        _request(None, {}, method="GET", target="/healthz"),
        _request(_json({"intent": "tea", "explain": True}), JSON),
        _request(SEARCH, JSON, target="/healthz"),
        _request(_json({"intent": "orange juice"}), {**JSON, "connection": "close"}),
        _request(SEARCH, JSON),
    ))
    results = {}
    for name, server in servers.items():
        before = app_calls.get(id(server.app), 0)
        answers = _exchange(server.port, raw, answers=6, closes=True)
        assert app_calls.get(id(server.app), 0) - before == (4 if name == "wire" else 6), name
        kept = [_kept(answer) for answer in answers]
        results[name] = [(answer, _record(server, ids[0] if ids else None)) for answer, ids in kept]
    assert [answer.split(b" ")[1] for answer, _ in results["wire"]] == [
        b"413", b"200", b"200", b"401", b"405", b"200",
    ]
    assert results["wire"] == results["uvicorn"]


def test_an_http_1_0_search_is_answered_and_its_connection_closed(
    servers: dict[str, Server], app_calls: dict[int, int]
) -> None:
    results = {}
    for name, server in servers.items():
        before = app_calls.get(id(server.app), 0)
        (answer,) = _exchange(server.port, _request(SEARCH, JSON, version="1.0"), closes=True)
        assert answer.startswith(b"HTTP/1.1 200 "), (name, answer[:80])
        assert app_calls.get(id(server.app), 0) - before == (0 if name == "wire" else 1)
        results[name] = _kept(answer)[0]
    assert results["wire"] == results["uvicorn"]


def _request_deadlines(app: LanedApp) -> list[RequestDeadline]:
    """The app's ``RequestDeadline`` middleware (in its built stack)."""
    found, layer = [], app.middleware_stack
    while layer is not None:
        if isinstance(layer, RequestDeadline):
            found.append(layer)
        layer = getattr(layer, "app", None)
    return found


def test_a_search_handed_to_the_app_has_its_deadline_counted_from_when_it_arrived(
    servers: dict[str, Server], app_calls: dict[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search whose body the lane read, then handed to the app (``explain``, answered by
    the app's fast lane; any search while the app has dependency overrides, answered by its
    stack), has the request deadline counted from when it arrived, its body's upload
    included, as the app counts it when it reads the body itself: a body that took longer
    than the deadline gets 503 ``deadline_exceeded`` from both servers (not a deadline
    counted afresh from the hand-off), with the same record."""
    deadline_s = 1.0
    for server in servers.values():
        monkeypatch.setattr(server.app, "lane_deadline_s", deadline_s)
        (stacked,) = _request_deadlines(server.app)
        monkeypatch.setattr(stacked, "seconds", deadline_s)

    async def open_internals(request: Any, what: str) -> None:
        return None

    monkeypatch.setattr(app_module, "require_internals", open_internals)
    explain = _request(_json({"intent": "cheap chocolate", "explain": True}), JSON)
    for case, overridden in (("explain", False), ("dependency overrides", True)):
        if overridden:
            for server in servers.values():
                monkeypatch.setitem(server.app.dependency_overrides, _request_deadlines, lambda: None)
        raw = explain if not overridden else _request(SEARCH, JSON)
        conns = {
            name: socket.create_connection(("127.0.0.1", server.port), timeout=30)
            for name, server in servers.items()
        }
        try:
            for conn in conns.values():
                conn.sendall(raw[:-1])  # the head and the body but its last byte
            time.sleep(deadline_s + 0.2)  # the deadline passes while the body is still coming
            results = {}
            for name, conn in conns.items():
                conn.sendall(raw[-1:])
                kept, ids = _kept(b"".join(_answers(conn)))
                results[name] = (kept, _record(servers[name], ids[0] if ids else None))
        finally:
            for conn in conns.values():
                conn.close()
        assert results["wire"] == results["uvicorn"], case
        assert results["wire"][0].startswith(b"HTTP/1.1 503 "), (case, results["wire"][0][:200])
        assert b'"deadline_exceeded"' in results["wire"][0], case


def test_no_wire_lane_when_searches_need_a_key_or_the_fast_lane_is_off(
    settings: Settings, engine: Engine, ready: Ready, tmp_path: Path  # noqa: F811
) -> None:
    """The lane serves only what the app's own fast lane would, keyless: with
    ``auth.search_requires_key`` or ``api.fast_lane: false``, every search goes to the app."""
    for update in ({"auth": settings.auth.model_copy(update={"search_requires_key": True})},
                   {"api": settings.api.model_copy(update={"fast_lane": False})}):
        own = settings.model_copy(update={
            **update, "audit": AuditSettings(path=str(tmp_path / "d.jsonl"), key_file=str(tmp_path / "k")),
        })
        service = SearchService(own, engine, profile_of(own))
        try:
            app = create_app(service, clock=FIXED_CLOCK)
            assert WireLane.of(app) is None
        finally:
            service.close()
