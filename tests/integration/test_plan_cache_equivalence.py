"""A cached plan is the plan an uncached compile gives: the same request through a service
with its caches on and through one with them off (``plan_cache_size=0``, no speculation)
gets the same intent, DSL byte for byte, hits and tier, across the two things a cached plan
once outlived: a catalog reload (the relative prices, "cheap" as the catalog's 30th
percentile, are resolved with the catalog's statistics) and an intent that differs from an
earlier one only by case or by what ``casefold`` folds (``ß``, ``SS``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from control_plane.bootstrap import Ready, profile_of
from control_plane.catalog_loader import load_catalog
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.service import Outcome, SearchRequest, SearchService
from tests.clocks import FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401

CATALOG = Path(__file__).resolve().parents[2] / "data" / "catalog.ndjson"


def _tuned(settings: Settings, **search: Any) -> Settings:  # noqa: F811
    return settings.model_copy(update={"search": settings.search.model_copy(update=search)})


def _differences(served: Outcome, expected: Outcome) -> dict[str, tuple[Any, Any]]:
    def dsl(outcome: Outcome) -> str:
        return json.dumps(outcome.execution.dsl, ensure_ascii=False, sort_keys=True)

    pairs = {
        "intent": (served.compiled.intent, expected.compiled.intent),
        "dsl": (dsl(served), dsl(expected)),
        "hits": ([h.id for h in served.execution.hits], [h.id for h in expected.execution.hits]),
        "tier": (served.execution.tier, expected.execution.tier),
    }
    return {name: pair for name, pair in pairs.items() if pair[0] != pair[1]}


@pytest.fixture()
def pair(engine: Engine, settings: Settings, ready: Ready) -> Iterator[tuple[SearchService, SearchService]]:  # noqa: F811
    cached = _tuned(settings, alias_watch_interval_s=3600.0)
    plain = _tuned(settings, alias_watch_interval_s=3600.0, plan_cache_size=0, speculation=False)
    services = (
        SearchService(cached, engine, profile_of(cached), index=ready.policies_index),
        SearchService(plain, engine, profile_of(plain), index=ready.policies_index),
    )
    yield services
    for service in services:
        service.close()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Dark Chocolate", "dark chocolate"),
        ("CHOCOLATE", "chocolate"),
        ("straße chocolate", "strasse chocolate"),
    ],
)
def test_an_intent_equal_to_another_only_once_folded_gets_its_own_plan(
    pair: tuple[SearchService, SearchService], first: str, second: str
) -> None:
    cached, plain = pair
    cached.search(SearchRequest(intent=first), FIXED_NOW)  # a plan cached for the other spelling
    served = cached.search(SearchRequest(intent=second), FIXED_NOW)
    assert _differences(served, plain.search(SearchRequest(intent=second), FIXED_NOW)) == {}
    assert served.compiled.intent == second


def test_a_catalog_reload_composes_relative_prices_with_the_new_statistics(
    engine: Engine, settings: Settings, ready: Ready, index_prefix: str, tmp_path: Path  # noqa: F811
) -> None:
    rows = [json.loads(line) for line in CATALOG.read_text(encoding="utf-8").splitlines() if line.strip()]
    dearer = [
        {**row, "price": round(row["price"] * 3, 2)} if isinstance(row.get("price"), int | float) else row
        for row in rows
    ]
    before, after = tmp_path / "before.ndjson", tmp_path / "after.ndjson"
    before.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    after.write_text("".join(json.dumps(row) + "\n" for row in dearer), encoding="utf-8")
    cached_settings = _tuned(settings, alias_watch_interval_s=0.0)
    plain_settings = _tuned(settings, alias_watch_interval_s=0.0, plan_cache_size=0, speculation=False)
    profile = profile_of(cached_settings).model_copy(update={"alias": f"{index_prefix}-reloaded-catalog"})
    load_catalog(engine, profile, before)
    cached = SearchService(cached_settings, engine, profile, index=ready.policies_index)
    plain = SearchService(plain_settings, engine, profile, index=ready.policies_index)
    request = SearchRequest(intent="cheap chocolate")
    try:
        first = cached.search(request, FIXED_NOW)
        load_catalog(engine, profile, after)  # the alias moves: prices tripled, statistics anew
        served = cached.search(request, FIXED_NOW)
        expected = plain.search(request, FIXED_NOW)
        assert _differences(served, expected) == {}
        ceiling = served.compiled.plan_data()["price"]["max"]["value"]
        assert ceiling > first.compiled.plan_data()["price"]["max"]["value"] * 2  # "cheap" moved up
    finally:
        cached.close()
        plain.close()
