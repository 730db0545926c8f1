"""The hot path against the real engine: a cached plan sends the bytes a miss rendered, with
no composition and no rendering; the fallback tiers sent together choose exactly what the
tiers run one after another choose; an ``_msearch`` item that lacks a shard fails closed;
and the engine round trips of a warm search are counted through a wrapper around the real
engine."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from control_plane.audit.recorder import _outcome_fields
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import Settings
from control_plane.engine import Engine, EngineError, EnginePartialResults
from control_plane.executor import Execution, execute, tier_batches, tiers_for
from control_plane.lifecycle.regression import load_queries
from control_plane.percolation_guess import LEARNER_THREAD
from control_plane.service import PURCHASES_INDEX, Catalog, SearchRequest, SearchService
from tests.clocks import FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401
from tests.engines import DelegatingEngine

QUERIES = Path(__file__).resolve().parents[2] / "policies" / "regression" / "queries.txt"
CHRISTMAS = datetime(2026, 12, 1, 12, tzinfo=UTC)
"""the first day of the demo's Christmas campaign: cheap chocolate intents fall back"""
LATER = datetime(2026, 11, 29, 12, tzinfo=UTC)
"""before the campaign (the plan cached at FIXED_NOW still holds), after Alice's last
purchase of 27 November: her boosts re-age to other values than at FIXED_NOW"""


class Recording(DelegatingEngine):
    """The real engine, every request it is sent noted (method, path, body): in ``sent``,
    those of the searches; in ``learned``, those the guesses' learner sends from its own
    thread, off every search's path (ADR 0049)."""

    def __init__(self, real: Engine) -> None:
        super().__init__(real)
        self.sent: list[tuple[str, str, Any]] = []
        self.learned: list[tuple[str, str, Any]] = []

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        learning = threading.current_thread().name == LEARNER_THREAD
        (self.learned if learning else self.sent).append((method, path, body))
        return super().request(method, path, body, params, timeout_s)


def _service(
    engine: Engine, settings: Settings, ready: Ready, **search: Any  # noqa: F811
) -> SearchService:
    # a long watch interval: the alias checks are due only on the first request
    values = {"alias_watch_interval_s": 3600.0, **search}
    tuned = settings.model_copy(update={"search": settings.search.model_copy(update=values)})
    return SearchService(tuned, engine, profile_of(tuned), index=ready.policies_index)


@pytest.fixture()
def recording(engine: Engine) -> Recording:
    return Recording(engine)


