"""The HTTP API over the real engine: shapes, one error shape, limits, failing closed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from control_plane.api import create_app
from control_plane.config import EngineSettings
from control_plane.engine import connect
from control_plane.service import SearchService
from control_plane.times import parse_time
from tests.clocks import FIXED_CLOCK, FIXED_NOW


@pytest.fixture(scope="module")
def client(service: SearchService) -> TestClient:
    return TestClient(create_app(service, clock=FIXED_CLOCK))


@pytest.fixture(scope="module")
def insider(client: TestClient) -> dict[str, str]:
    """An auditor's key: what ``/v1/compile`` and ``explain: true`` need by default."""
    key, _ = client.app.state.keys.create("test-auditor", ["auditor"], FIXED_NOW)  # type: ignore[attr-defined]
    return {"authorization": f"Bearer {key}"}


def assert_error_shape(body: dict[str, Any], code: str) -> None:
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "request_id", "details"}
    assert body["error"]["code"] == code and body["error"]["message"]


def test_search_answers_the_documented_shape(client: TestClient) -> None:
    response = client.post("/v1/search", json={"intent": "chocolat sans arachide", "size": 5})
    assert response.status_code == 200
    body = response.json()
    assert {"request_id", "policy_set_version", "status", "tier", "total", "hits", "facets"} <= set(body)
    assert body["status"] == "ok" and body["tier"] == "strict" and len(body["hits"]) == 5
    hit = body["hits"][0]
    assert set(hit) == {"id", "title", "brand", "price", "score", "sponsored", "policies", "display"}
    # the demo profile's display fields, as the product stores them
    assert set(hit["display"]) <= {"id", "title", "brand", "price", "category", "allergens", "labels"}
    assert hit["display"]["id"] == hit["id"] and hit["display"]["price"] == hit["price"]
    # Guard clauses match every hit; the engine reports them per hit, by policy id.
    assert {"in-stock-only", "visible-only"} <= set(hit["policies"])
    assert {"category", "brand", "price"} <= set(body["facets"])
    assert "explanation" not in body or body["explanation"] is None


def test_explain_returns_the_explanation_and_dsl(client: TestClient, insider: dict[str, str]) -> None:
    body = client.post(
        "/v1/search", json={"intent": "cheap chocolate", "explain": True}, headers=insider
    ).json()
    explanation = body["explanation"]
    assert explanation["residual"] == "chocolate"
    assert explanation["policy_set_version"] == body["policy_set_version"]
    assert {step["policy_id"] for step in explanation["applied"]} >= {"cheap", "chocolate"}
    assert explanation["dsl"]["query"]["bool"]["filter"]


def test_sponsored_hits_are_labelled(client: TestClient) -> None:
    body = client.post("/v1/search", json={"intent": "dark chocolate", "size": 50}).json()
    sponsored = [hit for hit in body["hits"] if hit["sponsored"]]
    assert sponsored and all("sponsored-dark-chocolate" in hit["policies"] for hit in sponsored)
    assert any(not hit["sponsored"] for hit in body["hits"])


def test_compile_returns_plan_dsl_and_explanation_without_running(
    client: TestClient, insider: dict[str, str]
) -> None:
    body = client.post("/v1/compile", json={"intent": "oranges"}, headers=insider).json()
    assert set(body) == {"request_id", "policy_set_version", "now", "plan", "dsl", "explanation"}
    assert parse_time(body["now"]) == FIXED_NOW  # the app's clock: the instant it was compiled at
    assert body["plan"]["category"]["values"] == ["Oranges"]
    assert json.dumps(body["dsl"]).count("category:oranges") == 1


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({}, "body.intent"),
        ({"intent": ""}, "body.intent"),
        ({"intent": "x" * 513}, "body.intent"),
        ({"intent": "\u0000\u0001 "}, "body.intent"),
        ({"intent": "chocolate", "size": 500}, "body.size"),
        ({"intent": "chocolate", "page": 0}, "body.page"),
        ({"intent": "chocolate", "market": "FRANCE"}, "body.market"),
        ({"intent": "chocolate", "cohorts": ["bad cohort!"]}, "body.cohorts"),
        ({"intent": "chocolate", "unknown": 1}, "body.unknown"),
    ],
)
def test_bad_requests_get_a_422_in_the_one_error_shape(
    client: TestClient, payload: dict[str, Any], where: str
) -> None:
    response = client.post("/v1/search", json=payload)
    assert response.status_code == 422
    body = response.json()
    assert_error_shape(body, "invalid_request")
    assert any(detail["location"].startswith(where) for detail in body["error"]["details"])


