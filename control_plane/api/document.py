"""The OpenAPI document as a contract: stable operation ids, the API-key security schemes on
the routes that take a key, and the error responses each route can give, all in the one
JSON error shape (:class:`control_plane.api.errors.ErrorResponse`).

- **Operation ids** come from the method and the path (``post_v1_search``,
  ``get_v1_policies_versions_version``), never from Python function names: renaming a
  handler does not break a generated client.
- **Security**: a route whose dependencies name roles (:func:`control_plane.api.auth.require`)
  requires ``Authorization: Bearer <key>`` (or ``X-Api-Key``), and so does a route of
  :data:`INTERNALS` (``/v1/compile``, whose handler asks for an internal role) unless
  ``auth.open_internals`` opens it; the other search-side routes (search, agent, events)
  declare the key optional, since ``now`` and ``explain`` need one, and required when
  ``auth.search_requires_key`` is on.
- **Errors**: 422 (and 400) where a request has parameters or a body, 413 where it has a
  body, 401 and 403 where a key is taken, 404 where the path names something, 409 on the
  workflow's writes, 429 on the agent, 503 wherever the engine is called; and what
  :data:`ANSWERS` adds for a route whose body names what may not exist or may contradict
  itself. ``tests/api/test_schemathesis.py`` checks every answer's status is declared.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI, routing
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi

from control_plane.api.errors import ErrorResponse

BEARER = "bearerKey"
HEADER_KEY = "apiKeyHeader"
SECURITY_SCHEMES = {
    BEARER: {
        "type": "http", "scheme": "bearer", "bearerFormat": "gsk_...",
        "description": "an API key (govsearch keys create): Authorization: Bearer gsk_...",
    },
    HEADER_KEY: {"type": "apiKey", "in": "header", "name": "X-Api-Key",
                 "description": "the same API key in the X-Api-Key header"},
}
KEY: list[dict[str, list[str]]] = [{BEARER: []}, {HEADER_KEY: []}]
#: routes that call no engine (no 503)
NO_ENGINE = {("GET", "/healthz"), ("GET", "/metrics")}
#: routes whose body may name a catalog (400 ``catalog_not_served``)
NAMES_A_CATALOG = {("POST", "/v1/search"), ("POST", "/v1/compile"), ("POST", "/v1/agent/query")}
#: routes whose handler asks for a key itself, with an internal role
#: (:func:`control_plane.api.auth.require_internals`), unless ``auth.open_internals``
INTERNALS = {("POST", "/v1/compile")}
#: what a route answers beyond what its shape says: a body naming what may not exist (404:
#: a decision, a version), a body the workflow refuses as inconsistent (400: ``id_mismatch``,
#: ``reason_required``, ``invalid_time``), a replay that cannot be made (409)
ANSWERS: dict[tuple[str, str], set[int]] = {
    ("POST", "/v1/events"): {404},
    ("POST", "/v1/audit/replay"): {404, 409},
    ("POST", "/v1/policies/diff"): {400, 404},
    ("POST", "/v1/policies/promote"): {404},
    ("POST", "/v1/policies/rollback"): {404},
    ("PUT", "/v1/policies/staging/policies/{policy_id}"): {400},
    ("POST", "/v1/policies/live/policies/{policy_id}/disable"): {400},
}
REASONS = {
    400: "the body is not UTF-8 or nests too deep, a parameter is malformed (e.g. not ISO 8601), the body"
    " names a catalog this process does not serve (catalog_not_served), or the body contradicts"
    " itself or the path (id_mismatch, reason_required)",
    401: "no API key, or an unknown or revoked one",
    403: "the key lacks the role this needs",
    404: "what the path or the body names does not exist (a policy, a version, a decision)",
    409: "the workflow refused the action, or a replay cannot be made (its code says why)",
    413: "the request body is too large",
    422: "the request does not match the schema",
    429: "a budget of the caller is spent",
    503: "the engine (or the model) is unavailable: nothing ungoverned is served",
}


def operation_id(route: Any) -> str:
    """``<method>_<path>``: ``post_v1_search``, ``get_v1_policies_versions_version``."""
    method = sorted(route.methods)[0].lower()
    path = re.sub(r"[^0-9a-zA-Z]+", "_", route.path_format).strip("_")
    return f"{method}_{path}"


def _calls(dependant: Dependant) -> Iterator[Any]:
    for sub in dependant.dependencies:
        yield sub.call
        yield from _calls(sub)


def _key(route: Any) -> str | None:
    """``required``, ``optional`` or None: what the route's dependencies say of a key."""
    found = None
    for call in _calls(route.dependant):
        roles = getattr(call, "roles", None)
        if roles:
            return "required"
        if roles is not None:
            found = "optional"
    return found


def _errors(route: Any, method: str, key: str | None) -> set[int]:
    dependant = route.dependant
    codes = set()
    has_params = bool(
        dependant.query_params or dependant.path_params or dependant.header_params
        or dependant.body_params
    )
    if has_params:
        codes.add(422)
    if dependant.query_params or (method, route.path) in NAMES_A_CATALOG:
        codes.add(400)
    if dependant.body_params:
        codes |= {400, 413}  # 400: a body that is not UTF-8 or nests too deep (bad_request)
    if key is not None:
        codes |= {401, 403}
    if dependant.path_params:
        codes.add(404)
    if route.path.startswith("/v1/policies") and method != "GET":
        codes.add(409)
    if route.path.startswith("/v1/agent"):
        codes.add(429)
    if (method, route.path) not in NO_ENGINE:
        codes.add(503)
    return codes | ANSWERS.get((method, route.path), set())


def build(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document (cached on the app, as FastAPI does)."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = schema.setdefault("components", {})
    components["securitySchemes"] = SECURITY_SCHEMES
    schemas = components.setdefault("schemas", {})
    error_schema = ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in error_schema.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    schemas["ErrorResponse"] = error_schema
    reference = {"$ref": "#/components/schemas/ErrorResponse"}
    open_internals = app.state.service.settings.auth.open_internals
    for route in _api_routes(app):
        for method in route.methods:
            internal = (method, route.path) in INTERNALS and not open_internals
            key = "required" if internal else _key(route)
            operation = schema["paths"][route.path_format][method.lower()]
            if key == "required":
                operation["security"] = KEY
            elif key == "optional":
                operation["security"] = [{}, *KEY]
            responses = operation.setdefault("responses", {})
            for status in sorted(_errors(route, method, key)):
                declared = responses.get(str(status))
                if declared is None or _is_validation_error(declared):
                    responses[str(status)] = {
                        "description": REASONS[status],
                        "content": {"application/json": {"schema": reference}},
                    }
    for unused in ("HTTPValidationError", "ValidationError"):
        if unused in schemas and unused not in str(schema["paths"]):
            del schemas[unused]
    app.openapi_schema = schema
    return schema


def _api_routes(app: FastAPI) -> Iterator[Any]:
    """Every API route of the app, with the dependencies of the routers that include it
    (FastAPI 0.165 keeps included routers as such: their routes are read through their
    effective contexts)."""
    contexts = getattr(routing, "iter_route_contexts", None)
    for route in contexts(app.routes) if contexts is not None else app.routes:
        original = getattr(route, "original_route", route)
        if isinstance(original, routing.APIRoute) and getattr(route, "include_in_schema", True):
            yield route


def _is_validation_error(response: dict[str, Any]) -> bool:
    return "HTTPValidationError" in str(response.get("content", {}))
