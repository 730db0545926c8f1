"""Decision records, the audit API, replay, events and impact, over the real engine."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from control_plane import policy_store
from control_plane.audit.chain import record_hash
from control_plane.audit.record import sha256_json
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from control_plane.bootstrap import resolve
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine, connect
from control_plane.loader import build_policy_set, load_policy_set
from tests.audit.conftest import MakeClient
from tests.clocks import ticking_clock


def _search(client: TestClient, intent: str, **extra: Any) -> dict[str, Any]:
    response = client.post(
        "/v1/search",
        json={"intent": intent, "explain": True, **extra},
        headers={"X-Govsearch-Client": "shop-web"},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _applied(body: dict[str, Any]) -> list[str]:
    return [step["policy_id"] for step in body["explanation"]["applied"]]


def test_a_record_per_search(make_client: MakeClient) -> None:
    client, _ = make_client()
    body = _search(client, "cheap chocolate")
    record = client.get(f"/v1/audit/decisions/{body['request_id']}").json()
    assert record["schema_version"] == 1 and record["kind"] == "decision"
    # explain needs a key (the auditor's here): the record names the key's principal
    assert record["intent"] == "cheap chocolate" and record["client"] == "test-auditor"
    assert record["policy_set_version"] == body["policy_set_version"]
    assert record["applied_policies"] == _applied(body) and "chocolate" in record["applied_policies"]
    assert [m["policy_id"] for m in record["matched"]] == [
        m["policy_id"] for m in body["explanation"]["matched"]
    ]
    assert record["resolutions"] == body["explanation"]["resolutions"]
    assert record["dsl_sha256"] == sha256_json(body["explanation"]["dsl"])
    assert (record["tier"], record["hits"], record["status"]) == (body["tier"], body["total"], "ok")
    assert record["hit_ids"] == [hit["id"] for hit in body["hits"]]
    assert {"percolate", "compose", "render.strict", "tier.strict", "total"} <= set(record["latency_ms"])
    assert record["error"] is None and record_hash(record) == record["hash"]
    plain = client.post("/v1/search", json={"intent": "oranges"}, headers={"X-Govsearch-Client": "shop-web"})
    labelled = client.get(f"/v1/audit/decisions/{plain.json()['request_id']}").json()
    assert labelled["client"] == "shop-web"  # no key needed, none checked: the header's label


def test_a_record_per_failure(make_client: MakeClient, tmp_path: Path) -> None:
    closed = connect(EngineSettings(url="http://127.0.0.1:9", kind="opensearch", timeout_s=1))
    client, recorder = make_client(engine_=closed)
    response = client.post("/v1/search", json={"intent": "oranges"})
    assert response.status_code == 503
    error = response.json()["error"]
    record = recorder.find(error["request_id"])
    assert record is not None
    assert record["status"] == "error" and record["error"]["code"] == error["code"] == "engine_unavailable"
    assert record["intent"] == "oranges"
    invalid = client.post("/v1/search", json={"intent": ""})
    assert invalid.status_code == 422
    refused = recorder.find(invalid.json()["error"]["request_id"])
    assert refused is not None and refused["error"]["code"] == "invalid_request"
    too_large = client.post("/v1/search", content=b"x" * 20_000, headers={"content-type": "application/json"})
    assert too_large.status_code == 413
    large = recorder.find(too_large.json()["error"]["request_id"])
    assert large is not None and large["error"]["code"] == "request_too_large"
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert verify_lines(JsonlSink(tmp_path / "decisions.jsonl").lines()).ok


def test_unknown_decision_is_404_in_the_error_shape(make_client: MakeClient) -> None:
    client, _ = make_client()
    response = client.get("/v1/audit/decisions/nope")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "decision_not_found"


def test_per_policy_counts_match_the_requests(make_client: MakeClient) -> None:
    client, _ = make_client()
    expected: Counter[str] = Counter()
    for intent in ["cheap chocolate", "cheap chocolate", "oranges", "chocolate without peanuts"]:
        expected.update(_applied(_search(client, intent)))
    listing = client.get("/v1/audit/decisions").json()
    assert listing["total"] == 4 and listing["counts"] == dict(expected)
    chocolate = client.get("/v1/audit/decisions", params={"policy_id": "chocolate"}).json()
    assert chocolate["total"] == expected["chocolate"]
    assert all("chocolate" in r["applied_policies"] for r in chocolate["decisions"])
    future = client.get("/v1/audit/decisions", params={"since": "2999-01-01T00:00:00Z"}).json()
    assert future["total"] == 0
    bad = client.get("/v1/audit/decisions", params={"since": "yesterday"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_time"


def test_replay_reproduces_the_plan_for_the_same_version(make_client: MakeClient) -> None:
    client, _ = make_client()
    body = _search(client, "cheap chocolate", cohorts=["vegan"])
    result = client.post("/v1/audit/replay", json={"request_id": body["request_id"]}).json()
    assert result["original"]["reproduced"] is True
    assert result["identical"] is True and result["diff"] == []
    assert result["original"]["policy_set_version"] == body["policy_set_version"]


@pytest.fixture()
def other_version(engine: Engine, settings: Settings) -> Any:
    full = load_policy_set(resolve(settings.policies.dir))
    policies = [p for p in full.policies if p.id != "chocolate"]
    reduced = build_policy_set(policies, full.vocabularies, full.governance)
    index = policy_store.write_index(engine, settings.policies.index_prefix, reduced)
    yield reduced.version
    if index != policy_store.resolve(engine, settings.policies.index_prefix, "live").index:  # type: ignore[union-attr]
        engine.delete_index(index)


def test_replay_against_another_version_diffs_the_plans(make_client: MakeClient, other_version: str) -> None:
    client, _ = make_client()
    body = _search(client, "cheap chocolate")
    response = client.post(
        "/v1/audit/replay", json={"request_id": body["request_id"], "policy_set_version": other_version}
    )
    result = response.json()
    assert response.status_code == 200, result
    assert result["replayed"]["policy_set_version"] == other_version
    assert result["original"]["reproduced"] is True and result["identical"] is False
    assert "chocolate" in result["policies"]["removed"]
    fields = {change["field"] for change in result["diff"]}
    assert "applied" in fields and any(f.startswith(("category", "margin_weight")) for f in fields)
    unknown = client.post(
        "/v1/audit/replay", json={"request_id": body["request_id"], "policy_set_version": "0" * 64}
    )
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_version"


def test_raw_intent_never_reaches_the_sink_when_off(make_client: MakeClient, tmp_path: Path) -> None:
    client, _ = make_client(store_raw_intent=False)
    intent = "chocolate for jane.doe@example.com call 0612345678"
    body = _search(client, intent, user_id="jane-42")
    _search(client, "cheap chocolate")
    raw = (tmp_path / "decisions.jsonl").read_bytes()
    for secret in (intent, "jane.doe", "example.com", "0612345678", "jane-42"):
        assert secret.encode() not in raw, secret
    record = client.get(f"/v1/audit/decisions/{body['request_id']}").json()
    assert record["intent"] is None and record["raw_intent_stored"] is False
    assert record["intent_redacted"] == "chocolate for <email> call <phone>"
    assert len(record["intent_sha256"]) == 64
    refused = client.post("/v1/audit/replay", json={"request_id": body["request_id"]})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "raw_intent_not_stored"


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def test_metrics_move_as_requests_are_served(make_client: MakeClient) -> None:
    client, _ = make_client()
    before = client.get("/metrics").text
    body = _search(client, "cheap chocolate")
    _search(client, "cheap chocolate")
    nothing = _search(client, "zzqqxxyy nothing like this")
    after = client.get("/metrics").text
    assert _metric(after, "govsearch_zero_results_total") == (1 if nothing["total"] == 0 else 0)
    assert (
        _metric(after, 'govsearch_requests_total{status="ok"}')
        >= _metric(before, 'govsearch_requests_total{status="ok"}') + 2
    )
    assert _metric(after, 'govsearch_policies_fired_total{policy_id="chocolate"}') == 2
    assert _metric(after, 'govsearch_stage_latency_seconds_count{stage="percolate"}') >= 1
    assert _metric(after, f'govsearch_tier_served_total{{tier="{body["tier"]}"}}') >= 2
    assert _metric(after, 'govsearch_plan_cache_total{result="hit"}') >= 1
    assert _metric(after, 'govsearch_plan_cache_total{result="miss"}') >= 1
    # the intent matching nothing was speculated, and guessed right (ADR 0048)
    assert _metric(after, 'govsearch_speculation_total{guess="right"}') >= 1
    assert _metric(after, 'govsearch_speculation_total{guess="wrong"}') == 0
    errors = client.post("/v1/search", json={"intent": ""})
    assert errors.status_code == 422
    after = client.get("/metrics").text
    assert _metric(after, 'govsearch_errors_total{code="invalid_request"}') == 1


def test_events_and_impact(make_client: MakeClient) -> None:
    client, _ = make_client()
    with_policy = [_search(client, "cheap chocolate") for _ in range(4)]
    assert all("chocolate" in _applied(b) for b in with_policy)
    events = [
        (with_policy[0], "click"),
        (with_policy[0], "purchase"),
        (with_policy[1], "click"),
        (with_policy[1], "click"),
        (with_policy[2], "add_to_cart"),
    ]
    for body, kind in events:
        response = client.post(
            "/v1/events",
            json={"request_id": body["request_id"], "type": kind, "product_id": body["hits"][0]["id"]},
        )
        assert response.status_code == 201, response.text
        assert response.json()["hash"]
    unknown = client.post("/v1/events", json={"request_id": "nope", "type": "click"})
    assert unknown.status_code == 404
    report = client.get("/v1/audit/policies/chocolate/impact").json()
    fired = report["fired"]
    assert fired["requests"] == 4 and fired["clicks"] == 2 and fired["conversions"] == 1
    assert fired["click_through_rate"] == 0.5 and fired["conversion_rate"] == 0.25
    assert fired["add_to_cart_rate"] == 0.25 and fired["zero_result_rate"] == 0.0
    assert report["without"] is None  # no request of these intents ran without the policy
    none = client.get("/v1/audit/policies/chocolate/impact", params={"until": "2000-01-01T00:00:00Z"})
    assert none.json()["fired"]["requests"] == 0


def test_spans_per_stage_when_configured(make_client: MakeClient) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from control_plane.audit.telemetry import Telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client, _ = make_client(telemetry=Telemetry.with_provider(provider))
    body = _search(client, "cheap chocolate", user_id="u-1")
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert {"govsearch.search", "percolate", "purchases", "compose", "render.strict", "tier.strict"} <= set(
        spans
    )
    root = spans["govsearch.search"]
    assert root.attributes["govsearch.request_id"] == body["request_id"]
    assert "chocolate" in root.attributes["govsearch.applied"]
    assert spans["compose"].parent.span_id == root.context.span_id
    assert spans["tier.strict"].attributes["govsearch.hits"] >= 0
    provider.shutdown()


def test_cli_show(
    make_client: MakeClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from control_plane.cli import main

    client, _ = make_client()
    body = _search(client, "oranges")
    monkeypatch.setenv("GOVSEARCH_AUDIT_PATH", str(tmp_path / "decisions.jsonl"))
    monkeypatch.setenv("GOVSEARCH_AUDIT_INSTANCE_ID", "test-writer")
    assert main(["audit", "show", body["request_id"]]) == 0
    assert json.loads(capsys.readouterr().out)["request_id"] == body["request_id"]


def test_engine_sink_keeps_the_same_chained_records(engine: Engine) -> None:
    from control_plane.audit.record import ErrorOut
    from control_plane.audit.recorder import Recorder
    from control_plane.audit.sinks import EngineSink
    from control_plane.times import parse_time

    index = "gstest-audit-sink"
    engine.delete_index(index)
    clock = ticking_clock()  # distinct record times, for the time-window reads
    try:
        for _ in range(2):  # a second recorder resumes the writer's chain from the index
            recorder = Recorder(
                EngineSink(engine, index), EngineSink(engine, index + "-events"), instance_id="engine-writer",
                clock=clock,
            )
            for n in range(2):
                recorder.failure(f"req-{n}", ErrorOut(code="x", message="y", status=503))
        records = list(EngineSink(engine, index).scan())
        assert [r["sequence"] for r in records] == [0, 1, 2, 3]
        report = verify_lines((n, json.dumps(r)) for n, r in enumerate(records, start=1))
        assert report.ok and report.records == 4
        assert recorder.find("req-1") is not None
        # reads are narrowed by the engine, and cut exactly by the recorder
        found = recorder.find("req-1")
        assert found is not None and found["sequence"] == 3
        sink = EngineSink(engine, index)
        narrowed = list(sink.select(request_id="req-0", since=None, until=None))
        assert [r["sequence"] for r in narrowed] == [0, 2]
        mid = parse_time(records[2]["time"])
        expected = [r for r in records if parse_time(r["time"]) >= mid]
        assert recorder.decision_records(since=mid) == expected and len(expected) >= 2
        assert recorder.decision_records(until=mid) == [r for r in records if r not in expected]
    finally:
        engine.delete_index(index)
        engine.delete_index(index + "-events")
