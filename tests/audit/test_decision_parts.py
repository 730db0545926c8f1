"""The decision record of a served search built from per-plan parts (``audit.decision``) is the
record the schema's model builds from the same request, byte for byte in canonical form, for
real searches against the engine: raw intent on and off, cached and not, a user and a market,
an extraction, a status override; records of one cached plan share nothing they could change."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from control_plane.audit.decision import decision_data, plan_fields
from control_plane.audit.keys import read_key_file
from control_plane.audit.record import (
    DecisionRecord,
    Extraction,
    Usage,
    canonical_bytes,
    canonical_json_python,
    request_params,
)
from control_plane.audit.recorder import _outcome_fields
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from control_plane.bootstrap import profile_of
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.service import Outcome, SearchRequest, SearchService
from control_plane.times import iso
from tests.audit.conftest import jsonl_recorder
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


def test_threads_recording_hits_of_fresh_plans_get_the_models_records_sealed_in_order(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    """8 threads record the first hits of plans nobody recorded yet (the per-plan parts are
    computed while other threads read them), through the writer in batches of 4: every record
    is the model's, the chain is in file order, each thread's records in the order it wrote."""
    service = SearchService(settings, engine, profile_of(settings))  # a plan cache of its own
    requests = [SearchRequest(intent=intent, size=3 + n) for n, intent in enumerate(INTENTS[:4])]
    served = [(request, service.search(request, FIXED_NOW)) for request in requests]
    service.close()
    recorder = jsonl_recorder(tmp_path, batch=4)
    threads, each = 8, 12

    def write(thread: int) -> None:
        for n in range(each):
            request, outcome = served[(thread + n) % len(served)]
            recorder.decision(f"t{thread}-{n}", request, outcome, client="c-1", time=FIXED_NOW, now=FIXED_NOW)

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    recorder.close()
    path = tmp_path / "decisions.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["sequence"] for r in records] == list(range(threads * each))
    for thread in range(threads):
        assert [r["request_id"] for r in records if r["request_id"].startswith(f"t{thread}-")] == [
            f"t{thread}-{n}" for n in range(each)
        ]
    for record in records:
        thread, n = (int(x) for x in record["request_id"][1:].split("-"))
        request, outcome = served[(thread + n) % len(served)]
        expected = _model_record(record["request_id"], request, outcome, True, None, None)
        sealed = {k: v for k, v in record.items() if k not in ("writer", "sequence", "prev_hash", "hash",
                                                               "key_id", "mac")}
        assert sealed == {k: v for k, v in expected.items() if k not in ("writer", "sequence", "prev_hash",
                                                                         "hash")}
    report = verify_lines(JsonlSink(path).lines(), keys=read_key_file(tmp_path / "audit.key"))
    assert report.ok and report.keyed and report.records == threads * each
