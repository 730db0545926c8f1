"""Readiness that tells the truth, a total request deadline, and a body limit that counts
what is received: over the real engine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from control_plane import deadline, policy_store
from control_plane.api import create_app
from control_plane.api.errors import ENGINE_MESSAGES
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine, connect
from control_plane.service import SearchService
from tests.api.test_search_api import assert_error_shape
from tests.audit.conftest import jsonl_recorder
from tests.audit.test_writer_edges import NoThreads
from tests.clocks import FIXED_CLOCK


def _with(service: SearchService, **sections: dict[str, object]) -> Settings:
    update = {
        name: getattr(service.settings, name).model_copy(update=values) for name, values in sections.items()
    }
    return service.settings.model_copy(update=update)


def _app(service: SearchService, settings: Settings, tmp_path: Path) -> TestClient:
    recorder = jsonl_recorder(tmp_path)
    served = SearchService(settings, service.engine, service.profile, recorder=recorder)
    return TestClient(create_app(served, clock=FIXED_CLOCK), raise_server_exceptions=False)


def _records(tmp_path: Path) -> list[dict[str, object]]:
    lines = (tmp_path / "decisions.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture()
def live_alias(service: SearchService, index_prefix: str) -> Iterator[tuple[Settings, str]]:
    """Settings whose live policies alias is ``<index_prefix>-live``, pointing nowhere yet."""
    settings = _with(service, policies={"index_prefix": index_prefix})
    yield settings, policy_store.alias_name(index_prefix, "live")


# --- readiness ------------------------------------------------------------------


def test_ready_names_the_indices_and_their_health(service: SearchService, tmp_path: Path) -> None:
    ready = _app(service, service.settings, tmp_path).get("/readyz")
    assert ready.status_code == 200
    checks = ready.json()["checks"]
    assert checks["cluster"] in ("green", "yellow") and checks["engine"] == "ok"
    alias = policy_store.alias_name(service.settings.policies.index_prefix, "live")
    live = service.engine.alias_targets(alias)
    assert [checks["policies_index"]] == live


def test_a_live_alias_on_two_indices_is_not_ready(
    service: SearchService, engine: Engine, live_alias: tuple[Settings, str], tmp_path: Path
) -> None:
    settings, alias = live_alias
    live = service.snapshot()[0].index
    prefix = settings.policies.index_prefix
    for name in (f"{prefix}-a", f"{prefix}-b"):
        engine.create_index(name, {"settings": {"number_of_shards": 1}})
        engine.update_aliases([{"add": {"index": name, "alias": alias}}])
    response = _app(service, settings, tmp_path).get("/readyz")
    assert response.status_code == 503
    assert_error_shape(response.json(), "policies_alias_ambiguous")
    assert f"{prefix}-a" in response.json()["error"]["message"]
    assert live not in response.json()["error"]["message"]


def test_no_live_policy_set_is_not_ready(
    service: SearchService, live_alias: tuple[Settings, str], tmp_path: Path
) -> None:
    response = _app(service, live_alias[0], tmp_path).get("/readyz")
    assert response.status_code == 503
    assert_error_shape(response.json(), "no_live_policy_set")


def test_a_red_live_index_is_not_ready(
    service: SearchService, engine: Engine, live_alias: tuple[Settings, str], tmp_path: Path
) -> None:
    """A live index whose primary shard cannot be assigned (as after an engine restart,
    before recovery): every search would fail, so readiness says so."""
    settings, alias = live_alias
    red = f"{settings.policies.index_prefix}-red"
    unassignable = {"settings": {"number_of_shards": 1, "number_of_replicas": 0,
                                 "index.routing.allocation.require._name": "no-such-node"}}
    engine.request("PUT", f"/{red}", body=unassignable, params={"wait_for_active_shards": "0"})
    engine.update_aliases([{"add": {"index": red, "alias": alias}}])
    response = _app(service, settings, tmp_path).get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert_error_shape(body, "cluster_red")
    assert {"check": "cluster", "status": "red"} in body["error"]["details"]


def test_an_unreachable_engine_is_not_ready_and_its_text_stays_in_the_log(
    service: SearchService, tmp_path: Path
) -> None:
    dead = connect(EngineSettings(url="http://127.0.0.1:9", kind=service.engine.kind, timeout_s=1))
    served = SearchService(service.settings, dead, service.profile, recorder=jsonl_recorder(tmp_path))
    response = TestClient(create_app(served, clock=FIXED_CLOCK)).get("/readyz")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] in ENGINE_MESSAGES and error["message"] == ENGINE_MESSAGES[error["code"]]
    assert "127.0.0.1" not in response.text  # no host, no engine error text


# --- deadline -------------------------------------------------------------------


def test_an_expired_deadline_answers_503_with_one_record(service: SearchService, tmp_path: Path) -> None:
    settings = _with(service, api={"request_deadline_s": 1e-6}, auth={"open_internals": True})  # compile too
    client = _app(service, settings, tmp_path)
    response = client.post("/v1/search", json={"intent": "cheap chocolate"})
    assert response.status_code == 503
    error = response.json()["error"]
    assert_error_shape(response.json(), "deadline_exceeded")
    assert "hits" not in response.text
    records = [r for r in _records(tmp_path) if r["request_id"] == error["request_id"]]
    assert len(records) == 1
    assert records[0]["status"] == "error" and records[0]["error"]["code"] == "deadline_exceeded"  # type: ignore[index]
    compiled = client.post("/v1/compile", json={"intent": "oranges"})
    assert compiled.json()["error"]["code"] == "deadline_exceeded"
    # routes outside the serving path are not bounded by it
    assert client.get("/readyz").status_code == 200


def test_a_generous_deadline_serves_governed_answers(service: SearchService, tmp_path: Path) -> None:
    settings = _with(service, api={"request_deadline_s": 120.0})
    response = _app(service, settings, tmp_path).post("/v1/search", json={"intent": "cheap chocolate"})
    assert response.status_code == 200 and response.json()["policy_set_version"]


def test_the_default_deadline_is_a_little_above_the_engine_timeout() -> None:
    settings = Settings.model_validate({"engine": {"timeout_s": 5}})
    assert settings.request_deadline_s() == 6.0
    assert Settings.model_validate({"api": {"request_deadline_s": 2.5}}).request_deadline_s() == 2.5


def test_engine_calls_get_what_remains_of_the_deadline() -> None:
    assert deadline.call_timeout(5.0) == 5.0  # no deadline: the call's own timeout
    with deadline.bounded(3600):
        assert 3590 < deadline.call_timeout(7200) <= 3600
        assert deadline.call_timeout(5.0) == 5.0
    with deadline.bounded(1e-9), pytest.raises(deadline.DeadlineExceeded):
        deadline.call_timeout(5.0)
    assert deadline.current() is None


def test_a_requested_deadline_binds_only_the_enforced_work() -> None:
    """The request's deadline bounds the search pipeline, not what runs after it (writing
    the decision record)."""
    inside = deadline.enforced(lambda: deadline.call_timeout(5.0))
    with deadline.requested(1e-9):
        assert deadline.call_timeout(5.0) == 5.0  # e.g. the record's write
        with pytest.raises(deadline.DeadlineExceeded):
            inside()
    assert inside() == 5.0


def test_a_search_whose_record_has_no_writer_is_refused_and_not_recorded(
    service: SearchService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process cannot start the audit writer's thread (at its thread limit): the search
    is refused with 503 ``audit_unavailable`` in the one error shape, no hit in it, and no
    record of it is queued to be written later as if it had been served. Once threads can
    be had, the next search is served and recorded."""
    client = _app(service, service.settings, tmp_path)
    with monkeypatch.context() as patched:
        no_threads = NoThreads(patched)
        refused = client.post("/v1/search", json={"intent": "cheap chocolate"})
    assert no_threads.refused >= 1
    assert refused.status_code == 503
    assert_error_shape(refused.json(), "audit_unavailable")
    assert "hits" not in refused.text
    served = client.post("/v1/search", json={"intent": "cheap chocolate"})
    assert served.status_code == 200
    assert [r["request_id"] for r in _records(tmp_path)] == [served.json()["request_id"]]


