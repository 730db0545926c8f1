"""The console's session and forms against the real engine (FastAPI's TestClient): cookie
flags, CSRF missing or wrong refused 403 before anything runs, a search-role key kept away
from every form, sign-out."""

from __future__ import annotations

from fastapi.testclient import TestClient

from control_plane.console.session import COOKIE, csrf_token
from tests.console.conftest import SIGN_IN_TOKEN, sign_in
from tests.lifecycle.conftest import Lifecycle

POLICY_YAML = """\
id: console-creamers
title: creamer means coffee creamers
owner: merch-team-grocery
priority: 60
trigger:
  phrase: [creamer]
rules:
  - category: {values: [Coffee creamers]}
"""

STATE_CHANGING = {
    "/console/author": {"policy_yaml": POLICY_YAML, "reason": "x"},
    "/console/author/check": {"policy_yaml": POLICY_YAML},
    "/console/tests": {"file": "grocery/tests/c.yaml", "tests_yaml": ""},
    "/console/review/test": {"version": "staging"},
    "/console/review/approve": {"version": "staging"},
    "/console/review/promote": {"version": "staging"},
    "/console/review/rollback": {},
    "/console/review/disable": {"policy_id": "in-stock-only", "reason": "x"},
    "/console/sign-out": {},
}


def fresh(lc: Lifecycle) -> TestClient:
    return TestClient(lc.client.app, raise_server_exceptions=False)


def staging_version(lc: Lifecycle) -> str | None:
    try:
        return lc.workflow.environment("staging").version
    except Exception:
        return None


def test_session_cookie_is_httponly_strict_and_scoped(lifecycle: Lifecycle) -> None:
    client = fresh(lifecycle)
    form = client.get("/console/sign-in")
    token = SIGN_IN_TOKEN.search(form.text)
    assert token
    answer = client.post("/console/sign-in", data={"sign_in_token": token.group(1),
                                                   "api_key": lifecycle.keys["dan"]},
                         follow_redirects=False)
    assert answer.status_code == 303
    cookie = next(v for v in answer.headers.get_list("set-cookie") if v.startswith(COOKIE + "="))
    flags = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in flags
    assert "samesite=strict" in flags
    assert "path=/console" in flags
    assert "secure" not in flags  # plain http, api.secure_cookies off
    assert answer.headers["location"] == "/console/policies"


def test_secure_flag_over_https(lifecycle: Lifecycle) -> None:
    client = TestClient(lifecycle.client.app, base_url="https://testserver", raise_server_exceptions=False)
    form = client.get("/console/sign-in")
    assert "secure" in [p.strip().lower() for p in form.headers["set-cookie"].split(";")]
    token = SIGN_IN_TOKEN.search(form.text)
    assert token
    answer = client.post("/console/sign-in", data={"sign_in_token": token.group(1),
                                                   "api_key": lifecycle.keys["dan"]},
                         follow_redirects=False)
    cookie = next(v for v in answer.headers.get_list("set-cookie") if v.startswith(COOKIE + "="))
    assert "secure" in [part.strip().lower() for part in cookie.split(";")]


def test_sign_in_needs_its_form_token(lifecycle: Lifecycle) -> None:
    client = fresh(lifecycle)
    answer = client.post("/console/sign-in", data={"api_key": lifecycle.keys["dan"]}, follow_redirects=False)
    assert answer.status_code == 403
    assert "csrf_failed" in answer.text
    assert COOKIE + "=" not in answer.headers.get("set-cookie", "")


def test_unknown_key_is_refused_and_pages_need_a_session(lifecycle: Lifecycle) -> None:
    client = fresh(lifecycle)
    assert client.get("/console/policies", follow_redirects=False).headers["location"] == "/console/sign-in"
    form = client.get("/console/sign-in")
    token = SIGN_IN_TOKEN.search(form.text)
    assert token
    answer = client.post("/console/sign-in", data={"sign_in_token": token.group(1),
                                                   "api_key": "gsk_000000000000_" + "a" * 43})
    assert answer.status_code == 401
    assert "the API key is not valid" in answer.text


