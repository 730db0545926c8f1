"""The search fast lane (ADR 0036) answers exactly as the middleware stack does.

Two apps over two services on the real engine, alike but for ``api.fast_lane``, each with
its own audit log, search keys required (so the guard refuses too) and a short request
deadline. The same corpus of requests goes to both, case by case in the same order: every
answer must have the same status, the same headers that matter, the same body but for the
request id, and the same decision record (or the same absence of one); and the lane must
answer exactly the cases it is meant to (the stack of the laned app is spied on), every
other one going to the stack.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import control_plane.api.app as app_module
from control_plane import deadline
from control_plane.api import create_app
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import AuditSettings, Settings
from control_plane.engine import Engine
from control_plane.engine.aio import AsyncEngine
from control_plane.service import SearchService
from tests.clocks import FIXED_CLOCK, FIXED_NOW
from tests.drills.harness import free_port
from tests.e2e.conftest import ready, settings  # noqa: F401

VOLATILE = {
    "request_id", "time", "latency_ms", "sequence", "prev_hash", "hash", "mac", "key_id", "writer",
}
"""what differs between two records of the same search: identity, instants, timings, chain"""
HEADERS = ("content-type", "content-length", "allow", "www-authenticate", "retry-after")
DEADLINE_S = 3.0


class Served:
    def __init__(self, client: TestClient, service: SearchService) -> None:
        self.client = client
        self.service = service
        self.stack_calls = 0
        app: Any = client.app
        stack = app.middleware_stack  # built when the lifespan started

        async def spied(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.stack_calls += 1
            await stack(scope, receive, send)

        app.middleware_stack = spied


@pytest.fixture(scope="module")
def pair(
    engine: Engine, settings: Settings, ready: Ready, tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
) -> Iterator[dict[str, Served]]:
    with serving_pair(engine, settings, tmp_path_factory.mktemp("lane")) as served:
        yield served


@contextmanager
def serving_pair(engine: Engine, settings: Settings, directory: Path) -> Iterator[dict[str, Served]]:  # noqa: F811
    clients: list[TestClient] = []
    services: list[SearchService] = []
    served: dict[str, Served] = {}
    try:
        for name, lane in (("lane", True), ("stack", False)):
            audit = AuditSettings(
                path=str(directory / f"{name}.jsonl"), key_file=str(directory / f"{name}.key")
            )
            own = settings.model_copy(update={
                "audit": audit,
                # watched values never due during the test: the same requests, the same paths
                "search": settings.search.model_copy(update={"alias_watch_interval_s": 3600.0}),
                "auth": settings.auth.model_copy(update={"search_requires_key": True}),
                "api": settings.api.model_copy(
                    update={"fast_lane": lane, "request_deadline_s": DEADLINE_S, "max_body_bytes": 4096}
                ),
            })
            service = SearchService(own, engine, profile_of(own))
            services.append(service)
            client = TestClient(create_app(service, clock=FIXED_CLOCK), raise_server_exceptions=False)
            client.__enter__()
            clients.append(client)
            served[name] = Served(client, service)
        yield served
    finally:
        for client in clients:
            client.__exit__(None, None, None)
        for service in services:
            service.close()


@pytest.fixture(scope="module")
def keys(pair: dict[str, Served]) -> dict[str, str]:
    store: Any = pair["lane"].client.app.state.keys  # type: ignore[attr-defined]
    search, _ = store.create("lane-searcher", ["search"], FIXED_NOW)
    auditor, _ = store.create("lane-auditor", ["search", "auditor"], FIXED_NOW)
    return {"search": f"Bearer {search}", "auditor": f"Bearer {auditor}"}


@contextmanager
def loop_engine_at(url: str, clients: list[TestClient]) -> Iterator[None]:
    """Every app's loop engine at ``url`` meanwhile."""
    kept = [client.app.state.loop_engine for client in clients]  # type: ignore[attr-defined]
    try:
        for client in clients:
            client.app.state.loop_engine = AsyncEngine(url, 30.0)  # type: ignore[attr-defined]
        yield
    finally:
        for client, engine in zip(clients, kept, strict=True):
            client.app.state.loop_engine = engine  # type: ignore[attr-defined]


