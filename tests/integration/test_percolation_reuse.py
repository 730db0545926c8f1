"""A plan-cache miss for an intent already percolated on the served index expands the
percolation it found again, without sending it (ADR 0043), on the real engine:

- the same intent for other cohorts, another market, or past a window edge (the plan
  expired) is a plan miss with no request to the policies index, and compiles and answers
  exactly what a service that percolates every time compiles and answers (the plan, the
  tiers, the DSL, the hits);
- an intent spelt differently (another normalised text) is percolated;
- a user whose purchases are not cached has them looked up alone (one request) when the
  percolation is known;
- with ``search.plan_cache_size: 0`` nothing is kept: every miss percolates, as before;
- what is kept is of one load of the index: the same index served again (after a legacy
  one, say) is percolated again.
"""

from __future__ import annotations

import json

import pytest

from control_plane import policy_store
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.service import PURCHASES_INDEX, SearchRequest, SearchService
from tests.clocks import FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401
from tests.integration.test_hot_path import CHRISTMAS, Recording, _seen, _service
from tests.integration.test_percolation_scale import publish_legacy, small_set

INTENTS = ("chocolate without peanuts", "cheap chocolate", "orange juice", "vegan chocolate")
VARIANTS = (
    ((), None, FIXED_NOW),
    (("vegan",), None, FIXED_NOW),
    ((), "fr", FIXED_NOW),
    (("vegan",), "de", CHRISTMAS),  # past the Christmas campaign's window start
    ((), None, CHRISTMAS),
)


def _percolations(recording: Recording, served: Ready) -> int:
    """Percolations sent: searches of the policies index, alone or as ``_msearch`` items (a
    speculated miss sends its percolation with its first tiers, ADR 0048 and 0049)."""
    alone = sum(path == f"/{served.policies_index}/_search" for _, path, _ in recording.sent)
    items = sum(
        json.loads(header)["index"] == served.policies_index
        for _, path, body in recording.sent
        if path == "/_msearch"
        for header in body.splitlines()[::2]
    )
    return alone + items


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
        assert served.guessing is not None
        served.guessing.learner.settle()  # the guesses learned: a first miss may be speculated
        for intent in INTENTS:
            for number, (cohorts, market, now) in enumerate(VARIANTS):
                request = SearchRequest(intent=intent, cohorts=cohorts, market=market)
                recording.sent.clear()
                outcome = served.search(request, now)
                assert not outcome.compiled.cached, (intent, cohorts, market)  # a plan miss
                assert _percolations(recording, ready) == (1 if number == 0 else 0), (intent, number)
                alone = f"/{ready.policies_index}/_search"  # the percolation, when not speculated
                tiers = [sent for sent in recording.sent if sent[1] != alone]
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


def test_what_a_miss_kept_is_of_the_index_as_last_loaded(
    engine: Engine, settings: Settings, index_prefix: str, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """An index no alias serves may be rewritten under its name (another analysis) and be
    served again: what misses kept of its earlier load is not used once it is loaded again,
    even when the index served in between is a legacy one (which never looks in what is
    kept, so it never drops it)."""
    prefix = f"{index_prefix}-old"  # where publish_legacy publishes
    current, other = small_set(12, pattern_every=5), small_set(13, pattern_every=5)
    policy_store.publish(engine, prefix, current, "live")
    tuned = settings.model_copy(
        update={
            "policies": settings.policies.model_copy(update={"index_prefix": prefix}),
            "search": settings.search.model_copy(update={"alias_watch_interval_s": 3600.0}),
        }
    )
    recording = Recording(engine)
    service = SearchService(tuned, recording, profile_of(tuned))

    def percolations(cohorts: tuple[str, ...] = ()) -> int:
        recording.sent.clear()
        service.compile(SearchRequest(intent="dark chocolate", cohorts=cohorts), FIXED_NOW)
        index = service.snapshot()[0].index
        return sum(path == f"/{index}/_search" for _, path, _ in recording.sent)

    try:
        assert percolations() == 1
        assert percolations(("vegan",)) == 0  # a plan miss: the percolation kept
        first = service.snapshot()[0]
        publish_legacy(engine, index_prefix, other, monkeypatch, phrases=False)
        service.alias_moved("live")
        assert service.snapshot()[0].layout == "legacy"
        service.compile(SearchRequest(intent="dark chocolate"), FIXED_NOW)  # matched its own way
        policy_store.publish(engine, prefix, current, "live")  # the first index, served again
        service.alias_moved("live")
        again = service.snapshot()[0]
        assert again.index == first.index and again.load != first.load
        assert percolations() == 1  # percolated again, not the earlier load's hits
        assert percolations(("vegan",)) == 0
    finally:
        service.close()
