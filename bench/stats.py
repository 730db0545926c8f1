"""Latency samples and their summary: percentiles by linear interpolation, in milliseconds."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def timed(call: Callable[[], Any]) -> tuple[int, Any]:
    """Run ``call`` once: its wall time in nanoseconds (``perf_counter_ns``), and its result."""
    started = time.perf_counter_ns()
    result = call()
    return time.perf_counter_ns() - started, result


def percentile(ordered: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) of already sorted values, interpolating linearly."""
    if not ordered:
        return math.nan
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(samples_ns: Sequence[int]) -> dict[str, float]:
    """n, p50, p95, p99, mean, min and max of nanosecond samples, in milliseconds."""
    ordered = sorted(s / 1e6 for s in samples_ns)
    mean = sum(ordered) / len(ordered) if ordered else math.nan
    return {
        "n": len(ordered),
        "p50_ms": round(percentile(ordered, 50), 3),
        "p95_ms": round(percentile(ordered, 95), 3),
        "p99_ms": round(percentile(ordered, 99), 3),
        "mean_ms": round(mean, 3),
        "min_ms": round(ordered[0], 3) if ordered else math.nan,
        "max_ms": round(ordered[-1], 3) if ordered else math.nan,
    }


def paired_ratios(rates: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Each variant's rate over the first variant's, slice by slice (``rates``: the variants'
    rates per slice, the same slices in the same order): their median, lowest and highest.
    A slice where the first variant served nothing is left out."""
    names = list(rates)
    first = rates[names[0]]
    paired: dict[str, dict[str, float]] = {}
    for name in names[1:]:
        ratios = sorted(r / f for r, f in zip(rates[name], first, strict=True) if f > 0)
        if ratios:
            paired[name] = {"median": round(statistics.median(ratios), 3),
                            "low": round(ratios[0], 3), "high": round(ratios[-1], 3)}
    return paired


def paired_text(spread: dict[str, float] | None) -> str:
    """A paired ratio as ``median (lowest-highest)``; ``-`` for a result measured before them."""
    return f"{spread['median']} ({spread['low']}-{spread['high']})" if spread else "-"