def test_missing_or_wrong_csrf_is_refused_before_anything_runs(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    client = fresh(lc)
    token = sign_in(client, lc.keys["dan"])
    before = staging_version(lc)
    for sent in (None, "0" * 64, csrf_token(lc.keys["alice"])):  # none, forged, another session's
        data = {"policy_yaml": POLICY_YAML, "reason": "csrf"}
        if sent is not None:
            data["csrf"] = sent
        answer = client.post("/console/author", data=data)
        assert answer.status_code == 403, answer.text
        assert "csrf_failed" in answer.text
    for path, fields in STATE_CHANGING.items():
        answer = client.post(path, data={**fields, "csrf": "f" * 64}, follow_redirects=False)
        assert answer.status_code == 403, (path, answer.text)
        assert "csrf_failed" in answer.text
    assert staging_version(lc) == before
    assert not lc.workflow.history(actor="dan")  # nothing ran, nothing was refused by the workflow
    # the right token goes through
    answer = client.post("/console/author", data={"policy_yaml": POLICY_YAML, "reason": "ok", "csrf": token},
                         follow_redirects=False)
    assert answer.status_code == 303, answer.text
    assert staging_version(lc) not in (None, before)


def test_a_search_key_reaches_no_form(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    client = fresh(lc)
    form = client.get("/console/sign-in")
    token = SIGN_IN_TOKEN.search(form.text)
    assert token
    answer = client.post("/console/sign-in", follow_redirects=False,
                         data={"sign_in_token": token.group(1), "api_key": lc.keys["shop"]})
    assert answer.status_code == 403
    assert "shop may not use the console" in answer.text
    assert COOKIE + "=" not in answer.headers.get("set-cookie", "")
    # even holding a cookie with the key (set by hand), every page and form is refused
    client.cookies.set(COOKIE, lc.keys["shop"], path="/console")
    for path in ("/console/policies", "/console/author", "/console/tests", "/console/review",
                 "/console/preview?intent=creamer", "/console/audit", "/console/history"):
        answer = client.get(path, follow_redirects=False)
        assert answer.status_code == 403, (path, answer.status_code)
        assert "shop may not use the console" in answer.text
        assert 'name="csrf"' not in answer.text
    before = staging_version(lc)
    for path, fields in STATE_CHANGING.items():
        data = {**fields, "csrf": csrf_token(lc.keys["shop"])}
        answer = client.post(path, data=data, follow_redirects=False)
        assert answer.status_code == 403, (path, answer.text)
    assert staging_version(lc) == before


def test_forms_of_other_roles_are_refused(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    client = fresh(lc)
    token = sign_in(client, lc.keys["carol"])  # auditor: reads, may not draft
    answer = client.get("/console/author")
    assert answer.status_code == 403
    assert "carol may not draft: it needs the role author" in answer.text
    answer = client.post("/console/review/approve", data={"version": "staging", "csrf": token})
    assert answer.status_code == 403
    assert "carol may not approve: it needs the role approver" in answer.text  # the workflow's words
    dan = fresh(lc)
    sign_in(dan, lc.keys["dan"])
    assert "dan may not read the audit" in dan.get("/console/audit").text


def test_sign_out_ends_the_session(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    client = fresh(lc)
    token = sign_in(client, lc.keys["dan"])
    answer = client.post("/console/sign-out", data={"csrf": token}, follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/sign-in?note=signed_out"
    cleared = next(v for v in answer.headers.get_list("set-cookie") if v.startswith(COOKIE + "="))
    assert "max-age=0" in cleared.lower()
    assert client.get("/console/policies", follow_redirects=False).status_code == 303


def test_a_revoked_key_ends_its_session(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    client = fresh(lc)
    sign_in(client, lc.keys["dan"])
    from control_plane.lifecycle.keys import KeyStore

    store = KeyStore(lc.engine, lc.settings.auth.keys_index)
    store.revoke(lc.principals["dan"].key_id or "", lc.workflow.clock())
    answer = client.get("/console/policies", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/sign-in?note=expired"
    assert "no longer valid" in client.get(answer.headers["location"]).text
