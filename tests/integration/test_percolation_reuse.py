"""A plan-cache miss for an intent already percolated on the served index expands the
percolation it found again, without sending it (ADR 0043), on the real engine:

- the same intent for other cohorts, another market, or past a window edge (the plan
  expired) is a plan miss with no request to the policies index, and compiles and answers
  exactly what a service that percolates every time compiles and answers (the plan, the
  tiers, the DSL, the hits);
- an intent spelt differently (another normalised text) is percolated;
- a user whose purchases are not cached has them looked up alone (one request) when the
  percolation is known;
- with ``search.plan_cache_size: 0`` nothing is kept: every miss percolates, as before.
"""

from __future__ import annotations

import json

from control_plane.bootstrap import Ready
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.service import PURCHASES_INDEX, SearchRequest, SearchService
from tests.clocks import FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401
from tests.integration.test_hot_path import CHRISTMAS, Recording, _seen, _service

INTENTS = ("chocolate without peanuts", "cheap chocolate", "orange juice", "vegan chocolate")
VARIANTS = (
    ((), None, FIXED_NOW),
    (("vegan",), None, FIXED_NOW),
    ((), "fr", FIXED_NOW),
    (("vegan",), "de", CHRISTMAS),  # past the Christmas campaign's window start
    ((), None, CHRISTMAS),
)


def _percolations(recording: Recording, served: Ready) -> int:
    return sum(path == f"/{served.policies_index}/_search" for _, path, _ in recording.sent)


def _compiled(service: SearchService, request: SearchRequest, now: object) -> tuple[str, str]:
    compiled = service.compile(request, now)  # type: ignore[arg-type]
    return compiled.composition.plan.model_dump_json(), compiled.composition.explanation.model_dump_json()


def test_a_plan_miss_for_an_intent_percolated_before_sends_no_percolation_and_compiles_the_same(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    recording = Recording(engine)
    served = _service(recording, settings, ready)
    fresh = _service(engine, settings, ready, plan_cache_size=0)  # percolates every time
    try:
        served.search(SearchRequest(intent="oranges"), FIXED_NOW)  # the set and the watches read
        for intent in INTENTS:
            for number, (cohorts, market, now) in enumerate(VARIANTS):
                request = SearchRequest(intent=intent, cohorts=cohorts, market=market)
                recording.sent.clear()
                outcome = served.search(request, now)
                assert not outcome.compiled.cached, (intent, cohorts, market)  # a plan miss
                assert _percolations(recording, ready) == (1 if number == 0 else 0), (intent, number)
                tiers = recording.sent[1:] if number == 0 else recording.sent
                assert tiers and all(path == "/_msearch" for _, path, _ in tiers)
                expected = fresh.search(request, now)
                assert outcome.compiled.composition == expected.compiled.composition, (intent, number)
                assert _seen(outcome.execution) == _seen(expected.execution), (intent, number)
                assert json.dumps(outcome.execution.dsl, sort_keys=True) == json.dumps(
                    expected.execution.dsl, sort_keys=True
                )
                assert _compiled(served, request, now) == _compiled(fresh, request, now)
        # another normalised text is another percolation
        recording.sent.clear()
        served.search(SearchRequest(intent="chocolate without nuts"), FIXED_NOW)
        assert _percolations(recording, ready) == 1
    finally:
        served.close()
        fresh.close()


def test_a_user_with_a_known_percolation_has_the_purchases_looked_up_alone(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    recording = Recording(engine)
    served = _service(recording, settings, ready)
    fresh = _service(engine, settings, ready, plan_cache_size=0)
    try:
        served.search(SearchRequest(intent="chocolate without peanuts"), FIXED_NOW)  # percolated
        request = SearchRequest(intent="chocolate without peanuts", cohorts=("vegan",), user_id="alice")
        recording.sent.clear()
        outcome = served.search(request, FIXED_NOW)
        first, *tiers = recording.sent
        assert first[1] == f"/{PURCHASES_INDEX}/_search" and _percolations(recording, ready) == 0
        assert all(path == "/_msearch" for _, path, _ in tiers)
        expected = fresh.search(request, FIXED_NOW)
        assert outcome.compiled.purchases == expected.compiled.purchases and outcome.compiled.purchases
        assert outcome.compiled.composition == expected.compiled.composition
        assert _seen(outcome.execution) == _seen(expected.execution)
    finally:
        served.close()
        fresh.close()


def test_without_a_plan_cache_every_miss_percolates(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    recording = Recording(engine)
    cold = _service(recording, settings, ready, plan_cache_size=0)
    try:
        cold.search(SearchRequest(intent="oranges"), FIXED_NOW)  # the set and the watches read
        for cohorts in ((), ("vegan",), ()):
            recording.sent.clear()
            cold.search(SearchRequest(intent="cheap chocolate", cohorts=cohorts), FIXED_NOW)
            assert _percolations(recording, ready) == 1
    finally:
        cold.close()
