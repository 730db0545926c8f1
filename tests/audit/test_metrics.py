"""The decision metrics kept as plain tallies (``audit.metrics.DecisionTallies``, ADR 0044)
expose what ``prometheus_client``'s ``Counter`` and ``Histogram`` exposed for the same records:
the same families, samples, labels, values and order (bucket edges included), a series'
``*_created`` the time of the record that created it (no clock read); and a scrape sees every
record observed before it, from any number of threads."""

from __future__ import annotations

import re
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from control_plane.audit.metrics import BUCKETS, Metrics
from control_plane.times import iso
from tests.clocks import FIXED_NOW


class Reference:
    """The decision metrics as ``prometheus_client`` objects (how they were kept before)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("govsearch_requests", "requests recorded, by status", ["status"], registry=r)
        self.stage_latency = Histogram(
            "govsearch_stage_latency_seconds", "latency per pipeline stage", ["stage"], buckets=BUCKETS,
            registry=r,
        )
        self.policies_fired = Counter(
            "govsearch_policies_fired", "applied policies, by policy id", ["policy_id"], registry=r
        )
        self.tier_served = Counter("govsearch_tier_served", "tier served", ["tier"], registry=r)
        self.zero_results = Counter("govsearch_zero_results", "requests with no result", registry=r)
        self.abstentions = Counter("govsearch_abstentions", "requests abstained", registry=r)
        self.errors = Counter("govsearch_errors", "failed requests, by error code", ["code"], registry=r)

    def observe(self, record: dict[str, Any]) -> None:
        status = record["status"]
        self.requests.labels(status).inc()
        for stage, ms in record.get("latency_ms", {}).items():
            self.stage_latency.labels(stage).observe(ms / 1000)
        for policy_id in record.get("applied_policies", []):
            self.policies_fired.labels(policy_id).inc()
        if record.get("tier"):
            self.tier_served.labels(record["tier"]).inc()
        if status == "no_results":
            self.zero_results.inc()
        elif status == "abstained":
            self.abstentions.inc()
        if record.get("error"):
            self.errors.labels(record["error"]["code"]).inc()


CREATED = re.compile(r'^(govsearch_\w+_created)(\{[^}]*\})? (\S+)$')


def decision_lines(text: str) -> list[str]:
    """The exposition of the decision metrics (the families both registries hold)."""
    return [line for line in text.splitlines() if "_events" not in line and "_audit_" not in line]


def split_created(lines: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(lines other than ``*_created`` samples, those samples' series, their values)."""
    others, series, values = [], [], []
    for line in lines:
        found = CREATED.match(line)
        if found is None:
            others.append(line)
        else:
            series.append(found.group(1) + (found.group(2) or ""))
            values.append(found.group(3))
    return others, series, values


# edges exactly, just past them, tiny, huge, zero: every bucket and both ends
LATENCIES = st.sampled_from([0.0, 0.3, 1.0, 1.0000001, 2.5, 4.99, 5.0, 10.0, 24.9, 25.0, 99.0, 250.0,
                             1000.0, 2500.0, 5000.0, 5000.5, 123456.0])
RECORDS = st.fixed_dictionaries(
    {"status": st.sampled_from(["ok", "no_results", "abstained", "error"]), "time": st.just(iso(FIXED_NOW))},
    optional={
        "latency_ms": st.dictionaries(st.sampled_from(["total", "compile", "tier.strict", "percolate"]),
                                      LATENCIES, max_size=4),
        # labels that are not text too (none today: the record models type them as text), as
        # prometheus_client takes them: str(value)
        "applied_policies": st.lists(st.sampled_from(["p-1", "p-2", "promo:x", "é-3", 7]), max_size=3),
        "tier": st.sampled_from([None, "strict", "relaxed", "broad"]),
        "error": st.one_of(
            st.none(),
            st.builds(
                lambda code: {"code": code}, st.sampled_from(["engine_unavailable", "audit_backlog", None])
            ),
        ),
    },
)


