"""``bench.http_layer`` cuts each throughput phase in slices, the variants alternating, and
compares each variant to the first slice by slice (paired), so a load that drifts during a
run weighs on every variant alike and a difference within the noise shows as a spread."""

from __future__ import annotations

from bench.http import slice_orders
from bench.stats import paired_ratios


def test_every_slice_runs_every_variant_once_the_order_alternating() -> None:
    orders = slice_orders(["a", "b", "c"], 0, 4)
    assert orders == [["a", "b", "c"], ["c", "b", "a"], ["a", "b", "c"], ["c", "b", "a"]]
    assert slice_orders(["a", "b"], 1, 2) == [["b", "a"], ["a", "b"]]  # the next level starts reversed
    assert slice_orders(["a", "b"], 0, 1) == [["a", "b"]]


def test_the_paired_ratio_is_the_median_of_side_by_side_ratios_with_its_spread() -> None:
    rates = {"base": [100.0, 200.0, 400.0, 100.0], "new": [110.0, 180.0, 480.0, 130.0]}
    # side by side: 1.1, 0.9, 1.2, 1.3; a drift that halved or doubled both does not show
    assert paired_ratios(rates) == {"new": {"median": 1.15, "low": 0.9, "high": 1.3}}


def test_a_slice_the_first_variant_served_nothing_in_is_left_out() -> None:
    rates = {"base": [0.0, 100.0], "new": [50.0, 150.0], "other": [0.0, 100.0]}
    assert paired_ratios(rates) == {
        "new": {"median": 1.5, "low": 1.5, "high": 1.5},
        "other": {"median": 1.0, "low": 1.0, "high": 1.0},
    }
    assert paired_ratios({"base": [0.0], "new": [10.0]}) == {}
    assert paired_ratios({"base": [100.0]}) == {}
