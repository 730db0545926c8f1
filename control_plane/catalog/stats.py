"""Price statistics per category, for category-relative price rules ("cheap" = p30).

For every value that appears anywhere in a product's category path (every level: a dark
chocolate counts for ``Sweets``, ``Chocolates`` and ``Dark chocolates``) and for the whole
catalog (``_all``), :func:`category_price_stats` gives count, min, max, mean and the
percentiles 5, 10, 15, ..., 95.

Percentiles use linear interpolation between closest ranks (Hyndman and Fan type 7, the
default of numpy and of spreadsheet ``PERCENTILE``): with the n prices sorted ascending
as x[0..n-1], the p-th percentile is at rank h = (n - 1) * p / 100 and equals
x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]). Every value is rounded to
2 decimals (half to even, Python's ``round``). Products without a numeric price are
skipped; each product counts once per category even if its path repeats a name.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter

from control_plane.catalog.profile import CatalogProfile

ALL = "_all"
#: The percentiles stored for each category.
PERCENTILES: tuple[int, ...] = tuple(range(5, 100, 5))
#: The most prices a category keeps as samples.
SAMPLE_CAP = 200


class CategoryStats(BaseModel):
    """Price distribution of one category."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int
    min: float
    max: float
    mean: float
    percentiles: dict[int, float]
    """p -> price, for every p in :data:`PERCENTILES`"""
    samples: tuple[float, ...] = ()
    """sorted prices, all of them or :data:`SAMPLE_CAP` evenly spaced ones (empty in
    statistics stored before samples were: union percentiles then fall back)"""

    def percentile(self, p: int) -> float:
        """The p-th percentile; p is 0 (min), 100 (max) or a multiple of 5 in between."""
        if p == 0:
            return self.min
        if p == 100:
            return self.max
        if p not in self.percentiles:
            stored = ", ".join(str(q) for q in PERCENTILES)
            raise ValueError(f"percentile {p} is not stored: use 0, 100 or one of {stored}")
        return self.percentiles[p]


def percentile_of_sorted(values: list[float], p: float) -> float:
    """Type-7 linear interpolation on ascending ``values`` (unrounded)."""
    if not values:
        raise ValueError("no values")
    rank = (len(values) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (rank - low) * (values[high] - values[low])


def describe(prices: Iterable[float]) -> CategoryStats:
    """Statistics of one non-empty collection of prices."""
    ordered = sorted(prices)
    if not ordered:
        raise ValueError("no prices")
    return CategoryStats(
        count=len(ordered),
        min=round(ordered[0], 2),
        max=round(ordered[-1], 2),
        mean=round(math.fsum(ordered) / len(ordered), 2),
        percentiles={p: round(percentile_of_sorted(ordered, p), 2) for p in PERCENTILES},
        samples=tuple(round(v, 2) for v in _thinned(ordered)),
    )


def _thinned(ordered: list[float]) -> list[float]:
    if len(ordered) <= SAMPLE_CAP:
        return ordered
    last = len(ordered) - 1
    return [ordered[round(i * last / (SAMPLE_CAP - 1))] for i in range(SAMPLE_CAP)]


def category_price_stats(
    products: Iterable[Mapping[str, Any]], profile: CatalogProfile
) -> dict[str, CategoryStats]:
    """Per-category price statistics, keys sorted, plus ``_all`` (see the module doc)."""
    prices: dict[str, list[float]] = {ALL: []}
    for product in products:
        price = product.get(profile.price)
        if isinstance(price, bool) or not isinstance(price, int | float):
            continue
        path = product.get(profile.category) or ()
        if isinstance(path, str):
            path = (path,)
        prices[ALL].append(float(price))
        for name in dict.fromkeys(path):
            prices.setdefault(str(name), []).append(float(price))
    return {name: describe(values) for name, values in sorted(prices.items()) if values}


_STATS = TypeAdapter(dict[str, CategoryStats])


def stats_to_json(stats: Mapping[str, CategoryStats]) -> str:
    """Canonical JSON (keys sorted, compact), suitable for storing in the engine."""
    data = {name: s.model_dump(mode="json") for name, s in stats.items()}
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def stats_from_json(text: str | bytes) -> dict[str, CategoryStats]:
    """Inverse of :func:`stats_to_json` (percentile keys come back as ints)."""
    return _STATS.validate_json(text)
