"""The route of ``POST /v1/search`` (ADR 0033): a well-formed request takes the shortcut to
its handler, every other one FastAPI's handler, and both answer the same.

Two routes share one endpoint and one guard: ``/shortcut`` is a :class:`SearchRoute`,
``/general`` FastAPI's own ``APIRoute``. Each request of the table is sent to both; the
answers (status, body, content type) must be equal, and the shortcut must be taken exactly
for the well-formed ones (FastAPI's dependency solver is counted: never called by the
shortcut, as often as by FastAPI's route otherwise)."""

from __future__ import annotations

from typing import Any

import fastapi.routing
import pytest
from fastapi import Depends, FastAPI, Request, Response
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from control_plane.api import errors
from control_plane.api.models import SearchBody
from control_plane.api.search_route import SearchRoute, shortcut_shape, well_formed


class Body(BaseModel):
    intent: str = Field(min_length=1, max_length=20)
    size: int = 10
    tags: list[str] = []


async def guard(request: Request) -> None:
    if request.headers.get("x-deny"):
        raise errors.ApiError(401, "missing_api_key", "no key")
    request.state.guarded = True


async def endpoint(body: Body, request: Request) -> Response:
    if body.intent == "boom":
        raise errors.ApiError(409, "conflict", "the endpoint refused")
    guarded = str(request.state.guarded).lower()
    payload = body.model_dump_json(exclude={"tags"})[:-1] + f',"guarded":{guarded}}}'
    return Response(payload, media_type="application/json")


def _app() -> FastAPI:
    app = FastAPI()
    errors.install(app)
    for path, route_class in (("/shortcut", SearchRoute), ("/general", fastapi.routing.APIRoute)):
        app.router.add_api_route(
            path, endpoint, methods=["POST"], dependencies=[Depends(guard)],
            route_class_override=route_class,
        )
    return app


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times FastAPI's own handler solved a request's dependencies."""
    calls: list[int] = []
    original = fastapi.routing.solve_dependencies

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await original(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counted)
    return calls


JSON = {"content-type": "application/json"}
CASES: list[tuple[str, bytes, dict[str, str], bool]] = [
    # (case, body, headers, well-formed: the shortcut answers)
    ("valid", b'{"intent": "shoes", "size": 3}', JSON, True),
    ("valid, defaults", b'{"intent": "shoes"}', JSON, True),
    ("valid, upper-case type", b'{"intent": "shoes"}', {"content-type": "Application/JSON"}, True),
    ("lax coercion as FastAPI", b'{"intent": "shoes", "size": "4"}', JSON, True),
    ("guard refuses", b'{"intent": "shoes"}', {**JSON, "x-deny": "1"}, True),
    ("endpoint refuses", b'{"intent": "boom"}', JSON, True),
    ("charset parameter", b'{"intent": "shoes"}', {"content-type": "application/json; charset=utf-8"}, False),
    ("+json subtype", b'{"intent": "shoes"}', {"content-type": "application/vnd.api+json"}, False),
    ("no content type", b'{"intent": "shoes"}', {}, False),
    ("text", b'{"intent": "shoes"}', {"content-type": "text/plain"}, False),
    ("empty body", b"", JSON, False),
    ("not JSON", b'{"intent": ', JSON, False),
    ("not UTF-8", b'{"intent": "\xff"}', JSON, False),
    ("an array", b'[{"intent": "shoes"}]', JSON, False),
    ("a string", b'"shoes"', JSON, False),
    ("missing field", b'{"size": 3}', JSON, False),
    ("too long", b'{"intent": "' + b"x" * 30 + b'"}', JSON, False),
    ("wrong type", b'{"intent": "shoes", "size": "many"}', JSON, False),
    ("invalid, guard refuses", b'{"size": 3}', {**JSON, "x-deny": "1"}, False),
    ("NaN", b'{"intent": "shoes", "size": NaN}', JSON, False),
    # json.loads raises RecursionError: FastAPI's 400, not a 500 from the shortcut
    ("nested too deep", b'{"intent": "shoes", "x": ' + b"[" * 1900 + b"]" * 1900 + b"}", JSON, False),
]


@pytest.mark.parametrize(("case", "body", "headers", "shortcut"), CASES, ids=[c[0] for c in CASES])
def test_both_routes_answer_the_same_and_the_shortcut_takes_only_well_formed_requests(
    solved: list[int], case: str, body: bytes, headers: dict[str, str], shortcut: bool
) -> None:
    with TestClient(_app(), raise_server_exceptions=False) as client:
        general = client.post("/general", content=body, headers=headers)
        by_fastapi = len(solved)  # 0 when it refuses the body before solving (not JSON)
        answer = client.post("/shortcut", content=body, headers=headers)
        assert len(solved) - by_fastapi == (0 if shortcut else by_fastapi), case
        assert by_fastapi == 1 or not shortcut
    assert answer.status_code == general.status_code, case
    assert answer.headers.get("content-type") == general.headers.get("content-type")

    def without_request_id(response: Any) -> Any:
        data = response.json()
        if "error" in data:
            data["error"].pop("request_id")
        return data

    assert without_request_id(answer) == without_request_id(general), case
    if answer.status_code == 200:
        assert answer.content == general.content


def test_the_shortcut_needs_a_route_of_its_shape() -> None:
    app = FastAPI()

    async def with_query(body: Body, request: Request, page: int = 1) -> Response:
        return Response(b"{}")

    async def without_request(body: Body) -> Response:
        return Response(b"{}")

    async def needs_more(request: Request, page: int) -> None:
        return None

    for path, function, dependencies in (
        ("/query", with_query, []),
        ("/no-request", without_request, []),
        ("/guard-with-a-query", endpoint, [Depends(needs_more)]),
    ):
        app.router.add_api_route(path, function, methods=["POST"], dependencies=dependencies,
                                 route_class_override=SearchRoute)
    app.router.add_api_route("/ok", endpoint, methods=["POST"], dependencies=[Depends(guard)],
                             route_class_override=SearchRoute)
    shapes = {route.path: shortcut_shape(route) for route in app.routes if isinstance(route, SearchRoute)}
    assert shapes["/query"] is None and shapes["/no-request"] is None
    assert shapes["/guard-with-a-query"] is None
    assert shapes["/ok"] == (Body, "body", "request", ((guard, "request"),))


def test_well_formed_validates_as_the_search_body() -> None:
    body = well_formed(b'{"intent": "running shoes", "size": 5}', "application/json", SearchBody)
    assert body == SearchBody(intent="running shoes", size=5)
    assert well_formed(b'{"intent": "x", "bogus": 1}', "application/json", SearchBody) is None  # extra=forbid


@pytest.mark.parametrize("path", ["/shortcut", "/general"])
def test_a_client_gone_mid_body_is_answered_by_fastapis_handler_on_both(path: str) -> None:
    """The body cannot be read (the client disconnected): both routes answer what FastAPI's
    handler answers, a 400 in the one error shape, never a 500."""
    import asyncio
    import json

    app = _app()
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"20")],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "state": {},
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 400
    assert json.loads(sent[1]["body"])["error"]["code"] == "bad_request"