def test_oversized_and_malformed_bodies(client: TestClient) -> None:
    big = client.post(
        "/v1/search",
        content=b'{"intent": "' + b"a" * 20_000 + b'"}',
        headers={"content-type": "application/json"},
    )
    assert big.status_code == 413
    assert_error_shape(big.json(), "request_too_large")
    broken = client.post("/v1/search", content=b"{not json", headers={"content-type": "application/json"})
    assert broken.status_code == 422
    assert_error_shape(broken.json(), "invalid_request")
    missing = client.get("/v1/nothing-here")
    assert missing.status_code == 404
    assert_error_shape(missing.json(), "not_found")
    wrong_method = client.get("/v1/search")
    assert wrong_method.status_code == 405
    assert_error_shape(wrong_method.json(), "method_not_allowed")


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "checks": {}}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"]["engine"] == "ok"


def test_engine_down_fails_closed_with_503(service: SearchService) -> None:
    dead = connect(EngineSettings(url="http://127.0.0.1:9", kind=service.engine.kind, timeout_s=1))
    down = TestClient(create_app(SearchService(service.settings, dead, service.profile), clock=FIXED_CLOCK))
    response = down.post("/v1/search", json={"intent": "chocolate"})
    assert response.status_code == 503
    assert_error_shape(response.json(), "engine_unavailable")
    assert "hits" not in response.text
    assert down.get("/readyz").status_code == 503


def test_missing_policy_set_fails_closed(service: SearchService) -> None:
    settings = service.settings.model_copy(
        update={
            "policies": service.settings.policies.model_copy(
                update={"index_prefix": "gstest-nothing-published"}
            )
        }
    )
    nothing = SearchService(settings, service.engine, service.profile)
    empty = TestClient(create_app(nothing, clock=FIXED_CLOCK))
    response = empty.post("/v1/search", json={"intent": "chocolate"})
    assert response.status_code == 503
    assert "no policy set" in response.json()["error"]["message"]


def test_plan_cache_serves_repeats_and_drops_on_version_change(service: SearchService) -> None:
    from control_plane.service import SearchRequest

    fresh = SearchService(service.settings, service.engine, service.profile)
    request = SearchRequest(intent="Cheap  Chocolate")
    first = fresh.compile(request, FIXED_NOW)
    again = fresh.compile(SearchRequest(intent="Cheap Chocolate"), FIXED_NOW)  # normalised alike
    assert not first.cached and again.cached
    assert again.composition == first.composition
    other = fresh.compile(SearchRequest(intent="cheap chocolate"), FIXED_NOW)  # its own text: its own plan
    assert not other.cached and other.intent == "cheap chocolate" and first.intent == "Cheap Chocolate"
    fresh.cache.get("another-version", ("x",), FIXED_NOW)  # a new version empties the cache
    assert len(fresh.cache) == 0


def test_a_cached_plan_is_the_plan_of_its_own_instant(service: SearchService) -> None:
    """Same request, version and instant: the same DSL, whether the plan came from the
    cache (compiled at another instant of the same window) or not."""
    from control_plane.service import SearchRequest

    warm = SearchService(service.settings, service.engine, service.profile)
    cold = SearchService(service.settings, service.engine, service.profile)
    request = SearchRequest(intent="chocolate", user_id="alice")
    later = datetime(2026, 11, 29, 12, tzinfo=UTC)  # after alice's latest purchase, same window
    early = warm.compile(request, FIXED_NOW)
    cached, fresh = warm.compile(request, later), cold.compile(request, later)
    assert cached.cached and not fresh.cached
    assert cached.personalization == fresh.personalization != early.personalization
    assert warm.render(cached, request, "strict") == cold.render(fresh, request, "strict")


