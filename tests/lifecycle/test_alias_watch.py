"""The serving process watches the live alias instead of looking it up per request: at most
once per ``alias_watch_interval_s``, and at once after a move made through the process.
Whoever loads a new set does so while the other requests go on with the previous one; an
alias on two indices is refused with 503 ``policy_set_ambiguous``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from control_plane import policy_store
from control_plane.api import create_app
from control_plane.api.errors import ENGINE_MESSAGES
from control_plane.bootstrap import profile_of
from control_plane.config import Settings
from control_plane.engine import Engine, connect
from control_plane.loader import build_policy_set, load_policy_set
from control_plane.policy import Policy
from control_plane.service import SearchRequest, SearchService
from tests.clocks import FIXED_CLOCK, FIXED_NOW
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_four_eyes_lineage import CLEMENTINES


class Counted:
    """The real engine, with its alias lookups counted."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.lookups = engine, 0
        original = engine.alias_targets

        def alias_targets(alias: str) -> list[str]:
            if alias.endswith("-live"):
                self.lookups += 1
            return original(alias)

        engine.alias_targets = alias_targets  # type: ignore[method-assign]


def watching(settings: Settings, interval_s: float) -> Settings:
    return settings.model_copy(update={
        "search": settings.search.model_copy(update={"alias_watch_interval_s": interval_s})
    })


@pytest.fixture()
def counted(lifecycle: Lifecycle) -> Iterator[Counted]:
    engine = connect(lifecycle.settings.engine.model_copy(update={"url": lifecycle.engine.url}))
    yield Counted(engine)
    engine.close()


def second_set(lc: Lifecycle) -> str:
    """Publish another version to live, as another process would; its version."""
    demo = load_policy_set("policies")
    extra = Policy.model_validate(CLEMENTINES)
    other = build_policy_set([*demo.policies, extra], demo.vocabularies, demo.governance)
    policy_store.publish(lc.engine, lc.settings.policies.index_prefix, other, "live")
    return other.version


def served(service: SearchService) -> str:
    return service.compile(SearchRequest(intent="oranges"), FIXED_NOW).policy_set_version


def test_the_alias_is_read_once_per_interval_not_per_request(lifecycle: Lifecycle, counted: Counted) -> None:
    lc = lifecycle
    service = SearchService(watching(lc.settings, 3600), counted.engine, profile_of(lc.settings))
    try:
        first = served(service)
        for intent in ("oranges", "cheap chocolate", "soda", "chocolate", "creamer") * 4:
            outcome = service.search(SearchRequest(intent=intent), FIXED_NOW)
            assert outcome.compiled.policy_set_version == first
        assert counted.lookups == 1

        # Another process moves live: this one keeps serving what it watched...
        moved = second_set(lifecycle)
        assert served(service) == first
        # ...until its next check (here forced: a move through this process).
        service.alias_moved("live")
        assert served(service) == moved
        assert counted.lookups == 2
    finally:
        service.close()


def test_with_no_interval_every_request_checks(lifecycle: Lifecycle, counted: Counted) -> None:
    service = SearchService(watching(lifecycle.settings, 0), counted.engine, profile_of(lifecycle.settings))
    try:
        first = served(service)
        moved = second_set(lifecycle)
        assert served(service) == moved != first
        assert counted.lookups == 2
    finally:
        service.close()


def test_requests_go_on_with_the_previous_set_while_one_loads(lifecycle: Lifecycle) -> None:
    service = SearchService(watching(lifecycle.settings, 0), lifecycle.engine, profile_of(lifecycle.settings))
    try:
        first = served(service)
        second_set(lifecycle)
        answers: list[str] = []
        service._check.acquire()  # someone is checking or loading a set right now
        try:
            thread = threading.Thread(target=lambda: answers.append(served(service)))
            thread.start()
            thread.join(timeout=60)
            assert not thread.is_alive(), "a request waited on the loading lock"
        finally:
            service._check.release()
        assert answers == [first]
        assert served(service) != first  # the check, once free, picks the move up
    finally:
        service.close()


def test_a_promotion_through_the_api_is_served_by_the_next_request(lifecycle: Lifecycle) -> None:
    """The app's workflow tells its service: no wait for the interval."""
    lc = lifecycle
    service = SearchService(watching(lc.settings, 3600), lc.engine, profile_of(lc.settings))
    client = TestClient(create_app(service, clock=FIXED_CLOCK), raise_server_exceptions=False)
    try:
        before = client.post("/v1/search", json={"intent": "oranges"}).json()["policy_set_version"]
        response = client.post(
            "/v1/policies/live/policies/in-stock-only/disable",
            headers=lc.as_("root"), json={"reason": "watch test"},
        )
        assert response.status_code == 200, response.text
        after = client.post("/v1/search", json={"intent": "oranges"}).json()["policy_set_version"]
        assert after == response.json()["version"] != before
    finally:
        client.close()
        service.close()


def test_an_alias_on_two_indices_is_refused_with_503(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    live = lc.workflow.environment("live").index
    other = second_set(lc)
    other_index = policy_store.index_name(lc.settings.policies.index_prefix, other)
    alias = policy_store.alias_name(lc.settings.policies.index_prefix, "live")
    lc.engine.update_aliases([{"add": {"index": live, "alias": alias}}])  # an operator's mistake
    assert lc.engine.alias_targets(alias) == sorted([live, other_index])
    settings = watching(lc.settings, 0)
    opened = settings.model_copy(update={"auth": settings.auth.model_copy(update={"open_internals": True})})
    service = SearchService(opened, lc.engine, profile_of(lc.settings))  # compile without a key
    client = TestClient(create_app(service, clock=FIXED_CLOCK), raise_server_exceptions=False)
    try:
        for path, body in (("/v1/search", {"intent": "oranges"}), ("/v1/compile", {"intent": "oranges"})):
            response = client.post(path, json=body)
            assert response.status_code == 503, response.text
            error: dict[str, Any] = response.json()["error"]
            assert error["code"] == "policy_set_ambiguous"
            assert error["message"] == ENGINE_MESSAGES["policy_set_ambiguous"]  # no index names
        promote = lc.call("POST", "/v1/policies/rollback", "bob", json={})
        assert promote.status_code == 503 and promote.json()["error"]["code"] == "policy_set_ambiguous"
    finally:
        client.close()
        service.close()
