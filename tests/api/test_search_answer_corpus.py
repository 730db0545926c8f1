"""The search answer over HTTP, against the real engine (ADR 0041): for a corpus of requests
(plain and explained, cold and warm, every fallback tier, no results, facets, personalised,
paged, previewed at other instants, hostile Unicode intents) every ``/v1/search`` body is
byte for byte what the pydantic reference (``search_response(...).model_dump_json()``) gives
for the same outcome, validates as a ``SearchResponse``, and was written without pydantic
(the demo catalog's products hold only values the schema passes unchanged)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import control_plane.api.answer as answer_module
import control_plane.api.app as app_module
from control_plane.api import create_app
from control_plane.api.models import SearchResponse
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import AuditSettings, Settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from tests.clocks import FIXED_CLOCK, FIXED_NOW

INTENTS = [
    "oranges", "orange juice", "chocolate", "cheap chocolate", "chocolate without peanuts",
    "chocolat sans arachide", "chocolat sans cacahuètes", "dark chocolate", "chocolate under 5",
    "baby formula", "sodas", "clearance", "vanilla ice cream", "coffee creamer without milk",
    "green beans pas cher", "mustard", "lentils",
    # fallback tiers: terms no product has together, a misspelling
    "chocolate sardines lemonade", "dark chocolat orange peel biscuits", "chocolatte", "mustrad",
    # nothing at all
    "zzqxv wwkrp", "qqqqqqqq",
]
HOSTILE = [
    "cho\u200bcolate", "\u0441hocolate",  # zero-width space; a Cyrillic es
    "\u202echocolate\u202c", "chocolate \U0001f36b\U0001f36b", "cho\u0301colate",
    "".join(chr(ord(c) + 0xFEE0) for c in "chocolate"),  # full-width Latin
    "巧克力", "شوكولاتة", "chocolate\u2028oranges", "\u00a0chocolate\u00a0", "\"chocolate\" <b>\\</b>",
    "chocolate \ud800", "\udffforanges",  # lone surrogates, as JSON escapes may carry them: 422
]


@pytest.fixture(scope="module")
def served(
    engine: Engine, settings: Settings, ready: Ready, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """An app of its own (its lifespan started: warm searches run on the event loop) and an
    auditor's key (explain, previews)."""
    directory: Path = tmp_path_factory.mktemp("answer")
    own = settings.model_copy(update={
        "audit": AuditSettings(
            path=str(directory / "decisions.jsonl"), key_file=str(directory / "audit.key")
        ),
    })
    service = SearchService(own, engine, profile_of(own))
    try:
        with TestClient(create_app(service, clock=FIXED_CLOCK), raise_server_exceptions=False) as client:
            key, _ = client.app.state.keys.create("answer-auditor", ["auditor"], FIXED_NOW)  # type: ignore[attr-defined]
            yield client, {"authorization": f"Bearer {key}"}
    finally:
        service.close()


def corpus() -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    for intent in INTENTS:
        bodies += [{"intent": intent}, {"intent": intent}, {"intent": intent, "explain": True}]
    for intent in ("chocolate", "oranges", "orange juice", "cheap chocolate"):
        bodies += [
            {"intent": intent, "user_id": "alice"}, {"intent": intent, "user_id": "alice", "explain": True},
            {"intent": intent, "user_id": "bruno", "market": "fr", "explain": True},
            {"intent": intent, "cohorts": ["vegan"], "page": 2, "size": 3},
            {"intent": intent, "size": 50},
            {"intent": intent, "size": 1, "explain": True, "now": "2026-12-10T12:00:00.000001+05:30"},
            {"intent": intent, "now": "2026-12-24T23:59:59.999999Z"},
        ]
    for intent in HOSTILE:
        bodies += [{"intent": intent}, {"intent": intent, "explain": True}]
    return bodies


def test_every_answer_is_the_references_bytes_written_without_pydantic(
    served: tuple[TestClient, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, auditor = served
    real, reference = answer_module.search_answer, answer_module.search_response
    seen: list[tuple[bytes | str, int]] = []

    def spied(rid: str, request: Any, outcome: Any, profile: Any) -> bytes:
        try:
            expected: bytes | str = reference(rid, request, outcome, profile).model_dump_json().encode()
        except Exception as error:  # the app's 500 either way
            expected = type(error).__name__
        asked = []
        with monkeypatch.context() as patch:  # counted, then answered as it would have been
            def counted(*args: Any) -> Any:
                asked.append(args)
                return reference(*args)

            patch.setattr(answer_module, "search_response", counted)
            try:
                answered = real(rid, request, outcome, profile)
            except Exception as error:
                seen.append((expected, len(asked)))
                assert type(error).__name__ == expected
                raise
        seen.append((expected, len(asked)))
        assert answered == expected
        return answered

    monkeypatch.setattr(app_module, "search_answer", spied)
    statuses, tiers, refused = set(), set(), []
    explained = personalised = non_ascii = 0
    for body in corpus():
        headers = auditor if body.get("explain") or body.get("now") else {}
        response = client.post("/v1/search", content=json.dumps(body), headers={
            "content-type": "application/json", **headers,
        })
        if response.status_code == 422:  # refused before it was searched: not a valid string
            refused.append(body["intent"])
            continue
        expected, asked = seen.pop()
        assert response.status_code == (200 if isinstance(expected, bytes) else 500), body
        if not isinstance(expected, bytes):
            continue
        assert response.content == expected, body
        assert SearchResponse.model_validate_json(response.content).model_dump_json().encode() == expected
        assert asked == 0, body  # no value of the demo catalog needs pydantic
        answer = response.json()
        statuses.add(answer["status"])
        tiers.add(answer["tier"])
        explained += answer["explanation"] is not None
        personalised += bool(answer["explanation"] and answer["explanation"]["personalization"])
        non_ascii += not response.content.isascii()
    assert seen == []
    assert statuses == {"ok", "no_results"} and tiers == {"strict", "relaxed", "broad", None}, tiers
    assert explained >= 40 and personalised >= 4 and non_ascii >= 10
    assert set(refused) == {"chocolate \ud800", "\udffforanges"}  # a lone surrogate