# --- what is internal stays internal ----------------------------------------------------


@pytest.mark.parametrize(
    ("route", "body"),
    [("/v1/compile", {"intent": "cheap chocolate"}),
     ("/v1/search", {"intent": "cheap chocolate", "explain": True})],
)
def test_compile_and_explain_need_an_insiders_key_by_default(
    client: TestClient, insider: dict[str, str], route: str, body: dict[str, Any]
) -> None:
    anonymous = client.post(route, json=body)
    assert anonymous.status_code == 401
    assert_error_shape(anonymous.json(), "missing_api_key")
    assert "author or approver or auditor" in anonymous.json()["error"]["message"]
    assert set(anonymous.json()) == {"error"}  # no plan, no DSL, no explanation
    shop, _ = client.app.state.keys.create("test-shop", ["search"], FIXED_NOW)  # type: ignore[attr-defined]
    forbidden = client.post(route, json=body, headers={"authorization": f"Bearer {shop}"})
    assert forbidden.status_code == 403
    assert_error_shape(forbidden.json(), "explain_forbidden")
    assert forbidden.json()["error"]["message"].startswith("test-shop may not use ")
    allowed = client.post(route, json=body, headers=insider)
    assert allowed.status_code == 200 and allowed.json()["explanation"]["applied"]
    plain = client.post("/v1/search", json={"intent": "cheap chocolate"})  # no explain: open
    assert plain.status_code == 200 and plain.json()["explanation"] is None


def test_open_internals_opens_them_for_local_development(service: SearchService) -> None:
    settings = service.settings.model_copy(
        update={"auth": service.settings.auth.model_copy(update={"open_internals": True})}
    )
    opened = SearchService(settings, service.engine, service.profile)
    open_app = TestClient(create_app(opened, clock=FIXED_CLOCK))
    assert open_app.post("/v1/compile", json={"intent": "oranges"}).status_code == 200
    # and its document says so: the key is optional there, as on search
    security = open_app.app.openapi()["paths"]["/v1/compile"]["post"]["security"]  # type: ignore[attr-defined]
    assert security[0] == {}
    explained = open_app.post("/v1/search", json={"intent": "oranges", "explain": True})
    assert explained.status_code == 200 and explained.json()["explanation"]["dsl"]


def test_a_503_does_not_echo_the_engine(service: SearchService) -> None:
    dead = connect(EngineSettings(url="http://127.0.0.1:9", kind=service.engine.kind, timeout_s=1))
    down = TestClient(create_app(SearchService(service.settings, dead, service.profile), clock=FIXED_CLOCK))
    error = down.post("/v1/search", json={"intent": "chocolate"}).json()["error"]
    assert error["code"] == "engine_unavailable"
    assert error["message"] == "the search engine cannot be reached; no ungoverned results are served"
    assert "127.0.0.1" not in json.dumps(error) and ":9" not in error["message"]


def test_a_405_names_the_allowed_methods_in_the_error_shape(client: TestClient) -> None:
    response = client.get("/v1/search")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert_error_shape(response.json(), "method_not_allowed")
    deleted = client.delete("/v1/policies/staging/tests")
    assert deleted.status_code == 405 and deleted.headers["allow"] == "PUT"