@pytest.fixture()
def services(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> Iterator[dict[str, SearchService]]:
    made = {
        batching: _service(engine, settings, ready, tier_batching=batching)
        for batching in ("serial", "together", "strict_first", "cheap_first")
    }
    yield made
    for service in made.values():
        service.close()


def _msearch_bodies(sent: list[tuple[str, str, Any]]) -> list[str]:
    return [body for method, path, body in sent if path == "/_msearch"]


def _tier_lines(sent: list[tuple[str, str, Any]]) -> list[str]:
    """The request bodies of the tier searches sent (the catalog's ``_msearch`` lines)."""
    lines: list[str] = []
    for body in _msearch_bodies(sent):
        parts = body.splitlines()
        for header, line in zip(parts[::2], parts[1::2], strict=True):
            if "catalog" in json.loads(header)["index"]:
                lines.append(line)
    return lines


def test_a_hit_sends_the_bytes_a_miss_rendered(
    recording: Recording, engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    cached = _service(recording, settings, ready)
    uncached = _service(engine, settings, ready, plan_cache_size=0)
    request = SearchRequest(intent="chocolate without peanuts", user_id="alice")
    try:
        miss = cached.search(request, FIXED_NOW)
        miss_lines = _tier_lines(recording.sent)
        recording.sent.clear()
        hit = cached.search(request, FIXED_NOW)
        assert (miss.compiled.cached, hit.compiled.cached) == (False, True)
        assert _tier_lines(recording.sent) == miss_lines and miss_lines
        assert not any(name.startswith(("render.", "compose")) for name in hit.latency_ms)
        assert hit.execution.dsl is miss.execution.dsl  # the body rendered once, shared
        fresh = uncached.search(request, FIXED_NOW)
        assert json.dumps(fresh.execution.dsl, ensure_ascii=False) in miss_lines
        assert fresh.execution.dsl == hit.execution.dsl
        assert hit.compiled.explanation_data() is miss.compiled.explanation_data()
        # a hit whose purchase boosts re-age to other values renders anew, and exactly as a miss
        recording.sent.clear()
        aged = cached.search(request, LATER)
        assert aged.compiled.cached and aged.compiled.personalization != miss.compiled.personalization
        assert "render.strict" in aged.latency_ms
        fresh_aged = uncached.search(request, LATER)
        assert json.dumps(fresh_aged.execution.dsl, ensure_ascii=False) in _tier_lines(recording.sent)
        assert [h.id for h in aged.execution.hits] == [h.id for h in fresh_aged.execution.hits]
        # another page is another body: rendered for it, the first page's bytes unchanged
        second = cached.search(request.model_copy(update={"page": 2}), FIXED_NOW)
        assert second.execution.dsl != miss.execution.dsl
        recording.sent.clear()
        cached.search(request, FIXED_NOW)
        assert _tier_lines(recording.sent) == miss_lines
    finally:
        cached.close()
        uncached.close()


def _seen(execution: Execution) -> tuple[Any, ...]:
    return (
        execution.status,
        execution.tier,
        execution.total,
        [hit.id for hit in execution.hits],
        [(run.tier, run.total) for run in execution.runs],
        json.dumps(execution.dsl, sort_keys=True),
        json.dumps(execution.facets, sort_keys=True),
    )


@pytest.mark.parametrize("now", [FIXED_NOW, CHRISTMAS], ids=["ordinary-day", "christmas"])
def test_tiers_sent_together_choose_what_serial_tiers_choose(
    services: dict[str, SearchService], now: datetime
) -> None:
    requests = load_queries(QUERIES)
    fallbacks = 0
    for request in requests:
        serial = services["serial"].search(request, now).execution  # cold: one request per tier
        assert serial.round_trips == len(serial.runs)
        fallbacks += len(serial.runs) > 1
        for batching in ("together", "strict_first", "cheap_first", "serial"):
            cold = services[batching].search(request, now)  # "serial": the plan cached above
            warm = services[batching].search(request, now)  # sends up to where the cold one stopped
            assert warm.compiled.cached
            for outcome in (cold, warm):
                assert _seen(outcome.execution) == _seen(serial), (batching, request.intent)
            assert warm.execution.round_trips == 1, request.intent
            assert cold.execution.round_trips <= len(serial.runs)
    if now == CHRISTMAS:  # the comparison covered intents that fall back
        assert fallbacks >= 3


def test_tier_batches_on_the_christmas_chocolate(services: dict[str, SearchService]) -> None:
    service = services["strict_first"]
    request = SearchRequest(intent="cheap chocolate")  # two products on the campaign's first day
    cold = service.search(request, CHRISTMAS)
    assert [run.tier for run in cold.execution.runs] == ["strict", "relaxed", "broad"]
    assert cold.execution.round_trips == 2  # strict, then relaxed and broad together
    warm = service.search(request, CHRISTMAS)
    assert warm.execution.round_trips == 1 and _seen(warm.execution) == _seen(cold.execution)
    plan = warm.compiled.composition.plan
    assert tier_batches(tiers_for(plan), "strict_first", "broad") == (("strict", "relaxed", "broad"),)


def test_cheap_tiers_first_on_the_christmas_chocolate(services: dict[str, SearchService]) -> None:
    service = services["cheap_first"]
    fell_back = service.search(SearchRequest(intent="cheap chocolate"), CHRISTMAS)
    assert [run.tier for run in fell_back.execution.runs] == ["strict", "relaxed", "broad"]
    assert fell_back.execution.round_trips == 2  # strict and relaxed together, then broad
    at_strict = service.search(SearchRequest(intent="chocolate"), CHRISTMAS)
    assert [run.tier for run in at_strict.execution.runs] == ["strict"]  # relaxed ignored
    assert at_strict.execution.round_trips == 1


def test_warm_search_round_trips(
    recording: Recording, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    service = _service(recording, settings, ready)
    request = SearchRequest(intent="cheap chocolate", user_id="alice")
    try:
        cold = service.search(request, FIXED_NOW)
        assert cold.engine_requests == len(recording.sent)
        recording.sent.clear()
        warm = service.search(request, FIXED_NOW)
        assert warm.compiled.cached
        # no alias lookup, no catalog statistics, no percolation, no purchases: the tiers only
        assert [(method, path) for method, path, _ in recording.sent] == [("POST", "/_msearch")]
        assert warm.engine_requests == 1 < cold.engine_requests
        recording.sent.clear()
        service.search(SearchRequest(intent="chocolate under 5"), CHRISTMAS)  # a miss, three tiers
        assert not any("_alias" in path or "_mapping" in path for _, path, _ in recording.sent)
        recording.sent.clear()
        christmas = service.search(SearchRequest(intent="chocolate under 5"), CHRISTMAS)
        assert len(christmas.execution.runs) == 3 and christmas.engine_requests == len(recording.sent) == 1
    finally:
        service.close()


def test_a_plan_is_shared_by_every_user_and_each_users_purchases_are_their_own(
    recording: Recording, engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    service = _service(recording, settings, ready)
    uncached = _service(engine, settings, ready, plan_cache_size=0)
    intent = "chocolate"
    try:
        anonymous = service.search(SearchRequest(intent=intent), FIXED_NOW)
        assert not anonymous.compiled.cached
        for user in ("alice", "a-new-user"):
            recording.sent.clear()
            first = service.search(SearchRequest(intent=intent, user_id=user), FIXED_NOW)
            assert first.compiled.cached  # the plan compiled for the anonymous request
            paths = [path for _, path, _ in recording.sent]
            assert paths == [f"/{PURCHASES_INDEX}/_search", "/_msearch"], user  # no percolation
            fresh = uncached.search(SearchRequest(intent=intent, user_id=user), FIXED_NOW)
            assert first.execution.dsl == fresh.execution.dsl, user
            assert first.compiled.personalization == fresh.compiled.personalization
            recording.sent.clear()
            again = service.search(SearchRequest(intent=intent, user_id=user), FIXED_NOW)
            assert [path for _, path, _ in recording.sent] == ["/_msearch"]  # purchases kept
            assert again.execution.dsl == first.execution.dsl
        alice = service.search(SearchRequest(intent=intent, user_id="alice"), FIXED_NOW)
        new = service.search(SearchRequest(intent=intent, user_id="a-new-user"), FIXED_NOW)
        assert alice.compiled.personalization and alice.execution.dsl != anonymous.execution.dsl
        assert not new.compiled.personalization and new.execution.dsl is anonymous.execution.dsl
    finally:
        service.close()
        uncached.close()


def _runs(execution: Execution) -> list[tuple[str, int, bool]]:
    return [(run.tier, run.total, run.replayed) for run in execution.runs]


def _items(sent: list[tuple[str, str, Any]]) -> list[int]:
    """How many searches each ``_msearch`` sent carried."""
    return [len(body.splitlines()) // 2 for body in _msearch_bodies(sent)]


def test_a_fallback_is_replayed_only_within_one_catalog_generation(
    recording: Recording, engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    """A plan that fell back sends only the tier it served while nothing was written to the
    catalog; a product written (and refreshed) makes the tiers run again, whether the
    watch has seen the new counters (the generation moved) or not yet (the served tier's
    total differs: the replay is dropped)."""
    watching = _service(recording, settings, ready, alias_watch_interval_s=0.0)
    stale = _service(recording, settings, ready)  # watch interval 3600 s: the generation never moves
    uncached = _service(engine, settings, ready, plan_cache_size=0)
    request = SearchRequest(intent="cheap chocolate")
    index = ready.catalog.index
    added = "govsearch-test-replay-copy"
    try:
        first = watching.search(request, CHRISTMAS)
        stale.search(request, CHRISTMAS)
        assert _runs(first.execution) == [("strict", 2, False), ("relaxed", 2, False), ("broad", 2, False)]
        recording.sent.clear()
        again = watching.search(request, CHRISTMAS)
        assert _items(recording.sent) == [1]  # the strict body only
        assert _runs(again.execution) == [("strict", 2, False), ("relaxed", 2, True), ("broad", 2, True)]
        assert again.engine_requests == 3  # the alias and the counters (interval 0), one _msearch
        recorded = [tier.model_dump() for tier in _outcome_fields(again, raw=False)["tiers"]]
        assert [(t["tier"], t["total"], t["replayed"]) for t in recorded] == _runs(again.execution)
        assert [t["took_ms"] for t in recorded][1:] == [0.0, 0.0]  # nothing was sent for them
        fresh = uncached.search(request, CHRISTMAS).execution
        assert again.execution.dsl == fresh.dsl == first.execution.dsl
        assert [h.id for h in again.execution.hits] == [h.id for h in fresh.hits]
        assert (again.execution.tier, again.execution.facets) == (fresh.tier, fresh.facets)
        # a third product for the strict tier: the copy of one it serves
        source = engine.request("GET", f"/{index}/_doc/{first.execution.hits[0].id}")["_source"]
        engine.request("PUT", f"/{index}/_doc/{added}", source, params={"refresh": "true"})
        for service in (watching, stale):
            recording.sent.clear()
            moved = service.search(request, CHRISTMAS)
            assert _runs(moved.execution) == [("strict", 3, False)], service is stale
            assert added in [h.id for h in moved.execution.hits]
        assert _runs(uncached.search(request, CHRISTMAS).execution) == [("strict", 3, False)]
    finally:
        with contextlib.suppress(EngineError):  # absent when the test failed before writing it
            engine.request("DELETE", f"/{index}/_doc/{added}", params={"refresh": "true"})
        for service in (watching, stale, uncached):
            service.close()
    # the copy gone: the counters moved again, the fallback runs in full once more
    after = _service(engine, settings, ready, alias_watch_interval_s=0.0)
    try:
        assert _runs(after.search(request, CHRISTMAS).execution) == _runs(first.execution)
    finally:
        after.close()


class WithoutMonitor(Recording):
    """The real engine behind credentials without the index monitor privilege: ``_stats``
    answers 403, as a search-only role's would."""

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        if "/_stats" in path:
            raise EngineError("403 security_exception: no permission for indices:monitor/stats", status=403)
        return super().request(method, path, body, params, timeout_s)


def test_without_the_monitor_privilege_fallbacks_run_in_full(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    restricted = WithoutMonitor(engine)
    service = _service(restricted, settings, ready, alias_watch_interval_s=0.0)
    request = SearchRequest(intent="cheap chocolate")
    try:
        first = service.search(request, CHRISTMAS)
        restricted.sent.clear()
        again = service.search(request, CHRISTMAS)
        assert _runs(again.execution) == _runs(first.execution) == [
            ("strict", 2, False), ("relaxed", 2, False), ("broad", 2, False)
        ]
        assert _items(restricted.sent) == [3]  # every tier sent again, in one _msearch
    finally:
        service.close()


@pytest.fixture()
def shadow(engine: Engine, ready: Ready, index_prefix: str) -> str:  # noqa: F811
    """An index like the catalog's, except that the brand facet's field is analysed text:
    the engine cannot aggregate it, so every search with facets fails on its shard while
    the catalog's shard answers (a 200 with partial results)."""
    catalog = ready.catalog.index
    described = engine.request("GET", f"/{catalog}")[catalog]
    mapping = described["mappings"]
    brand = profile_of(Settings()).facets.brand  # a subfield (brand.raw): made text
    parent, _, sub = brand.partition(".")
    field = mapping["properties"][parent]
    if sub:
        field["fields"][sub] = {"type": "text"}
    else:
        mapping["properties"][parent] = {"type": "text"}
    name = f"{index_prefix}-shadow"
    analysis = described["settings"]["index"].get("analysis", {})
    engine.create_index(
        name, {"settings": {"number_of_shards": 1, "analysis": analysis}, "mappings": mapping}
    )
    engine.index_document(name, "1", {parent: "Shadow", "title": "chocolate"}, refresh=True)
    return name


def test_an_msearch_item_with_a_failed_shard_fails_closed(
    engine: Engine, ready: Ready, shadow: str, services: dict[str, SearchService]  # noqa: F811
) -> None:
    service = services["together"]
    request = SearchRequest(intent="chocolate")
    compiled = service.compile(request, FIXED_NOW)
    both = f"{ready.catalog.index},{shadow}"

    def render(tier: Any) -> Any:
        return service.rendered(compiled, request, tier)

    tiers = tiers_for(compiled.composition.plan)
    served = execute(engine, ready.catalog.index, compiled.composition.plan, render, min_hits=1,
                     batches=(tiers,))
    assert served.total > 0  # the same bodies answer on the catalog alone
    with pytest.raises(EnginePartialResults) as refused:
        execute(engine, both, compiled.composition.plan, render, min_hits=1, batches=(tiers,))
    assert refused.value.status == 503 and shadow in str(refused.value.info)
    brand = profile_of(Settings()).facets.brand
    body = json.dumps({"size": 1, "aggs": {"brands": {"terms": {"field": brand}}}})
    with pytest.raises(EnginePartialResults):
        engine.msearch([(ready.catalog.index, {"size": 0}), (both, body)])


def _kinds(sent: list[tuple[str, str, Any]]) -> list[str]:
    return ["alias" if p.startswith("/_alias/") else "mapping" if p.endswith("/_mapping")
            else "counters" if p.endswith("/_stats/indexing,refresh") else p
            for _, p, _ in sent]


def test_the_catalog_alias_is_watched_not_read_per_request(
    recording: Recording, ready: Ready  # noqa: F811
) -> None:
    profile = profile_of(Settings())
    assert recording.real.alias_targets(profile.alias) == [ready.catalog.index]
    watched = Catalog(recording, profile, watch_interval_s=3600)
    first = watched.stats()
    assert watched.stats() is first and watched.stats() is first
    assert _kinds(recording.sent) == ["alias", "counters", "mapping"]
    recording.sent.clear()
    every_time = Catalog(recording, profile, watch_interval_s=0)
    every_time.stats()
    every_time.stats()  # the alias and counters again; the statistics of an unchanged index not again
    assert _kinds(recording.sent) == ["alias", "counters", "mapping", "alias", "counters"]
