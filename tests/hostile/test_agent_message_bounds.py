"""A shopper's message is bounded as it is screened, not only as it was received.

``max_message_chars`` (2,000) was checked on the message received; the guardrails then
normalise it (NFKC expands compatibility characters: U+3316 is six katakana) and run their
regular expressions over the result. The e-mail and ``structured_input`` patterns are
quadratic in the length of one word, so 2,000 U+3316 (a 6 KB body) became one
12,000-character word that took 0.7 s of a worker's CPU to screen, per request (measured on
this machine; 2,000 plain letters take 14 ms), before the intent was refused as too long.
Now such a message is refused before anything reads it: 413 ``message_too_large``, with its
one decision record, like a message over 2,000 characters as received.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agent_gateway.gateway import AgentGateway
from agent_gateway.guardrails import MessageTooLarge, screen
from agent_gateway.settings import GatewaySettings
from control_plane.bootstrap import Ready
from control_plane.config import Settings
from control_plane.engine import Engine
from tests.clocks import FIXED_CLOCK
from tests.hostile.conftest import Recorded, recorded_app

EXPANDING = "\u3316" * 2000  # 12,000 characters, one word, once normalised
WITHIN = "\ufb01" * 1000  # 2,000 characters once normalised: the bound itself


def test_a_message_longer_than_the_bound_once_normalised_is_refused() -> None:
    with pytest.raises(MessageTooLarge) as raised:
        screen(EXPANDING, max_chars=2000)
    assert (raised.value.length, raised.value.limit) == (12_000, 2000)
    assert "once normalised" in str(raised.value)


def test_a_message_within_the_bound_once_normalised_is_screened() -> None:
    assert screen(WITHIN, max_chars=2000).text == "fi" * 1000
    with pytest.raises(MessageTooLarge):
        screen(WITHIN + "\ufb01", max_chars=2000)


@pytest.fixture()
def agent(tmp_path: Path, engine: Engine, settings: Settings, ready: Ready) -> Iterator[Recorded]:
    app, service, path = recorded_app(settings, engine, tmp_path, "agent-bounds")
    app.state.agent_gateway = AgentGateway(service, GatewaySettings(), clock=FIXED_CLOCK)
    with TestClient(app) as client:
        yield Recorded(client, path)
    service.close()


def test_the_agent_answers_413_with_one_record(agent: Recorded) -> None:
    response = agent.client.post("/v1/agent/query", json={"message": EXPANDING})
    assert response.status_code == 413, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "message_too_large"
    [record] = agent.records(error["request_id"])
    assert record["endpoint"] == "agent" and record["error"]["code"] == "message_too_large"


def test_the_agent_still_serves_a_message_within_the_bound(agent: Recorded) -> None:
    response = agent.client.post("/v1/agent/query", json={"message": "cheap chocolate " + "\ufb01" * 10})
    assert response.status_code == 200, response.text[:300]
