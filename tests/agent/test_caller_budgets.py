"""Budgets are keyed on who the caller is: the API key's principal when one is presented,
else the client address. ``X-Client-Id`` is a label: rotating it resets nothing. Through
the HTTP API (TestClient's address is ``testclient``), on the real engine and key store."""

from __future__ import annotations

from agent_gateway.settings import GatewaySettings
from control_plane.lifecycle.keys import KeyStore
from control_plane.service import SearchService
from tests.agent.conftest import FakeLlm, Reply
from tests.agent.test_agent_endpoint import client_for
from tests.clocks import FIXED_NOW

QUERY = {"message": "oranges please"}


def test_rotating_the_client_id_does_not_reset_a_budget(service: SearchService, fake_llm: FakeLlm) -> None:
    fake_llm.default = Reply({"intent": "oranges"}, usage=(80, 20))
    with client_for(service, GatewaySettings(tokens_per_day=150), llm_url=fake_llm.url) as client:
        for label in ("bot-1", "bot-2"):
            response = client.post("/v1/agent/query", json=QUERY, headers={"X-Client-Id": label})
            assert response.status_code == 200
        refused = client.post("/v1/agent/query", json=QUERY, headers={"X-Client-Id": "bot-3"})
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["details"][0]["budget"] == "tokens_per_day" and "address:testclient" in error["message"]


def test_an_api_key_is_its_own_caller(service: SearchService) -> None:
    keys = KeyStore(service.engine, service.settings.auth.keys_index)
    key, _ = keys.create("h5-budget-bot", ["search"], FIXED_NOW)
    bearer = {"Authorization": f"Bearer {key}"}
    with client_for(service, GatewaySettings(requests_per_minute=2)) as client:
        for headers in (bearer, {**bearer, "X-Client-Id": "rotated"}):
            assert client.post("/v1/agent/query", json=QUERY, headers=headers).status_code == 200
        refused = client.post("/v1/agent/query", json=QUERY, headers={**bearer, "X-Client-Id": "again"})
        assert refused.status_code == 429 and "key:h5-budget-bot" in refused.json()["error"]["message"]
        # the address without the key is another caller, with its own budget
        assert client.post("/v1/agent/query", json=QUERY).status_code == 200
        # a presented key must be valid, even though the agent route needs none here
        wrong = client.post("/v1/agent/query", json=QUERY, headers={"Authorization": "Bearer gsk_nope_nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
