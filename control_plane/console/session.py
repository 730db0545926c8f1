"""Who is signed in to the console, and the CSRF check of every form that changes something.

The session is the API key itself, in a cookie the page's scripts cannot read
(``HttpOnly``), that no other site's page sends (``SameSite=Strict``), scoped to
``/console`` and ``Secure`` over https (or with ``api.secure_cookies``). Every request
authenticates the key against the key store again, so a revoked key ends its sessions at
once, and nothing is kept in the process: ``serve --workers N`` and a restart keep everyone
signed in (ADR 0019).

CSRF: every state-changing form carries a token bound to the session, the HMAC-SHA256 of a
fixed label keyed by the session's API key; a POST whose token is missing or differs is
refused 403 ``csrf_failed`` before anything runs. The sign-in form, before there is a
session, uses a double-submit token: a random value in a short-lived cookie and in the form.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from control_plane.lifecycle.keys import AuthError, KeyStore, Principal

COOKIE = "govsearch_console"
SIGN_IN_COOKIE = "govsearch_console_sign_in"
PATH = "/console"
MAX_AGE_S = 8 * 3600
"""a session cookie's lifetime; the key's revocation ends it sooner"""
CSRF_FIELD = "csrf"
_CSRF_LABEL = b"govsearch console csrf v1"

READERS = ("author", "approver", "auditor")
"""who may sign in: the roles that read policies (admin holds them all); a search key may not"""


class ConsoleError(Exception):
    """A console refusal, rendered as a page: an HTTP status, a stable code and why."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class SignInNeeded(Exception):
    """No (valid) session: the page redirects to the sign-in form."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or "sign in")
        self.message = message


def csrf_token(api_key: str) -> str:
    return hmac.new(api_key.encode(), _CSRF_LABEL, hashlib.sha256).hexdigest()


def secure(request: Request) -> bool:
    return request.url.scheme == "https" or bool(request.app.state.service.settings.api.secure_cookies)


def set_session(response: Response, request: Request, api_key: str) -> None:
    response.set_cookie(
        COOKIE, api_key, max_age=MAX_AGE_S, path=PATH, httponly=True, samesite="strict",
        secure=secure(request),
    )
    response.delete_cookie(SIGN_IN_COOKIE, path=PATH)


def clear_session(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict", secure=secure(request))


def new_sign_in_token() -> str:
    return secrets.token_urlsafe(32)


def set_sign_in_token(response: Response, request: Request, token: str) -> None:
    """The sign-in form's double-submit cookie (15 minutes)."""
    response.set_cookie(
        SIGN_IN_COOKIE, token, max_age=900, path=PATH, httponly=True, samesite="strict",
        secure=secure(request),
    )


def sign_in_token_matches(request: Request, sent: str | None) -> bool:
    expected = request.cookies.get(SIGN_IN_COOKIE)
    return bool(expected and sent) and hmac.compare_digest(str(expected), str(sent))


async def authenticate(request: Request, api_key: str | None) -> Principal:
    """The key's principal, who must hold a reader role; :class:`ConsoleError` otherwise."""
    keys: KeyStore = request.app.state.keys
    try:
        principal = await run_in_threadpool(keys.authenticate, api_key)
    except AuthError as error:
        raise ConsoleError(401, error.code, str(error)) from error
    if not principal.has(*READERS):
        raise ConsoleError(
            403, "forbidden_role",
            f"{principal.name} may not use the console: it needs the role {' or '.join(READERS)}"
            f" (has: {', '.join(sorted(principal.roles)) or 'none'})",
        )
    return principal


async def signed_in(request: Request) -> Principal:
    """The session's principal (a FastAPI dependency). No cookie, or a key that no longer
    authenticates: :class:`SignInNeeded`; a key without a reader role: 403."""
    api_key = request.cookies.get(COOKIE)
    if not api_key:
        raise SignInNeeded()
    try:
        principal = await authenticate(request, api_key)
    except ConsoleError as error:
        if error.status == 401:
            raise SignInNeeded(error.message) from error
        raise
    request.state.principal = principal
    request.state.csrf = csrf_token(api_key)
    return principal


async def form_of(request: Request) -> dict[str, str]:
    """The urlencoded body of a form: each field's last value."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {name: values[-1] for name, values in parse_qs(body, keep_blank_values=True).items()}


async def checked_form(request: Request) -> dict[str, str]:
    """A state-changing form of the signed-in session: its fields, once its CSRF token is
    the session's (403 ``csrf_failed`` otherwise)."""
    form = await form_of(request)
    api_key = request.cookies.get(COOKIE) or ""
    sent = form.get(CSRF_FIELD, "")
    if not api_key or not sent or not hmac.compare_digest(sent, csrf_token(api_key)):
        raise ConsoleError(
            403, "csrf_failed",
            "this form's CSRF token is missing or does not belong to your session: reload the page"
            " and send it again",
        )
    return form


def require_role(principal: Principal, action: str, *roles: str) -> None:
    """Refuse a form to a principal without one of ``roles`` (the workflow refuses the
    action itself with the same words; this keeps the form from being shown at all)."""
    if not principal.has(*roles):
        raise ConsoleError(
            403, "forbidden_role",
            f"{principal.name} may not {action}: it needs the role {' or '.join(roles)}"
            f" (has: {', '.join(sorted(principal.roles)) or 'none'})",
        )
