"""``search_response`` validates the whole answer in one call (ADR 0033): the JSON must be
exactly what building each ``HitOut`` and then the ``SearchResponse`` gives, coercions
included (an integer price is a float, a missing field null, display values as stored)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from control_plane.api.answer import search_response
from control_plane.api.models import HitOut, SearchResponse
from control_plane.service import SearchRequest

PROFILE = SimpleNamespace(title="name", brand="maker", price="cost", display=("cost", "colour", "tags"))
SOURCES: list[dict[str, Any]] = [
    {"name": "Dark chocolate", "maker": "Acme", "cost": 3, "colour": "brown", "tags": ["vegan", 1]},
    {"name": "Milk chocolate", "cost": 2.49},  # no brand, no colour
    {"maker": "Other", "cost": None, "colour": {"rgb": [1, 2, 3]}},
]


def _outcome(sources: list[dict[str, Any]], status: str = "ok") -> Any:
    hits = tuple(
        SimpleNamespace(id=f"p{n}", source=source, score=None if n == 2 else 1.25 * n,
                        sponsored_by=("acme",) if n == 0 else (),
                        policies=("acme", "vegan") if n == 0 else ())
        for n, source in enumerate(sources)
    )
    execution = SimpleNamespace(hits=hits, status=status, tier="relaxed", total=42,
                                facets={"brand": [{"key": "Acme", "count": 3}]}, reason="because", dsl={})
    return SimpleNamespace(execution=execution, compiled=SimpleNamespace(policy_set_version="v" * 64),
                           now=datetime(2026, 12, 10, 12, 0, tzinfo=UTC))


def _reference(rid: str, outcome: Any) -> SearchResponse:
    """The answer built as before: each ``HitOut``, then the ``SearchResponse``."""
    execution = outcome.execution
    hits = [
        HitOut(id=hit.id, title=hit.source.get(PROFILE.title), brand=hit.source.get(PROFILE.brand),
               price=hit.source.get(PROFILE.price), score=hit.score, sponsored=bool(hit.sponsored_by),
               policies=list(hit.policies),
               display={name: hit.source[name] for name in PROFILE.display if name in hit.source})
        for hit in execution.hits
    ]
    return SearchResponse(request_id=rid, policy_set_version=outcome.compiled.policy_set_version,
                          now=outcome.now, status=execution.status, tier=execution.tier,
                          total=execution.total, hits=hits, facets=dict(execution.facets),
                          reason=execution.reason, explanation=None)


@pytest.mark.parametrize("sources", [SOURCES, SOURCES[:1], []], ids=["three hits", "one hit", "no hits"])
def test_the_answer_is_byte_for_byte_the_one_built_hit_by_hit(sources: list[dict[str, Any]]) -> None:
    outcome = _outcome(sources)
    answer = search_response("rid", SearchRequest(intent="chocolate"), outcome, PROFILE)
    assert answer.model_dump_json() == _reference("rid", outcome).model_dump_json()
    assert answer == _reference("rid", outcome)


def test_a_value_the_model_refuses_is_refused_as_before() -> None:
    outcome = _outcome([{"name": ["not", "a", "title"]}])
    with pytest.raises(ValidationError):
        _reference("rid", outcome)
    with pytest.raises(ValidationError):
        search_response("rid", SearchRequest(intent="chocolate"), outcome, PROFILE)
