"""The cold path against the real engine: a plan-cache miss for a user whose purchases are
not cached sends its percolation and the purchases lookup in one ``_msearch`` (ADR 0032),
and compiles exactly what the two requests sent apart compile; either item failing fails
the search (a missing purchases index is no rows, as alone)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from control_plane import matcher, personalization
from control_plane.bootstrap import Ready
from control_plane.config import Settings
from control_plane.engine import Engine, EngineError, counted_requests
from control_plane.service import PURCHASES_INDEX, SearchRequest
from tests.clocks import FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401
from tests.integration.test_hot_path import Recording, _seen, _service


def _items(body: str) -> list[str]:
    """The indices an ``_msearch`` body searched, in order."""
    return [json.loads(header)["index"] for header in body.splitlines()[::2]]


def test_a_miss_with_a_user_sends_percolation_and_purchases_in_one_msearch(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    recording = Recording(engine)
    # not speculated: without a user, the percolation would go with the first tiers (ADR 0049)
    cold = _service(recording, settings, ready, plan_cache_size=0, speculation=False)
    cached = _service(engine, settings, ready)
    request = SearchRequest(intent="chocolate without peanuts", user_id="alice")
    try:
        cold.search(SearchRequest(intent="oranges"), FIXED_NOW)  # the watches read once
        recording.sent.clear()
        outcome = cold.search(request, FIXED_NOW)
        first, *tiers = [(path, body) for _, path, body in recording.sent]
        assert first[0] == "/_msearch"
        assert _items(first[1]) == [ready.policies_index, PURCHASES_INDEX]
        assert all(path == "/_msearch" for path, _ in tiers)
        assert outcome.engine_requests == 1 + outcome.execution.round_trips == len(recording.sent)
        # the same rows and plan as the lookup and the percolation sent apart: the plan
        # compiled without a user (cached), then the user's purchases looked up alone
        rows = personalization.lookup_purchases(engine, PURCHASES_INDEX, "alice")
        assert rows and outcome.compiled.purchases == tuple(rows)
        anonymous = cached.search(SearchRequest(intent=request.intent), FIXED_NOW)
        apart = cached.search(request, FIXED_NOW)
        assert not anonymous.compiled.cached and apart.compiled.cached
        assert outcome.compiled.composition == apart.compiled.composition
        assert outcome.compiled.personalization == apart.compiled.personalization
        assert _seen(outcome.execution) == _seen(apart.execution)
        # the two stages share the round trip: the percolate stage spans it
        stages = {stage.name: stage for stage in outcome.stages}
        assert stages["percolate"].start_ns <= stages["purchases"].start_ns
        assert stages["percolate"].end_ns >= stages["purchases"].end_ns
        # without a user, the percolation alone (its own ``_search``)
        recording.sent.clear()
        cold.search(SearchRequest(intent=request.intent), FIXED_NOW)
        assert recording.sent[0][1] == f"/{ready.policies_index}/_search"
    finally:
        cold.close()
        cached.close()


def test_lookup_alongside_answers_as_the_searches_sent_apart(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    intent = matcher.clean_intent("chocolate without peanuts")
    search = matcher.percolation(ready.policies_index, intent)
    with counted_requests() as requests:
        answer, rows = personalization.lookup_alongside(engine, PURCHASES_INDEX, "alice", search)
    assert requests[0] == 1
    assert rows == personalization.lookup_purchases(engine, PURCHASES_INDEX, "alice") and rows
    alone = engine.search(*search)
    assert [hit["_id"] for hit in answer["hits"]["hits"]] == [hit["_id"] for hit in alone["hits"]["hits"]]
    service = _service(engine, settings, ready)
    _, policies = service.snapshot()
    service.close()
    assert matcher.match(engine, search[0], intent, policies, now=FIXED_NOW, first=answer) == matcher.match(
        engine, search[0], intent, policies, now=FIXED_NOW
    )


def test_lookup_alongside_fails_closed(engine: Engine, ready: Ready, index_prefix: str) -> None:  # noqa: F811
    search = matcher.percolation(ready.policies_index, "chocolate")
    # no purchases index: no rows, as the lookup alone answers
    missing = f"{index_prefix}-no-purchases"
    answer, rows = personalization.lookup_alongside(engine, missing, "alice", search)
    assert rows == [] and personalization.lookup_purchases(engine, missing, "alice") == []
    assert answer["hits"]["hits"]
    # a purchases index the lookup fails on (``count`` is text: it cannot be sorted on)
    broken = f"{index_prefix}-purchases"
    mapping: dict[str, Any] = {"properties": {"user_id": {"type": "keyword"}, "count": {"type": "text"}}}
    engine.create_index(broken, {"mappings": mapping})
    with pytest.raises(EngineError) as alone:
        personalization.lookup_purchases(engine, broken, "alice")
    with pytest.raises(EngineError) as together:
        personalization.lookup_alongside(engine, broken, "alice", search)
    assert together.value.status == alone.value.status == 400
    # the other search failing fails it too, whatever the purchases answer
    with pytest.raises(EngineError) as failed:
        personalization.lookup_alongside(engine, PURCHASES_INDEX, "alice", (missing, search[1]))
    assert failed.value.status == 404
