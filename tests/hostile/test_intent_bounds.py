"""An intent's bound holds for the text that is searched, not only for the text received.

``intent`` is 1 to 512 characters, but NFKC (the first step of normalising it) expands
compatibility characters: U+FDFA is 18 characters and four words, U+3316 six katakana. So a
1.5 KB body held an intent that normalised to 9,216 characters. On the demo, against the
real engine, before this bound:

- ``"\\ufdfa" * 512`` (2,048 words) made the broad tier exceed the engine's clause limit
  (``too_many_nested_clauses``): a 503 ``engine_error``, the shopper's input reported as an
  engine failure;
- ``"\\u3316" * 512`` (one 3,072-character token) cost the engine 8 to 13 s of fuzzy
  matching in the broad tier, per request (a 200 at the end; past the default deadline of
  6 s the caller got a 503 while the engine kept working);
- ``/v1/compile`` answered a plan with a 9,216-character residual.

Now such an intent is a 422 ``invalid_request`` on ``body.intent`` (with one decision record
for the refused search), as is a policy test case holding one; an intent whose normalised
text stays within 512 characters is served as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from control_plane.bootstrap import Ready
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.lifecycle.suite import TestCase
from tests.hostile.conftest import Recorded, recorded_app

EXPANDING = {
    "fdfa": "\ufdfa" * 512,  # 9,216 characters, 2,048 words once normalised
    "katakana": "\u3316" * 512,  # one token of 3,072 characters
    "ligatures": "\ufb01" * 257,  # 514 characters: just past the bound
}
WITHIN = "\ufb01" * 256  # 512 characters once normalised: the bound itself


@pytest.fixture()
def api(tmp_path: Path, engine: Engine, settings: Settings, ready: Ready) -> Iterator[Recorded]:
    """The API with a JSONL recorder, no plan cache, and compile open to anyone."""
    search = settings.search.model_copy(update={"plan_cache_size": 0})
    auth = settings.auth.model_copy(update={"open_internals": True})
    configured = settings.model_copy(update={"search": search, "auth": auth})
    app, service, path = recorded_app(configured, engine, tmp_path, "bounds")
    with TestClient(app) as client:
        yield Recorded(client, path)
    service.close()


@pytest.mark.parametrize("intent", list(EXPANDING.values()), ids=list(EXPANDING))
def test_a_search_intent_longer_than_512_once_normalised_is_a_422(api: Recorded, intent: str) -> None:
    response = api.client.post("/v1/search", json={"intent": intent})
    assert response.status_code == 422, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert [d["location"] for d in error["details"]] == ["body.intent"]
    assert "once normalised" in error["details"][0]["message"]
    [record] = api.records(error["request_id"])
    assert record["error"]["status"] == 422


@pytest.mark.parametrize("intent", list(EXPANDING.values()), ids=list(EXPANDING))
def test_compile_refuses_it_too(api: Recorded, intent: str) -> None:
    response = api.client.post("/v1/compile", json={"intent": intent})
    assert response.status_code == 422, response.text[:300]
    assert response.json()["error"]["details"][0]["location"] == "body.intent"


def test_an_intent_of_512_characters_once_normalised_is_served(api: Recorded) -> None:
    response = api.client.post("/v1/search", json={"intent": WITHIN})
    assert response.status_code == 200, response.text[:300]
    compiled = api.client.post("/v1/compile", json={"intent": WITHIN})
    assert compiled.status_code == 200
    assert compiled.json()["plan"]["residual"] == "fi" * 256


def test_a_policy_test_case_with_such_an_intent_is_refused() -> None:
    case = {"name": "long", "intent": EXPANDING["fdfa"], "expect": {"matched": []}}
    with pytest.raises(ValidationError, match="once normalised"):
        TestCase.model_validate(case)
    TestCase.model_validate({**case, "intent": WITHIN})
