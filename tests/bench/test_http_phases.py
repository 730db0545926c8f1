"""``bench.http``'s throughput halves combined (each variant runs once early and once late in
its level): the mean rate, and the CPU per request over every request of both halves."""

from __future__ import annotations

from bench.http import _combined


def test_two_halves_make_one_phase() -> None:
    halves = [
        {"req_s": 100.0, "service_cpu_ms": 2.0, "engine_cpu_ms": 4.0},
        {"req_s": 300.0, "service_cpu_ms": 1.0, "engine_cpu_ms": 2.0},
    ]
    assert _combined(halves) == {"req_s": 200.0, "service_cpu_ms": 1.25, "engine_cpu_ms": 2.5}


def test_a_half_that_served_nothing_counts_in_the_rate_not_in_the_cpu() -> None:
    halves = [{"req_s": 0.0, "engine_cpu_ms": 9.0}, {"req_s": 50.0, "engine_cpu_ms": 3.0}]
    assert _combined(halves) == {"req_s": 25.0, "engine_cpu_ms": 3.0}