# --- body limit -----------------------------------------------------------------


def _chunks(total: int, size: int = 8192) -> Iterator[bytes]:
    yield b'{"intent": "'
    for _ in range(total // size):
        yield b"a" * size
    yield b'"}'


def test_a_chunked_oversized_body_is_refused_and_recorded(service: SearchService, tmp_path: Path) -> None:
    client = _app(service, service.settings, tmp_path)
    response = client.post(
        "/v1/search", content=_chunks(1_000_000), headers={"content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert response.status_code == 413
    assert_error_shape(response.json(), "request_too_large")
    rid = response.json()["error"]["request_id"]
    records = [r for r in _records(tmp_path) if r["request_id"] == rid]
    assert len(records) == 1 and records[0]["error"]["code"] == "request_too_large"  # type: ignore[index]


def test_a_chunked_body_under_the_limit_is_served(service: SearchService, tmp_path: Path) -> None:
    client = _app(service, service.settings, tmp_path)
    small = iter([b'{"intent": ', b'"cheap chocolate"}'])
    response = client.post("/v1/search", content=small, headers={"content-type": "application/json"})
    assert response.status_code == 200


def test_a_false_content_length_is_refused(service: SearchService, tmp_path: Path) -> None:
    client = _app(service, service.settings, tmp_path)
    response = client.post(
        "/v1/search",
        content=b'{"intent": "x"}',
        headers={"content-type": "application/json", "content-length": "x1"},
    )
    assert response.status_code == 413
    assert_error_shape(response.json(), "request_too_large")