def test_the_openapi_document_declares_keys_errors_and_stable_ids(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearerKey"] == {**schemes["bearerKey"], "type": "http", "scheme": "bearer"}
    operations = {
        (method.upper(), path): operation
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }
    ids = [operation["operationId"] for operation in operations.values()]
    assert len(set(ids)) == len(ids)
    assert operations["POST", "/v1/search"]["operationId"] == "post_v1_search"
    assert operations["GET", "/v1/policies/versions/{version}"]["operationId"] == (
        "get_v1_policies_versions_version"
    )
    # keyed routes require the key; search-side routes take one optionally; health needs none
    promote = operations["POST", "/v1/policies/promote"]
    assert promote["security"] == [{"bearerKey": []}, {"apiKeyHeader": []}]
    assert {"401", "403", "409", "422", "503"} <= set(promote["responses"])
    assert operations["GET", "/v1/audit/decisions"]["security"] == promote["security"]
    assert operations["POST", "/v1/search"]["security"][0] == {}  # optional: now and explain need one
    compile_ = operations["POST", "/v1/compile"]  # internal: required unless auth.open_internals
    assert compile_["security"] == promote["security"]
    assert "author, approver or auditor" in compile_["description"]
    assert "auth.open_internals" in compile_["description"]
    assert "security" not in operations["GET", "/healthz"]
    assert set(operations["GET", "/healthz"]["responses"]) == {"200"}
    error = {"$ref": "#/components/schemas/ErrorResponse"}
    for (method, path), operation in operations.items():
        for status, response in operation["responses"].items():
            if status.startswith(("4", "5")) and path != "/readyz":
                assert response["content"]["application/json"]["schema"] == error, (method, path, status)
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_a_well_formed_search_takes_the_shortcut_and_answers_as_fastapis_handler(
    client: TestClient, insider: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR 0033: ``application/json`` (the shortcut) and ``application/json; charset=utf-8``
    (FastAPI's handler) give the same answer, byte for byte but the request id; the same
    record; and the guard and the internals check hold on both."""
    import fastapi.routing

    from control_plane.api.search_route import SearchRoute, shortcut_shape

    route = next(r for r in client.app.routes if getattr(r, "path", None) == "/v1/search")  # type: ignore[attr-defined]
    assert isinstance(route, SearchRoute) and shortcut_shape(route) is not None
    solved: list[int] = []
    original = fastapi.routing.solve_dependencies

    async def counted(*args: Any, **kwargs: Any) -> Any:
        solved.append(1)
        return await original(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counted)
    recorder = client.app.state.recorder  # type: ignore[attr-defined]
    body = json.dumps({"intent": "chocolat sans arachide", "size": 4, "explain": True}).encode()
    client.post("/v1/search", content=body, headers={**insider, "content-type": "application/json"})
    solved.clear()  # the plan cached: both searches below are served by it
    answers = []
    for content_type, via_fastapi in (("application/json", 0), ("application/json; charset=utf-8", 1)):
        response = client.post("/v1/search", content=body, headers={**insider, "content-type": content_type})
        assert response.status_code == 200 and len(solved) == via_fastapi
        rid = response.json()["request_id"]
        answers.append((response.content.replace(rid.encode(), b"RID"), recorder.find(rid)))
    (shortcut, shortcut_record), (general, general_record) = answers
    assert shortcut == general

    def stable(record: dict[str, Any]) -> dict[str, Any]:  # what does not vary per request
        volatile = {"request_id", "latency_ms", "time", "mac", "sequence", "prev_hash", "hash"}
        kept = {k: v for k, v in record.items() if k not in volatile}
        kept["tiers"] = [{k: v for k, v in tier.items() if k != "took_ms"} for tier in record["tiers"]]
        return kept

    assert shortcut_record["cached"] is general_record["cached"] is True
    assert stable(shortcut_record) == stable(general_record)
    # explain without a key: refused the same way on both
    refused = [
        client.post("/v1/search", content=body, headers={"content-type": content_type})
        for content_type in ("application/json", "application/json; charset=utf-8")
    ]
    assert refused[0].status_code == refused[1].status_code == 401
    assert refused[0].json()["error"] | {"request_id": ""} == refused[1].json()["error"] | {"request_id": ""}
