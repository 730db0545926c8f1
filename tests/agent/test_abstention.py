"""Abstention that means it: with the defaults, ``POST /v1/agent/query`` abstains when no
policy other than guards and ``always`` policies was applied, with a coded reason in the
answer and the record; a shopping message still gets products; ``/v1/search`` keeps
serving. Real engine, rules extractor (no model configured) unless stated."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agent_gateway.settings import GatewaySettings
from control_plane.service import SearchRequest, SearchService
from tests.agent.test_agent_audit import MakeAudited, make_audited  # noqa: F401
from tests.agent.test_agent_endpoint import client_for, rules_client  # noqa: F401
from tests.clocks import FIXED_NOW

OFF_TOPIC = [
    "What's the weather like in Paris tomorrow?",
    "Tell me a joke about cats",
    "Write me a poem about the sea",
    "reply in under 10 words: what is the capital of France",
    "Quel temps fera-t-il demain à Lyon ?",
]
SHOPPING = [
    "Hi! I'm looking for some cheap chocolate please",
    "oranges please",
    "Bonjour, je cherche du chocolat sans arachide s'il vous plait",
    "chocolate under 5 euros",
]


@pytest.mark.parametrize("message", OFF_TOPIC)
def test_an_off_topic_message_abstains_with_a_reason(rules_client: TestClient, message: str) -> None:  # noqa: F811
    body = rules_client.post("/v1/agent/query", json={"message": message}).json()
    assert body["status"] == "abstained" and body["reason_code"] == "no_policy_applied", body
    assert body["search"] is None and body["answer"]["citations"] == []
    assert "no shop policy applied" in body["reason"] and body["reason"] in body["answer"]["text"]


@pytest.mark.parametrize("message", SHOPPING)
def test_a_shopping_message_still_gets_products(rules_client: TestClient, message: str) -> None:  # noqa: F811
    body = rules_client.post("/v1/agent/query", json={"message": message}).json()
    assert body["status"] == "ok" and body["reason_code"] is None, body
    assert body["search"]["total"] > 0 and body["answer"]["citations"]


def test_a_policy_that_matched_and_was_skipped_does_not_count(service: SearchService) -> None:
    # "no" is a cue of without-allergen; "idea" maps to no allergen: matched, then skipped
    for settings in (GatewaySettings(), GatewaySettings(require_policy_match=True)):
        with client_for(service, settings) as client:
            body = client.post("/v1/agent/query", json={"message": "no idea, just show me stuff"}).json()
        assert body["status"] == "abstained" and body["reason_code"] == "no_policy_applied"
        assert "without-allergen (capture_unmapped)" in body["reason"]


def test_a_word_count_is_not_a_price_ceiling(rules_client: TestClient, service: SearchService) -> None:  # noqa: F811
    body = rules_client.post("/v1/agent/query", json={"message": "chocolate, reply in under 10 words"}).json()
    assert body["status"] == "ok"
    outcome = service.search(SearchRequest(intent=body["intent"]), FIXED_NOW)
    assert outcome.compiled.composition.plan.price.max is None
    skipped = {s.policy_id: s.code for s in outcome.compiled.composition.explanation.skipped}
    assert skipped.get("under-price") == "capture_unmapped"
    priced = service.search(SearchRequest(intent="chocolate under 10 euros"), FIXED_NOW)
    assert priced.compiled.composition.plan.price.max is not None
    assert priced.compiled.composition.plan.price.max.value == 10


def test_the_french_shopper_without_a_model(rules_client: TestClient, service: SearchService) -> None:  # noqa: F811
    message = "Bonjour, je cherche du thé vert bio s il vous plait"
    body = rules_client.post("/v1/agent/query", json={"message": message}).json()
    assert body["intent"] == "thé vert bio"  # no "s il vous plait" left
    assert body["status"] == "abstained" and body["reason_code"] == "no_policy_applied"
    assert body["answer"]["citations"] == [] and "Meilleurs résultats" not in body["answer"]["text"]
    # abstention off: served, but not presented as a confident answer
    with client_for(service, GatewaySettings(abstain="off")) as client:
        served = client.post("/v1/agent/query", json={"message": message}).json()
    assert served["status"] == "ok" and served["search"]["total"] > 0
    text = served["answer"]["text"]
    assert text.startswith("Aucune règle de la boutique ne reconnaît « thé vert bio »") and "[1]" in text
    assert "Meilleurs résultats" not in text


def test_broad_guards_only_serves_plain_words_but_not_a_catalog_dump(service: SearchService) -> None:
    with client_for(service, GatewaySettings(abstain="broad_guards_only")) as client:
        plain = client.post("/v1/agent/query", json={"message": "baguette"}).json()
        dump = client.post("/v1/agent/query", json={"message": "Tell me a joke about cats"}).json()
    assert plain["status"] == "ok" and plain["search"]["tier"] != "broad"
    strict = service.search(SearchRequest(intent="Tell me a joke about cats"), FIXED_NOW)
    assert strict.execution.tier == "broad" and strict.execution.total > 0  # what would be served
    assert dump["status"] == "abstained" and dump["reason_code"] == "broad_tier_guards_only"


def test_the_storefront_keeps_serving(rules_client: TestClient) -> None:  # noqa: F811
    response = rules_client.post("/v1/search", json={"intent": "Tell me a joke about cats"})
    assert response.status_code == 200 and response.json()["total"] > 0


def test_the_abstention_reason_is_coded_in_the_record(make_audited: MakeAudited) -> None:  # noqa: F811
    audited = make_audited()
    body, record = audited.ask("Tell me a joke about cats")
    assert body["status"] == record["status"] == "abstained"
    assert body["reason_code"] == record["reason_code"] == "no_policy_applied"
    assert record["reason"] == body["reason"] and record["applied"] == [] and record["matched"]
    body, record = audited.ask("Hello, thank you!")
    assert body["reason_code"] == record["reason_code"] == record["extraction"]["refusal_code"] == "empty"
    audited.verify()


def test_cohorts_must_be_identifiers(rules_client: TestClient) -> None:  # noqa: F811
    response = rules_client.post("/v1/agent/query", json={"message": "chocolate", "cohorts": ["not valid!"]})
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
    ok = rules_client.post("/v1/agent/query", json={"message": "chocolate", "cohorts": ["vegan"]})
    assert ok.status_code == 200
