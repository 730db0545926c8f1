"""The decision record of a served search built from per-plan parts (``audit.decision``) is the
record the schema's model builds from the same request, byte for byte in canonical form, for
real searches against the engine: raw intent on and off, cached and not, a user and a market,
an extraction, a status override; records of one cached plan share nothing they could change."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from control_plane.audit.decision import decision_data, plan_fields
from control_plane.audit.record import (
    DecisionRecord,
    Extraction,
    Usage,
    canonical_bytes,
    canonical_json_python,
    request_params,
)
from control_plane.audit.recorder import _outcome_fields
from control_plane.service import Outcome, SearchRequest, SearchService
from control_plane.times import iso
from tests.clocks import FIXED_NOW

INTENTS = ("chocolate without peanuts", "cheap chocolate", "ORANGES", "oranges", "chocolat sans arachide",
           "sodas", "baby formula", "\uff43\uff48\uff4f\uff43\uff4f\uff4c\uff41\uff54\uff45")  # fullwidth


def _model_record(request_id: str, request: SearchRequest, outcome: Outcome, raw: bool,
                  extraction: Extraction | None, status: str | None) -> dict[str, Any]:
    """The record as the schema's model builds it (what the recorder did per request before)."""
    fields = _outcome_fields(outcome, raw)
    if status is not None:
        fields["status"] = status
    return DecisionRecord(
        request_id=request_id, time=iso(FIXED_NOW), now=iso(FIXED_NOW), client="c-1", endpoint="search",
        extraction=extraction,
        request=request_params(request.cohorts, request.market, request.user_id, request.page, request.size,
                               raw),
        **fields,
    ).model_dump(mode="json")


def _parts_record(request_id: str, request: SearchRequest, outcome: Outcome, raw: bool,
                  extraction: Extraction | None, status: str | None) -> dict[str, Any]:
    return decision_data(
        request_id, request, outcome, raw=raw, time=iso(FIXED_NOW), now=iso(FIXED_NOW), client="c-1",
        endpoint="search", extraction=extraction.model_dump(mode="json") if extraction else None,
        status=status,
    )


@pytest.fixture(scope="module")
def outcomes(service: SearchService) -> Iterator[list[tuple[SearchRequest, Outcome]]]:
    served = []
    for number, intent in enumerate(INTENTS):
        request = SearchRequest(
            intent=intent, user_id="shopper@example.com" if number % 2 else None,
            market="fr" if number % 3 == 0 else None, page=1 + number % 2, size=5 + number,
        )
        served.append((request, service.search(request, FIXED_NOW)))  # a miss
        served.append((request, service.search(request, FIXED_NOW)))  # a hit on the cached plan
    yield served


@pytest.mark.parametrize("raw", [True, False])
def test_a_record_from_parts_is_the_models_record(outcomes: list[tuple[SearchRequest, Outcome]],
                                                  raw: bool) -> None:
    extraction = Extraction(method="rules", flags=["pii_email"], usage=Usage(prompt_tokens=3))
    cached = [outcome.compiled.cached for _, outcome in outcomes]
    assert True in cached and False in cached
    for number, (request, outcome) in enumerate(outcomes):
        options: dict[str, Any] = {
            "extraction": extraction if number % 3 == 0 else None,
            "status": "abstained" if number % 5 == 0 else None,
        }
        built = _parts_record(f"r-{number}", request, outcome, raw, **options)
        model = _model_record(f"r-{number}", request, outcome, raw, **options)
        assert built == model
        assert canonical_bytes(built) == canonical_bytes(model) == canonical_json_python(model).encode()
        assert DecisionRecord.model_validate(built).model_dump(mode="json") == built  # the schema holds
        if not raw:  # the words of the intent and the user id stay out of the record
            assert built["intent"] is None and built["intent_redacted"] is not None
            assert "example.com" not in canonical_bytes(built).decode()


def test_records_of_one_cached_plan_share_nothing_they_could_change(
    outcomes: list[tuple[SearchRequest, Outcome]],
) -> None:
    request, outcome = outcomes[1]
    first = _parts_record("a", request, outcome, True, None, None)
    expected = _parts_record("b", request, outcome, True, None, None)
    for value in first.values():
        if isinstance(value, list):
            value.append("changed")
        elif isinstance(value, dict):
            value["changed"] = True
    assert _parts_record("b", request, outcome, True, None, None) == expected


def test_a_plan_shared_under_another_intent_is_not_reported_as_its_neighbours(
    outcomes: list[tuple[SearchRequest, Outcome]],
) -> None:
    _, outcome = outcomes[1]
    assert plan_fields(outcome.compiled, True)["intent"] == outcome.compiled.intent
    other = dataclasses.replace(outcome.compiled, intent="something else")  # the same renderings
    assert other.renderings is outcome.compiled.renderings
    assert plan_fields(other, True)["intent"] == "something else"
    assert plan_fields(outcome.compiled, True)["intent"] == outcome.compiled.intent
