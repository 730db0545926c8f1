"""Invisible and look-alike characters cannot switch the allergen exclusion off.

The three evasions measured in issue 13 -- zero-width characters inside the cue and the
allergen, a Cyrillic ``i`` in "without", a Cyrillic ``e`` in "arachide" -- go through
``/v1/search``, ``/v1/compile``, the agent gateway (rules extractor, and the real
``openai`` client against the local stub model), the MCP tool function and policy-test
cases and replay, on the real engine with the demo catalog and policies. Each must apply
``without-allergen``, serve no product whose allergens or traces include peanuts, render
the same DSL as the clean text, and leave one decision record saying what normalisation
did. An intent with nothing visible in it is a 422.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from agent_gateway.gateway import AgentGateway
from agent_gateway.llm import LlmClient
from agent_gateway.mcp_server import search_products_sync
from agent_gateway.settings import GatewaySettings
from control_plane.api.app import create_app
from control_plane.audit.recorder import Recorder
from control_plane.audit.replay import run as replay_run
from control_plane.audit.sinks import JsonlSink
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import LlmSettings, Settings
from control_plane.engine import Engine
from control_plane.lifecycle.runner import run_case
from control_plane.lifecycle.suite import TestCase
from control_plane.service import SearchService
from control_plane.times import iso
from tests.agent.conftest import FakeLlm, Reply
from tests.clocks import FIXED_CLOCK, FIXED_NOW

ZERO_WIDTH = "chocolate with\u200bout pea\u200dnuts\ufeff"
CYRILLIC_I = "chocolate w\u0456thout peanuts"
CYRILLIC_IE = "chocolat sans arachid\u0435"

#: hostile intent -> (the clean text it means, the mixed-script words it holds)
EVASIONS: dict[str, tuple[str, list[str]]] = {
    ZERO_WIDTH: ("chocolate without peanuts", []),
    CYRILLIC_I: ("chocolate without peanuts", ["w\u0456thout"]),
    CYRILLIC_IE: ("chocolat sans arachide", ["arachid\u0435"]),
}
IDS = ["zero-width", "cyrillic-i", "cyrillic-ie"]


@dataclass
class Audited:
    client: TestClient
    service: SearchService
    path: Path

    def record(self, request_id: str) -> dict[str, Any]:
        records = [json.loads(line) for _, line in JsonlSink(self.path).lines()]
        found: list[dict[str, Any]] = [r for r in records if r["request_id"] == request_id]
        assert len(found) == 1, found
        return found[0]


@pytest.fixture()
def audited(tmp_path: Path, engine: Engine, settings: Settings, ready: Ready) -> Iterator[Audited]:
    """The API with a JSONL recorder and no plan cache (every request percolates); explain
    and compile open (``auth.open_internals``: what is tested here is what they show)."""
    search_settings = settings.search.model_copy(update={"plan_cache_size": 0})
    auth = settings.auth.model_copy(update={"open_internals": True})
    uncached = settings.model_copy(update={"search": search_settings, "auth": auth})
    path = tmp_path / "decisions.jsonl"
    recorder = Recorder(JsonlSink(path), JsonlSink(tmp_path / "events.jsonl"), instance_id="hostile",
                        clock=FIXED_CLOCK)
    service = SearchService(uncached, engine, profile_of(uncached), recorder=recorder)
    app = create_app(service, clock=FIXED_CLOCK)
    app.state.agent_gateway = AgentGateway(service, GatewaySettings(), clock=FIXED_CLOCK)
    with TestClient(app) as client:
        yield Audited(client, service, path)
    service.close()


def peanut_products(engine: Engine, service: SearchService, ids: list[str]) -> list[str]:
    """The ids among ``ids`` whose allergens or traces include peanuts (read from the index)."""
    if not ids:
        return []
    body = {"query": {"ids": {"values": ids}}, "size": len(ids), "_source": ["allergens", "traces"]}
    hits = engine.search(service.profile.alias, body)["hits"]["hits"]
    assert len(hits) == len(ids)
    return sorted(
        hit["_id"] for hit in hits
        if "peanuts" in (hit["_source"].get("allergens") or []) + (hit["_source"].get("traces") or [])
    )


def search(audited: Audited, intent: str) -> dict[str, Any]:
    response = audited.client.post("/v1/search", json={"intent": intent, "size": 50, "explain": True})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def applied(body: dict[str, Any]) -> set[str]:
    return {step["policy_id"] for step in body["explanation"]["applied"]}


def test_without_the_exclusion_the_demo_serves_peanut_products(audited: Audited, engine: Engine) -> None:
    """What the evasions are after: the same chocolate searches serve peanuts when the
    allergen policy does not fire (so the assertions below can fail)."""
    for intent in ("chocolate", "chocolat"):
        body = search(audited, intent)
        assert "without-allergen" not in applied(body)
        assert peanut_products(engine, audited.service, [hit["id"] for hit in body["hits"]])


@pytest.mark.parametrize("hostile", list(EVASIONS), ids=IDS)
def test_search_applies_the_exclusion_and_serves_no_peanuts(
    audited: Audited, engine: Engine, hostile: str
) -> None:
    clean, mixed = EVASIONS[hostile]
    body = search(audited, hostile)
    assert "without-allergen" in applied(body)
    assert {c["policy_id"] for c in body["explanation"]["captures"]} >= {"without-allergen"}
    assert body["hits"] and not peanut_products(engine, audited.service, [hit["id"] for hit in body["hits"]])
    reference = search(audited, clean)
    assert body["explanation"]["dsl"] == reference["explanation"]["dsl"]
    assert [h["id"] for h in body["hits"]] == [h["id"] for h in reference["hits"]]
    record = audited.record(body["request_id"])
    assert record["intent"] == clean
    assert record["intent_normalised"] is True and record["intent_mixed_script"] == mixed
    assert "without-allergen" in record["applied_policies"]
    clean_record = audited.record(reference["request_id"])
    assert clean_record["intent_normalised"] is False and clean_record["intent_mixed_script"] == []


@pytest.mark.parametrize("hostile", list(EVASIONS), ids=IDS)
def test_compile_renders_the_clean_texts_plan(audited: Audited, hostile: str) -> None:
    clean, _ = EVASIONS[hostile]
    answers = [audited.client.post("/v1/compile", json={"intent": text}) for text in (hostile, clean)]
    assert [a.status_code for a in answers] == [200, 200], answers[0].text
    hostile_body, clean_body = (a.json() for a in answers)
    assert hostile_body["dsl"] == clean_body["dsl"] and hostile_body["plan"] == clean_body["plan"]
    assert "without-allergen" in hostile_body["plan"]["applied"]


@pytest.mark.parametrize("route", ["/v1/search", "/v1/compile"])
@pytest.mark.parametrize("intent", ["\u0000\u0001 \u200b", "\u200b\u200d\ufeff", "\u202e\u202c \t"])
def test_an_intent_with_nothing_visible_is_a_422(audited: Audited, route: str, intent: str) -> None:
    response = audited.client.post(route, json={"intent": intent})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert any("intent" in json.dumps(detail) for detail in error["details"])


# --- the agent gateway ----------------------------------------------------------------


@pytest.mark.parametrize("hostile", list(EVASIONS), ids=IDS)
def test_agent_rules_extraction_applies_the_exclusion(audited: Audited, engine: Engine, hostile: str) -> None:
    clean, mixed = EVASIONS[hostile]
    message = f"Hello, I'm looking for {hostile} please"
    response = audited.client.post("/v1/agent/query", json={"message": message})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ok" and body["intent"] == clean
    assert body["extraction"]["flags"] == (["mixed_script"] if mixed else ["control_characters"])
    hits = [hit["id"] for hit in body["search"]["hits"]]
    assert hits and not peanut_products(engine, audited.service, hits)
    record = audited.record(body["request_id"])
    assert record["intent"] == clean and "without-allergen" in record["applied_policies"]
    assert record["extraction"]["flags"] == body["extraction"]["flags"]


@pytest.mark.parametrize("hostile", list(EVASIONS), ids=IDS)
def test_agent_model_output_is_normalised_before_it_is_searched(
    audited: Audited, engine: Engine, fake_llm: FakeLlm, hostile: str
) -> None:
    """The model answers with the hostile intent (as an injected message could make it)."""
    clean, mixed = EVASIONS[hostile]
    fake_llm.default = Reply({"intent": hostile})
    llm = LlmClient(LlmSettings(base_url=fake_llm.url, model="m", timeout_s=5))
    gateway = AgentGateway(audited.service, GatewaySettings(), llm=llm, clock=FIXED_CLOCK)
    audited.client.app.state.agent_gateway = gateway  # type: ignore[attr-defined]
    try:
        response = audited.client.post("/v1/agent/query", json={"message": "something sweet for my son"})
    finally:
        gateway.close()
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ok" and body["intent"] == clean
    assert body["extraction"]["flags"] == (["mixed_script"] if mixed else ["control_characters"])
    hits = [hit["id"] for hit in body["search"]["hits"]]
    assert hits and not peanut_products(engine, audited.service, hits)
    assert "without-allergen" in audited.record(body["request_id"])["applied_policies"]


def test_agent_message_with_nothing_visible_abstains(audited: Audited) -> None:
    response = audited.client.post("/v1/agent/query", json={"message": "\u0000\u0001 \u200b"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "abstained" and body["extraction"]["refusal_code"] == "empty"
    assert body["extraction"]["flags"] == ["control_characters"]
    record = audited.record(body["request_id"])
    assert record["status"] == "abstained" and record["extraction"]["refusal_code"] == "empty"


def test_agent_model_answering_nothing_visible_abstains(audited: Audited, fake_llm: FakeLlm) -> None:
    fake_llm.default = Reply({"intent": "\u200b\u2060\ufeff"})
    llm = LlmClient(LlmSettings(base_url=fake_llm.url, model="m", timeout_s=5))
    gateway = AgentGateway(audited.service, GatewaySettings(), llm=llm, clock=FIXED_CLOCK)
    audited.client.app.state.agent_gateway = gateway  # type: ignore[attr-defined]
    try:
        body = audited.client.post("/v1/agent/query", json={"message": "chocolate"}).json()
    finally:
        gateway.close()
    assert body["status"] == "abstained" and body["extraction"]["refusal_code"] == "empty"
    assert audited.record(body["request_id"])["status"] == "abstained"


@pytest.mark.parametrize("hostile", list(EVASIONS), ids=IDS)
def test_mcp_tool_applies_the_exclusion(audited: Audited, engine: Engine, hostile: str) -> None:
    clean, mixed = EVASIONS[hostile]
    result = search_products_sync(audited.service, GatewaySettings(), hostile, now=FIXED_NOW)
    assert result.status == "ok" and result.intent == clean
    ids = [product.product_id for product in result.products]
    assert ids and not peanut_products(engine, audited.service, ids)
    record = audited.record(result.request_id)
    assert record["endpoint"] == "mcp" and "without-allergen" in record["applied_policies"]
    assert record["extraction"]["flags"] == (["mixed_script"] if mixed else ["control_characters"])


# --- policy tests ----------------------------------------------------------------------


def peanut_free_case(intent: str) -> TestCase:
    return TestCase.model_validate({
        "name": "no peanuts",
        "intent": intent,
        "expect": {"applied": ["without-allergen"],
                   "results": {"size": 50, "min_hits": 1, "none": {"allergens": {"contains": "peanuts"}}}},
    })


def test_the_policy_test_case_fails_where_peanuts_are_served(audited: Audited) -> None:
    result = run_case(audited.service, peanut_free_case("chocolate"), FIXED_NOW)
    assert not result.passed and result.failures


@pytest.mark.parametrize("hostile", list(EVASIONS), ids=IDS)
def test_policy_test_cases_read_the_evasions_as_their_clean_text(audited: Audited, hostile: str) -> None:
    result = run_case(audited.service, peanut_free_case(hostile), FIXED_NOW)
    assert result.passed, result.failures


def test_a_policy_test_case_with_nothing_visible_is_refused() -> None:
    with pytest.raises(ValidationError, match="invisible characters"):
        peanut_free_case("\u200b\u2060 \u0000")


# --- replay ----------------------------------------------------------------------------


@pytest.mark.parametrize("hostile", list(EVASIONS), ids=IDS)
def test_replay_normalises_a_recorded_intent(audited: Audited, hostile: str) -> None:
    """Records written before this normaliser kept zero-width characters and look-alikes
    in ``intent`` (NFC only): replaying one decides as the clean text does today."""
    clean, _ = EVASIONS[hostile]
    live = audited.service.snapshot()[0]
    replayed, reference = (
        replay_run(audited.service, {"intent": text, "request": {}, "time": iso(FIXED_NOW)}, live)
        for text in (hostile, clean)
    )
    assert "without-allergen" in replayed.as_json()["applied"]
    assert replayed.as_json() == reference.as_json()
