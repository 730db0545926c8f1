"""Category price statistics: hand-computed percentiles, JSON round trip, real catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from control_plane.catalog.derivation import read_ndjson
from control_plane.catalog.profile import CatalogProfile, load_profile
from control_plane.catalog.stats import (
    ALL,
    PERCENTILES,
    CategoryStats,
    category_price_stats,
    describe,
    stats_from_json,
    stats_to_json,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def profile() -> CatalogProfile:
    return load_profile(ROOT / "mappings" / "catalog.profile.yaml")


def product(price: Any, *path: str) -> dict[str, Any]:
    return {"price": price, "categories": list(path)}


SMALL = [
    product(1.0, "Sweets", "Chocolates"),
    product(2.0, "Sweets", "Chocolates"),
    product(3.0, "Sweets", "Candies"),
    product(4.0, "Sweets", "Chocolates"),
    product(10.0, "Sweets", "Chocolates"),
    product(None, "Sweets", "Chocolates"),  # no price: skipped
    product(True, "Sweets", "Chocolates"),  # a bool is not a price
    product(7.0),  # no category: counts for _all only
]


def test_hand_computed_percentiles(profile: CatalogProfile) -> None:
    stats = category_price_stats(SMALL, profile)
    assert list(stats) == ["Candies", "Chocolates", "Sweets", ALL]  # sorted: "_" after capitals
    sweets = stats["Sweets"]  # 1, 2, 3, 4, 10: rank h = 4p/100
    assert (sweets.count, sweets.min, sweets.max, sweets.mean) == (5, 1.0, 10.0, 4.0)
    expected = {10: 1.4, 20: 1.8, 30: 2.2, 50: 3.0, 70: 3.8, 80: 5.2, 90: 7.6, 95: 8.8}
    for p, value in expected.items():
        assert sweets.percentile(p) == value, p
    chocolates = stats["Chocolates"]  # 1, 2, 4, 10: rank h = 3p/100
    assert chocolates.count == 4 and chocolates.mean == 4.25
    assert chocolates.percentile(30) == 1.9
    assert chocolates.percentile(50) == 3.0
    assert chocolates.percentile(90) == 8.2
    candies = stats["Candies"]
    assert candies.count == 1 and set(candies.percentiles.values()) == {3.0}
    assert stats[ALL].count == 6 and stats[ALL].max == 10.0


def test_every_level_of_the_path_counts_once(profile: CatalogProfile) -> None:
    stats = category_price_stats([product(2.0, "A", "B", "A")], profile)
    assert stats["A"].count == 1 and stats["B"].count == 1


def test_values_are_rounded_to_cents() -> None:
    stats = describe([0.1, 0.2])
    assert stats.percentile(50) == 0.15
    assert stats.mean == 0.15
    assert all(round(v, 2) == v for v in stats.percentiles.values())


def test_percentile_accepts_0_100_and_multiples_of_5() -> None:
    stats = describe([1.0, 3.0])
    assert stats.percentile(0) == 1.0 and stats.percentile(100) == 3.0
    assert stats.percentile(25) == 1.5 and stats.percentile(75) == 2.5
    assert sorted(stats.percentiles) == list(PERCENTILES) == list(range(5, 100, 5))
    for bad in (33, -5, 101):
        with pytest.raises(ValueError, match="not stored"):
            stats.percentile(bad)


def test_describe_refuses_nothing() -> None:
    with pytest.raises(ValueError):
        describe([])


def test_json_round_trip_is_exact_and_canonical(profile: CatalogProfile) -> None:
    stats = category_price_stats(SMALL, profile)
    text = stats_to_json(stats)
    back = stats_from_json(text)
    assert back == stats
    assert all(isinstance(k, int) for s in back.values() for k in s.percentiles)
    assert stats_to_json(back) == text
    assert text.startswith('{"Candies":{"count":1,') and '"_all":{"count":6,' in text


def test_stats_are_frozen() -> None:
    stats = describe([1.0])
    with pytest.raises(ValueError):
        stats.count = 2  # type: ignore[misc]


def test_real_catalog_statistics(profile: CatalogProfile) -> None:
    catalog = read_ndjson(ROOT / "data" / "catalog.ndjson")
    stats = category_price_stats(catalog, profile)
    names = {name for doc in catalog for name in doc["categories"]}
    assert set(stats) == names | {ALL}
    assert stats[ALL].count == len(catalog)
    for name, entry in stats.items():
        values = [entry.min, *(entry.percentile(p) for p in PERCENTILES), entry.max]
        assert values == sorted(values), name
        assert isinstance(entry, CategoryStats)
    chocolates = stats["Chocolates"]
    assert chocolates.count >= 30
    assert chocolates.percentile(30) < chocolates.percentile(50) < chocolates.max
    assert stats["Sweets"].count >= stats["Chocolates"].count >= stats["Dark chocolates"].count
