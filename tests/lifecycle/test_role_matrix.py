"""Drill: every route checks its roles (docs/lifecycle.md "API keys and roles", docs/api.md).

What this attacks is a route that forgets its guard, guards with the wrong roles, lets a
malformed or revoked key through, answers a refusal in another shape than the one JSON
error, or changes something before refusing. Every operation of the OpenAPI document is
called, with ``auth.search_requires_key`` off and on, by: no key, a malformed key, a
revoked key (an admin's, through ``X-Api-Key``), and one key per role (``ROLES``) plus a
``search`` + ``author`` key (the only non-admin key a compile with the setting on accepts).

- a caller without a valid key on a route needing one: 401 ``missing_api_key`` or
  ``invalid_api_key``; a valid key without the route's roles: 403; both in the one shape;
- a caller with the roles: neither 401 nor 403 (the body is minimal, so 404/409/422 are fine);
- a refused write changes nothing: the history (refusals included) and staging's version
  are the same before and after.

The expected access comes from :data:`ACCESS` alone, written from the code (``require``
and the route dependencies, ``require_internals`` in ``/v1/compile``), and is checked
against the operations the document lists: a new route without a row fails here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from control_plane.api import create_app
from control_plane.api.openapi import openapi_schema
from control_plane.bootstrap import profile_of
from control_plane.lifecycle.keys import ROLES, KeyStore
from control_plane.lifecycle.workflow import Refused
from control_plane.service import SearchService
from tests.api.test_search_api import assert_error_shape
from tests.clocks import FIXED_CLOCK, FIXED_NOW
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_workflow_api import CREAMERS

READERS = frozenset({"author", "approver", "auditor"})
INTERNAL = READERS  # control_plane.api.auth.INTERNAL_ROLES, written out
OPEN = None
"""anyone, any key or none (a malformed key is not even looked at)"""

Clauses = tuple[frozenset[str], ...] | None
"""OPEN, or a valid key whose roles meet every clause (one role of each), or admin"""


@dataclass(frozen=True)
class Access:
    off: Clauses
    """with ``auth.search_requires_key`` off"""
    on: Clauses
    """with it on"""


def always(*clauses: frozenset[str]) -> Access:
    return Access(clauses, clauses)


SEARCH = frozenset({"search"})
ACCESS: dict[tuple[str, str], Access] = {
    ("POST", "/v1/search"): Access(OPEN, (SEARCH,)),
    ("POST", "/v1/compile"): Access((INTERNAL,), (SEARCH, INTERNAL)),  # the guard, then internals
    ("POST", "/v1/agent/query"): Access(OPEN, (SEARCH,)),
    ("POST", "/v1/events"): Access(OPEN, (SEARCH,)),
    ("GET", "/healthz"): Access(OPEN, OPEN),
    ("GET", "/readyz"): Access(OPEN, OPEN),
    ("GET", "/metrics"): Access(OPEN, OPEN),
    ("GET", "/v1/policies/environments/{env}"): always(READERS),
    ("GET", "/v1/policies/environments/{env}/policies/{policy_id}"): always(READERS),
    ("GET", "/v1/policies/versions/{version}"): always(READERS),
    ("GET", "/v1/policies/versions/{version}/tests"): always(READERS),
    ("GET", "/v1/policies/versions/{version}/lint"): always(READERS),
    ("GET", "/v1/policies/history"): always(READERS),
    ("GET", "/v1/policies/intents"): always(READERS),
    ("PUT", "/v1/policies/staging/policies/{policy_id}"): always(frozenset({"author"})),
    ("DELETE", "/v1/policies/staging/policies/{policy_id}"): always(frozenset({"author"})),
    ("PUT", "/v1/policies/staging/tests"): always(frozenset({"author"})),
    ("POST", "/v1/policies/versions/{version}/test"): always(frozenset({"author", "approver"})),
    ("POST", "/v1/policies/diff"): always(READERS),
    ("POST", "/v1/policies/versions/{version}/approve"): always(frozenset({"approver"})),
    ("POST", "/v1/policies/promote"): always(frozenset({"approver"})),
    ("POST", "/v1/policies/rollback"): always(frozenset({"approver"})),
    ("POST", "/v1/policies/live/policies/{policy_id}/disable"): always(frozenset({"approver"})),
    ("GET", "/v1/audit/decisions/{request_id}"): always(frozenset({"auditor"})),
    ("GET", "/v1/audit/decisions"): always(frozenset({"auditor"})),
    ("POST", "/v1/audit/replay"): always(frozenset({"auditor"})),
    ("GET", "/v1/audit/policies/{policy_id}/impact"): always(frozenset({"auditor"})),
}
assert "admin" not in {role for access in ACCESS.values() for c in (access.off or ()) + (access.on or ())
                       for role in c}  # admin passes everywhere: Principal.has

PATH_VALUES = {"env": "staging", "policy_id": "no-such-policy", "version": "no-such-version",
               "request_id": "no-such-request"}
BODIES: dict[str, Any] = {"/v1/search": {"intent": "chocolate"}, "/v1/compile": {"intent": "chocolate"}}
MISSING, INVALID = "missing_api_key", "invalid_api_key"
FORBIDDEN = {"forbidden_role", "explain_forbidden"}

ROLE_CALLERS: dict[str, frozenset[str]] = {
    **{role: frozenset({role}) for role in ROLES}, "search+author": frozenset({"search", "author"}),
}


def operations(schema: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in schema["paths"].items() for method in item}


def passes(clauses: Clauses, roles: frozenset[str]) -> bool:
    return clauses is OPEN or "admin" in roles or all(roles & clause for clause in clauses)


@dataclass
class Callers:
    headers: dict[str, dict[str, str]]
    """caller -> its headers: "none", "malformed", "revoked" and the ROLE_CALLERS"""


@pytest.fixture()
def callers(lifecycle: Lifecycle) -> Callers:
    store = KeyStore(lifecycle.engine, lifecycle.settings.auth.keys_index)
    headers: dict[str, dict[str, str]] = {
        "none": {},
        "malformed": {"authorization": "Bearer gsk_not-a-key"},
    }
    revoked, principal = store.create("gone", ["admin"], FIXED_NOW)
    assert principal.key_id and store.revoke(principal.key_id, FIXED_NOW)
    headers["revoked"] = {"x-api-key": revoked}
    for name, roles in ROLE_CALLERS.items():
        key, _ = store.create(f"caller-{name.replace('+', '-')}", sorted(roles), FIXED_NOW)
        headers[name] = {"authorization": f"Bearer {key}"}
    return Callers(headers)


def test_the_table_names_every_operation_of_the_document() -> None:
    assert operations(openapi_schema()) == set(ACCESS), "a route without its row in ACCESS, or a stale row"


def _state(lc: Lifecycle) -> tuple[int, str | None]:
    """What a refused write must leave alone: the history's length (refusals included)
    and the staging version."""
    try:
        staging: str | None = lc.workflow.environment("staging").version
    except Refused:
        staging = None
    return len(lc.workflow.history(outcome=None, limit=1000)), staging


def _request(client: TestClient, method: str, path: str, schema: dict[str, Any],
             headers: dict[str, str]) -> Any:
    url = path.format(**PATH_VALUES)
    operation = schema["paths"][path][method.lower()]
    body = BODIES.get(path, {}) if "requestBody" in operation else None
    return client.request(method, url, headers=headers, json=body)


def _refusal(response: Any, status: int, codes: set[str], where: str) -> None:
    assert response.status_code == status, f"{where}: {response.status_code} {response.text}"
    body = response.json()
    assert body.get("error", {}).get("code") in codes, f"{where}: {body}"
    assert_error_shape(body, body["error"]["code"])


@pytest.mark.parametrize("requires_key", [False, True], ids=["search-open", "search-requires-key"])
def test_every_route_checks_its_roles(lifecycle: Lifecycle, callers: Callers, requires_key: bool) -> None:
    lc = lifecycle
    # a staging version of its own, so a write slipping past its guard would move it
    drafted = lc.call("PUT", "/v1/policies/staging/policies/coffee-creamers", "dan",
                      json={"policy": CREAMERS})
    assert drafted.status_code == 200, drafted.text
    assert _state(lc)[1] == drafted.json()["version"]
    settings = lc.settings.model_copy(
        update={"auth": lc.settings.auth.model_copy(update={"search_requires_key": requires_key})}
    )
    service = SearchService(settings, lc.engine, profile_of(settings))
    client = TestClient(create_app(service, clock=FIXED_CLOCK), raise_server_exceptions=False)
    try:
        schema = client.app.openapi()  # type: ignore[attr-defined]
        assert operations(schema) == set(ACCESS)
        for (method, path), access in sorted(ACCESS.items()):
            clauses = access.on if requires_key else access.off
            security = schema["paths"][path][method.lower()].get("security")
            # the document says what the route does: no key or an optional one ({}) exactly
            # on the open routes, a required key wherever one is needed (in the handler too)
            if clauses is OPEN:
                assert security is None or {} in security, (method, path, security)
            else:
                assert security is not None and {} not in security, (method, path, security)
            refused = [name for name in callers.headers
                       if (name in ("none", "malformed", "revoked") and clauses is not OPEN)
                       or (name in ROLE_CALLERS and not passes(clauses, ROLE_CALLERS[name]))]
            before = _state(lc) if method != "GET" else None
            for name in refused:
                where = f"{method} {path} by {name}"
                response = _request(client, method, path, schema, callers.headers[name])
                if name == "none":
                    _refusal(response, 401, {MISSING}, where)
                elif name in ("malformed", "revoked"):
                    _refusal(response, 401, {INVALID}, where)
                else:
                    _refusal(response, 403, FORBIDDEN, where)
            if before is not None:
                assert _state(lc) == before, f"a refused {method} {path} changed the history or staging"
            for name in set(callers.headers) - set(refused):
                response = _request(client, method, path, schema, callers.headers[name])
                assert response.status_code not in (401, 403), (
                    f"{method} {path} by {name}: {response.status_code} {response.text}"
                )
    finally:
        client.close()
        service.close()