@contextmanager
def engine_down(clients: list[TestClient], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with loop_engine_at(f"http://127.0.0.1:{free_port()}", clients):
        yield


@contextmanager
def engine_silent(clients: list[TestClient], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An engine that takes the connection and never answers: the request deadline passes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        with loop_engine_at(f"http://127.0.0.1:{listener.getsockname()[1]}", clients):
            yield
    finally:
        listener.close()


@contextmanager
def handler_fails(clients: list[TestClient], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The answer's build raises (after the search was recorded): the app's 500."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the answer could not be built")

    with monkeypatch.context() as patch:
        patch.setattr(app_module, "search_answer", broken)
        yield


@contextmanager
def as_is(clients: list[TestClient], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield


def _json(data: Any) -> bytes:
    return json.dumps(data).encode()


Case = tuple[str, str, Any, dict[str, str], bool, Callable[..., Any]]
"""(case, method, body bytes or a chunk iterator's factory, headers, lane answers, context)"""
JSON = {"content-type": "application/json"}
SEARCH = _json({"intent": "chocolat sans arachide", "size": 4})


def cases(keys: dict[str, str]) -> list[Case]:
    key = {"authorization": keys["search"]}
    auditor = {"authorization": keys["auditor"]}
    return [
        ("well-formed, cold", "POST", SEARCH, {**JSON, **key}, True, as_is),
        ("well-formed, warm", "POST", SEARCH, {**JSON, **key}, True, as_is),
        ("upper-case content type", "POST", SEARCH, {"content-type": "Application/JSON", **key}, True, as_is),
        ("explain by an auditor", "POST", _json({"intent": "cheap chocolate", "explain": True}),
         {**JSON, **auditor}, True, as_is),
        ("lax coercion", "POST", _json({"intent": "orange juice", "size": "3"}), {**JSON, **key},
         True, as_is),
        ("no key: the guard refuses", "POST", SEARCH, JSON, True, as_is),
        ("unknown key: the guard refuses", "POST", SEARCH,
         {**JSON, "authorization": "Bearer gsk_nope"}, True, as_is),
        ("x-api-key header", "POST", SEARCH, {**JSON, "x-api-key": keys["search"][7:]}, True, as_is),
        ("explain without the role", "POST", _json({"intent": "cheap chocolate", "explain": True}),
         {**JSON, **key}, True, as_is),
        ("now without the role", "POST", _json({"intent": "cheap chocolate", "now": "2026-01-01T00:00:00Z"}),
         {**JSON, **key}, True, as_is),
        ("catalog not served", "POST", _json({"intent": "cheap chocolate", "catalog": "elsewhere"}),
         {**JSON, **key}, True, as_is),
        ("engine down", "POST", SEARCH, {**JSON, **key}, True, engine_down),
        ("deadline exceeded", "POST", SEARCH, {**JSON, **key}, True, engine_silent),
        ("the answer's build fails", "POST", SEARCH, {**JSON, **key}, True, handler_fails),
        ("client id header", "POST", SEARCH, {**JSON, **key, "x-client-id": "shop-1"}, True, as_is),
        # the stack's
        ("malformed JSON", "POST", b'{"intent": "choc', {**JSON, **key}, False, as_is),
        ("not UTF-8", "POST", b'{"intent": "\xff"}', {**JSON, **key}, False, as_is),
        ("NaN", "POST", b'{"intent": "choc", "size": NaN}', {**JSON, **key}, False, as_is),
        ("nested too deep", "POST", b'{"intent": "c", "x": ' + b"[" * 1900 + b"]" * 1900 + b"}",
         {**JSON, **key}, False, as_is),
        ("an array", "POST", b'[{"intent": "chocolate"}]', {**JSON, **key}, False, as_is),
        ("a string", "POST", b'"chocolate"', {**JSON, **key}, False, as_is),
        ("empty body", "POST", b"", {**JSON, **key}, False, as_is),
        ("invalid field", "POST", _json({"intent": "chocolate", "size": -1}), {**JSON, **key}, False, as_is),
        ("unknown field", "POST", _json({"intent": "chocolate", "colour": "red"}), {**JSON, **key},
         False, as_is),
        ("missing intent", "POST", _json({"size": 3}), {**JSON, **key}, False, as_is),
        ("invalid field, no key", "POST", _json({"intent": "chocolate", "size": -1}), JSON, False, as_is),
        ("charset parameter", "POST", SEARCH,
         {"content-type": "application/json; charset=utf-8", **key}, False, as_is),
        ("text/plain", "POST", SEARCH, {"content-type": "text/plain", **key}, False, as_is),
        ("no content type", "POST", SEARCH, key, False, as_is),
        ("form", "POST", b"intent=chocolate", {"content-type": "application/x-www-form-urlencoded", **key},
         False, as_is),
        ("oversize, declared", "POST", _json({"intent": "c" * 5000}), {**JSON, **key}, False, as_is),
        ("chunked", "POST", lambda: iter([SEARCH[:10], SEARCH[10:]]), {**JSON, **key}, False, as_is),
        ("oversize, chunked", "POST", lambda: iter([b'{"intent": "', b"c" * 5000, b'"}']),
         {**JSON, **key}, False, as_is),
        ("GET", "GET", None, key, False, as_is),
        ("trailing slash", "POST", SEARCH, {**JSON, **key}, False, as_is),
    ]


def _send(client: TestClient, method: str, body: Any, headers: dict[str, str], path: str) -> Any:
    content = body() if callable(body) else body
    return client.request(method, path, content=content, headers=headers, follow_redirects=False)


def _record(served: Served, request_id: str | None) -> dict[str, Any] | None:
    if request_id is None:
        return None
    found = served.service.recorder.find(request_id)  # type: ignore[union-attr]
    if found is None:
        return None
    record = {key: value for key, value in found.items() if key not in VOLATILE}
    tiers = record.get("tiers") or ()
    record["tiers"] = [{k: v for k, v in tier.items() if k != "took_ms"} for tier in tiers]
    return record


def _request_id(response: Any) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    rid = body.get("request_id") or (body.get("error") or {}).get("request_id")
    return rid if isinstance(rid, str) else None


def _answer(response: Any) -> tuple[int, dict[str, str | None], bytes, str | None]:
    rid = _request_id(response)
    content = response.content.replace(rid.encode(), b"RID") if rid else response.content
    headers = {name: response.headers.get(name) for name in HEADERS}
    if rid:  # the same length of id either way: the length of the body says nothing of it
        assert len(rid) == 32
    return response.status_code, headers, content, rid


def test_the_lane_answers_and_records_every_request_as_the_stack_does(
    pair: dict[str, Served], keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lane, stack = pair["lane"], pair["stack"]
    clients = [lane.client, stack.client]
    seen = set()
    for case, method, body, headers, by_lane, context in cases(keys):
        path = "/v1/search/" if case == "trailing slash" else "/v1/search"
        answers = []
        with context(clients, monkeypatch):  # one engine down (or silent...) for both apps
            for served in (lane, stack):
                before = served.stack_calls
                response = _send(served.client, method, body, headers, path)
                status, kept, content, rid = _answer(response)
                answers.append((status, kept, content, _record(served, rid), served.stack_calls - before))
        (*by_the_lane, lane_stack), (*by_the_stack, stack_stack) = answers
        assert by_the_lane == by_the_stack, case  # status, headers, body, record
        assert stack_stack == 1, case
        assert lane_stack == (0 if by_lane else 1), case  # the lane answered it, or the stack did
        seen.add(by_the_lane[0])
    # the corpus covers answers, refusals of the guard and the endpoint, the stack's refusals,
    # failing closed and the 500
    assert {200, 400, 401, 403, 405, 413, 422, 503, 500} <= seen, seen


def test_a_refusal_the_lane_answers_has_its_record_and_an_answer_has_one(
    pair: dict[str, Served], keys: dict[str, str]
) -> None:
    """Not only equal: the records are there (a lane that recorded nothing, on both apps'
    refusals alike, would pass the comparison above only if the stack did not record either)."""
    for served in pair.values():
        refused = served.client.post("/v1/search", content=SEARCH, headers=JSON)
        assert refused.status_code == 401
        record = served.service.recorder.find(refused.json()["error"]["request_id"])  # type: ignore[union-attr]
        assert record is not None and record["status"] == "error" and record["error"]["status"] == 401
        answered = served.client.post(
            "/v1/search", content=SEARCH, headers={**JSON, "authorization": keys["search"]}
        )
        assert answered.status_code == 200
        record = served.service.recorder.find(answered.json()["request_id"])  # type: ignore[union-attr]
        assert record is not None and record["status"] == "ok" and record["cached"] is True


def test_a_process_wide_tracer_provider_leaves_searches_on_the_lane(
    pair: dict[str, Served], keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI's native OpenTelemetry is off: with a tracer provider configured for the whole
    process (as an auto-instrumentation agent sets one), a search still takes the lane and
    FastAPI exports no span of its own (govsearch's traces are ``telemetry``'s)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)  # what FastAPI reads
    lane = pair["lane"]
    before = lane.stack_calls
    answered = lane.client.post(
        "/v1/search", content=SEARCH, headers={**JSON, "authorization": keys["search"]}
    )
    health = lane.client.get("/healthz")
    assert answered.status_code == 200 and health.status_code == 200
    assert lane.stack_calls == before + 1  # the health check's: the search took the lane
    assert exporter.get_finished_spans() == ()


def test_the_lane_keeps_the_request_deadline(pair: dict[str, Served], keys: dict[str, str]) -> None:
    """A silent engine: the lane's search is cut at the request deadline as the stack's is
    (503 ``deadline_exceeded``), never left to the engine client's 30 s timeout."""
    lane = pair["lane"]
    with engine_silent([lane.client], pytest.MonkeyPatch()):
        before = lane.stack_calls
        response = lane.client.post(
            "/v1/search", content=SEARCH, headers={**JSON, "authorization": keys["search"]}
        )
    assert response.status_code == 503 and response.json()["error"]["code"] == "deadline_exceeded"
    assert lane.stack_calls == before


def test_a_disconnect_before_the_body_is_whole_goes_to_the_stack(pair: dict[str, Served]) -> None:
    """The lane read part of the body and the client went away: the stack gets the messages
    the lane read, replayed, and answers it as it would have."""
    lane = pair["lane"]
    app: Any = lane.client.app
    body = SEARCH
    messages = [
        {"type": "http.request", "body": body[:5], "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = _scope(body)
    before = lane.stack_calls

    async def call() -> None:
        await app(scope, receive, send)

    asyncio.run(call())
    assert lane.stack_calls == before + 1
    assert sent and sent[0]["type"] == "http.response.start" and sent[0]["status"] == 400


def _scope(body: bytes) -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/search", "raw_path": b"/v1/search", "query_string": b"",
        "root_path": "", "headers": [(b"content-type", b"application/json"),
                                     (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 5000), "server": ("testserver", 80), "state": {},
    }


def test_an_exception_no_handler_takes_is_answered_500_and_raised_to_the_server(
    pair: dict[str, Served], keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``ServerErrorMiddleware`` does: the app's 500 answer is sent, then the exception
    goes on to the server (uvicorn logs it), by the lane and by the stack alike."""
    answers = []
    for served in pair.values():
        app: Any = served.client.app
        scope = _scope(SEARCH)
        scope["headers"].append((b"authorization", keys["search"].encode()))
        sent: list[dict[str, Any]] = []
        messages = [{"type": "http.request", "body": SEARCH, "more_body": False}]

        async def receive(messages: list[dict[str, Any]] = messages) -> dict[str, Any]:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, Any], sent: list[dict[str, Any]] = sent) -> None:
            sent.append(message)

        before = served.stack_calls
        kept, app.state.loop_engine = app.state.loop_engine, None  # that engine is the client's loop's
        try:
            with handler_fails([], monkeypatch), pytest.raises(RuntimeError, match="could not be built"):
                asyncio.run(app(scope, receive, send))
        finally:
            app.state.loop_engine = kept
        assert sent[0]["status"] == 500
        body = json.loads(sent[1]["body"])
        assert body["error"]["code"] == "internal_error"
        answers.append((body["error"]["message"], served.stack_calls - before))
    assert answers == [("RuntimeError: internal error", 0), ("RuntimeError: internal error", 1)]


def test_an_app_with_a_middleware_the_lane_does_not_know_takes_the_stack(service: SearchService) -> None:
    """The lane stands in for the three middlewares it knows; with another one added (CORS,
    a tracer...) every search goes through the stack, that middleware included."""
    app = create_app(service, clock=FIXED_CLOCK)
    seen: list[str] = []

    class Watching:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                seen.append(scope["path"])
            await self.app(scope, receive, send)

    app.add_middleware(Watching)
    with TestClient(app) as client:
        response = client.post("/v1/search", content=SEARCH, headers=JSON)
    assert response.status_code == 200
    assert seen == ["/v1/search"]



def _direct(
    app: Any, scope: dict[str, Any], body: bytes, delay_s: float = 0.0
) -> tuple[list[dict[str, Any]], BaseException | None]:
    """``app`` called as uvicorn calls it, the body arriving ``delay_s`` after the headers:
    what it sent, and what it raised to the server. The loop engine is left out: it belongs
    to the test client's loop."""
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            await asyncio.sleep(delay_s)
            return messages.pop(0)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    raised: BaseException | None = None
    kept, app.state.loop_engine = app.state.loop_engine, None
    try:
        asyncio.run(app(scope, receive, send))
    except Exception as error:
        raised = error
    finally:
        app.state.loop_engine = kept
    return sent, raised


def test_a_refusal_record_that_fails_is_answered_500_by_the_lane_as_by_the_stack(
    pair: dict[str, Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard refuses (no key) and recording the refusal raises: the stack's server-error
    middleware answers the app's 500 in the one error shape, then lets the exception go on
    to the server; the lane does the same (found in review: it let it out unanswered)."""
    answers = []
    for served in pair.values():
        app: Any = served.client.app

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the refusal could not be recorded")

        before = served.stack_calls
        with monkeypatch.context() as patch:
            patch.setattr(app.state.recorder, "failure", broken)
            sent, raised = _direct(app, _scope(SEARCH), SEARCH)
        assert isinstance(raised, RuntimeError)
        assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 500
        error = json.loads(sent[1]["body"])["error"]
        answers.append((error["code"], error["message"], served.stack_calls - before))
    assert answers == [
        ("internal_error", "RuntimeError: internal error", 0),
        ("internal_error", "RuntimeError: internal error", 1),
    ]


def test_the_request_deadline_counts_the_upload_on_the_lane_as_on_the_stack(
    pair: dict[str, Served], keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline starts when the request arrives, not when its body is whole: a body that
    took a second to arrive leaves the endpoint about a second less, on both (found in
    review: the lane started the deadline after the read)."""
    remaining: dict[str, float] = {}
    for name, served in pair.items():
        app: Any = served.client.app
        scope = _scope(SEARCH)
        scope["headers"].append((b"authorization", keys["search"].encode()))
        seen: list[float] = []

        def watching(*args: Any, seen: list[float] = seen, **kwargs: Any) -> Any:
            current = deadline.current_requested()
            assert current is not None
            seen.append(current.remaining())
            raise RuntimeError("stop here")

        with monkeypatch.context() as patch:
            patch.setattr(app_module, "served_catalog", watching)
            _direct(app, scope, SEARCH, delay_s=1.0)
        remaining[name] = seen[0]
    for left in remaining.values():  # started before the one-second upload, on both
        assert left < DEADLINE_S - 0.9
    assert remaining["lane"] > DEADLINE_S - 2.5 and remaining["stack"] > DEADLINE_S - 2.5


def test_a_first_search_through_the_lane_starts_the_app_as_the_stack_would(service: SearchService) -> None:
    """Once an app served a request, a middleware can no longer be added (Starlette refuses);
    a laned search as the very first request starts the app too, so a middleware added after
    it is refused rather than silently skipped by the lane (found in review)."""
    app: Any = create_app(service, clock=FIXED_CLOCK)
    sent, _ = _direct(app, _scope(SEARCH), SEARCH)
    assert sent and sent[0]["type"] == "http.response.start"
    with pytest.raises(RuntimeError, match="after an application has started"):
        app.add_middleware(Served)