@settings(max_examples=60, deadline=None)
@given(st.lists(RECORDS, max_size=25))
def test_tallies_expose_what_prometheus_client_exposed(records: list[dict[str, Any]]) -> None:
    reference = Reference()
    metrics = Metrics()
    for record in records:
        reference.observe(record)
        metrics.observe_decision(record)
    expected = decision_lines(generate_latest(reference.registry).decode())
    got = decision_lines(metrics.render().decode())
    expected_rest, expected_series, _ = split_created(expected)
    got_rest, got_series, got_values = split_created(got)
    assert got_rest == expected_rest
    assert got_series == expected_series
    for series, value in zip(got_series, got_values, strict=True):
        if series not in ("govsearch_zero_results_created", "govsearch_abstentions_created"):
            assert float(value) == FIXED_NOW.timestamp()  # those two: prometheus_client's own


def test_created_is_the_time_of_the_record_that_created_the_series() -> None:
    def at(second: int) -> str:
        return iso(FIXED_NOW.replace(second=second))

    metrics = Metrics()
    metrics.observe_decision({"status": "ok", "time": at(1), "latency_ms": {"total": 2.0}})
    metrics.observe_decision({"status": "ok", "time": at(2), "latency_ms": {"total": 2.0}})  # no new series
    metrics.observe_decision({"status": "error", "time": at(3), "error": {"code": "x"}})
    metrics.observe_decision({"status": "error", "error": {"code": "y"}})  # a record without a time
    created = {
        found.group(1) + (found.group(2) or ""): float(found.group(3))
        for found in map(CREATED.match, metrics.render().decode().splitlines())
        if found is not None
    }
    assert created['govsearch_requests_created{status="ok"}'] == FIXED_NOW.replace(second=1).timestamp()
    assert created['govsearch_stage_latency_seconds_created{stage="total"}'] == (
        FIXED_NOW.replace(second=1).timestamp()
    )
    assert created['govsearch_requests_created{status="error"}'] == FIXED_NOW.replace(second=3).timestamp()
    assert created['govsearch_errors_created{code="x"}'] == FIXED_NOW.replace(second=3).timestamp()
    assert created['govsearch_errors_created{code="y"}'] == 0.0


def test_a_scrape_sees_every_record_observed_from_any_thread() -> None:
    metrics = Metrics()
    per_thread, threads = 2000, 8
    record = {"status": "ok", "time": iso(FIXED_NOW), "latency_ms": {"total": 1.5},
              "applied_policies": ["p-1"], "tier": "strict"}

    def observe() -> None:
        for _ in range(per_thread):
            metrics.observe_decision(record)

    workers = [threading.Thread(target=observe) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    text = metrics.render().decode()
    total = float(per_thread * threads)
    assert f'govsearch_requests_total{{status="ok"}} {total}' in text
    assert f'govsearch_stage_latency_seconds_count{{stage="total"}} {total}' in text
    assert 'govsearch_stage_latency_seconds_bucket{le="0.001",stage="total"} 0.0' in text
    assert f'govsearch_stage_latency_seconds_bucket{{le="0.0025",stage="total"}} {total}' in text
    assert f'govsearch_policies_fired_total{{policy_id="p-1"}} {total}' in text
    assert f'govsearch_tier_served_total{{tier="strict"}} {total}' in text


def test_a_latency_that_is_not_a_number_is_not_observed() -> None:
    """A NaN latency (none is measured so: they come from ``perf_counter``) is left out:
    below no bucket bound, it would otherwise count in the first bucket and make the sum NaN."""
    metrics = Metrics()
    metrics.observe_decision({"status": "ok", "time": iso(FIXED_NOW), "latency_ms": {"total": float("nan")}})
    metrics.observe_decision({"status": "ok", "time": iso(FIXED_NOW), "latency_ms": {"total": 2.0}})
    text = metrics.render().decode()
    assert 'govsearch_stage_latency_seconds_count{stage="total"} 1.0' in text
    assert 'govsearch_stage_latency_seconds_sum{stage="total"} 0.002' in text
    assert "nan" not in text.lower()
