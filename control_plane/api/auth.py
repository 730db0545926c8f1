"""API keys on requests: ``Authorization: Bearer gsk_...`` (or ``X-Api-Key``) names the
principal; :func:`require` turns a set of roles into a FastAPI dependency. A missing key
answers 401 ``missing_api_key``, an unknown or revoked one 401 ``invalid_api_key``, a key
without the role 403 ``forbidden_role``.

What is internal stays internal: ``POST /v1/compile`` and ``explain: true`` show margin
weights, sponsored and hidden ids and every conflict decision, so they need a key with one
of :data:`INTERNAL_ROLES` (403 ``explain_forbidden`` otherwise), unless the setting
``auth.open_internals`` (``GOVSEARCH_OPEN_INTERNALS``) opens them for local development."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from control_plane.api.errors import ApiError
from control_plane.lifecycle.keys import AuthError, KeyStore, Principal

HEADER = "x-api-key"
PREVIEW_ROLES = ("author", "approver", "auditor")
"""who may evaluate a search at another instant than now (``now`` on a search request)"""
INTERNAL_ROLES = PREVIEW_ROLES
"""who may see the plan, the DSL and the explanation (``/v1/compile``, ``explain: true``)"""


def presented_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return request.headers.get(HEADER) or None


async def authenticate(request: Request) -> Principal:
    keys: KeyStore = request.app.state.keys
    try:
        principal = await run_in_threadpool(keys.authenticate, presented_key(request))
    except AuthError as error:
        raise ApiError(401, error.code, str(error)) from error
    request.state.principal = principal
    return principal


def require(*roles: str) -> Callable[[Request], Awaitable[Principal]]:
    """A dependency: the request's principal, which must hold one of ``roles`` (or admin)."""

    async def dependency(request: Request) -> Principal:
        principal = await authenticate(request)
        if not principal.has(*roles):
            raise ApiError(
                403,
                "forbidden_role",
                f"{principal.name} may not call {request.method} {request.url.path}:"
                f" it needs the role {' or '.join(roles)}"
                f" (has: {', '.join(sorted(principal.roles))})",
            )
        return principal

    dependency.roles = roles  # type: ignore[attr-defined]  # read by the OpenAPI document
    return dependency


def search_guard(required: bool) -> Callable[[Request], Awaitable[Principal | None]]:
    """The search endpoints' dependency: the ``search`` role when ``required``, else open."""
    check = require("search")

    async def dependency(request: Request) -> Principal | None:
        return await check(request) if required else None

    # read by the OpenAPI document: a key is optional on these routes unless required
    dependency.roles = ("search",) if required else ()  # type: ignore[attr-defined]
    return dependency


async def require_preview(request: Request) -> Principal:
    """A search request carrying ``now``: its key must hold one of :data:`PREVIEW_ROLES`
    (or admin). 401 without a valid key, 403 ``preview_forbidden`` without the role."""
    return await _require_roles(
        request, PREVIEW_ROLES, "preview_forbidden", "set 'now'",
        "a request with 'now' previews another instant and needs an API key with the role",
    )


async def require_internals(request: Request, what: str) -> Principal | None:
    """``what`` (``/v1/compile``, ``explain``) shows what is internal: the key must hold one
    of :data:`INTERNAL_ROLES` (or admin), unless ``auth.open_internals``. 401 without a
    valid key, 403 ``explain_forbidden`` without the role."""
    if request.app.state.service.settings.auth.open_internals:
        return None
    return await _require_roles(
        request, INTERNAL_ROLES, "explain_forbidden", f"use {what}",
        f"{what} shows internal decisions (margin weights, sponsored and hidden ids,"
        " conflicts) and needs an API key with the role",
    )


async def _require_roles(
    request: Request, roles: tuple[str, ...], code: str, action: str, why: str
) -> Principal:
    keys: KeyStore = request.app.state.keys
    listed = " or ".join(roles)
    try:
        principal = await run_in_threadpool(keys.authenticate, presented_key(request))
    except AuthError as error:
        raise ApiError(401, error.code, f"{error}: {why} {listed}") from error
    request.state.principal = principal
    if not principal.has(*roles):
        raise ApiError(
            403, code,
            f"{principal.name} may not {action}: {why} {listed}"
            f" (has: {', '.join(sorted(principal.roles))})",
        )
    return principal
