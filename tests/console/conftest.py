"""Console fixtures: the lifecycle's app over the real engine (its own policies prefix and
keys for a cast of principals), and helpers to sign in through the page."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.e2e.conftest import ready, service, settings  # noqa: F401
from tests.lifecycle.conftest import CAST, Lifecycle, lifecycle  # noqa: F401

CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
SIGN_IN_TOKEN = re.compile(r'name="sign_in_token" value="([^"]+)"')


def sign_in(client: TestClient, key: str) -> str:
    """Sign ``client`` in with ``key`` through the form; the session's CSRF token."""
    form = client.get("/console/sign-in")
    token = SIGN_IN_TOKEN.search(form.text)
    assert token, form.text
    answer = client.post("/console/sign-in", data={"sign_in_token": token.group(1), "api_key": key},
                         follow_redirects=False)
    assert answer.status_code == 303, answer.text
    page = client.get("/console/policies")
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found, page.text
    return found.group(1)
