"""Prometheus metrics, one registry per recorder (so two apps in one process, e.g. in
tests, never share or clash). Served at ``GET /metrics``.

The metrics of decision records (requests, stage latency, policies fired, tier served, zero
results, abstentions, errors) are observed on every request: they are kept as plain tallies
under one lock (:class:`DecisionTallies`), one acquisition per record, and turned into
Prometheus families when scraped, the same families, samples and values
``prometheus_client``'s ``Counter`` and ``Histogram`` expose (which take a lock per child and
per call: about fifteen per record). A scrape sees every record observed before it (ADR
0044). A series' ``*_created`` is the ``time`` of the record that created it (no clock is
read here). The metrics that change rarely (zero results, abstentions, events, sink
failures, the queue, backlog refusals) stay ``prometheus_client`` objects.
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from control_plane.times import parse_time

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_RECORDS_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""records per audit batch: up to ``audit.batch`` (256 by default)"""
BATCH_SECONDS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
"""one batch's write and sync: a fraction of a millisecond on a local disk"""
_BOUNDS: tuple[str, ...] = (*(floatToGoString(bound) for bound in BUCKETS), "+Inf")  # type: ignore[no-untyped-call]
_CREATED = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False").lower() not in ("true", "1", "t")
"""``*_created`` samples, as ``prometheus_client`` decides (read once, at import, as it does)"""


class _PairCollector(Collector):
    """A counter of two label values read from the service when scraped (the plan cache's
    hits and misses, speculation's right and wrong guesses)."""

    def __init__(
        self, name: str, documentation: str, label: str, values: tuple[str, str],
        counts: Callable[[], tuple[int, int]],
    ) -> None:
        self.name, self.documentation, self.label, self.values = name, documentation, label, values
        self.counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=[self.label])
        for value, count in zip(self.values, self.counts(), strict=True):
            family.add_metric([value], count)
        yield family


class _Counted:
    """One labelled counter's tallies: count and creation instant per label value, in the
    order the values were first seen (as ``prometheus_client`` lists its children)."""

    __slots__ = ("counts", "created", "documentation", "label", "name")

    def __init__(self, name: str, documentation: str, label: str | None) -> None:
        self.name, self.documentation, self.label = name, documentation, label
        self.counts: dict[str, int] = {}
        self.created: dict[str, float] = {}

    def family(self) -> Metric:
        metric = Metric(self.name, self.documentation, "counter")
        for value, count in self.counts.items():
            labels = {self.label: value} if self.label is not None else {}
            metric.add_sample(self.name + "_total", labels, float(count))
            if _CREATED:
                metric.add_sample(self.name + "_created", labels, self.created[value])
        return metric


def _created(record: dict[str, Any]) -> float:
    """A new series' ``*_created``: the time of the record that created it (0 without one)."""
    try:
        return parse_time(record["time"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return 0.0


class _Latency:
    """One stage's histogram: observations per bucket (not cumulative), their sum, created."""

    __slots__ = ("buckets", "created", "sum")

    def __init__(self, created: float) -> None:
        self.buckets = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0
        self.created = created


class DecisionTallies(Collector):
    """What :meth:`Metrics.observe_decision` counts, as plain numbers under one lock, exposed
    as the families ``prometheus_client`` would (names, help, samples, values, order)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = _Counted("govsearch_requests", "requests recorded, by status", "status")
        self.latency: dict[str, _Latency] = {}
        self.policies_fired = _Counted(
            "govsearch_policies_fired", "applied policies, by policy id", "policy_id"
        )
        self.tier_served = _Counted("govsearch_tier_served", "tier served", "tier")
        # unlabelled, exposed from the start, incremented only by the rare records they count
        self.zero_results = Counter("govsearch_zero_results", "requests with no result", registry=None)
        self.abstentions = Counter("govsearch_abstentions", "requests abstained", registry=None)
        self.errors = _Counted("govsearch_errors", "failed requests, by error code", "code")

    def _count(self, counted: _Counted, value: Any, record: dict[str, Any]) -> None:
        if type(value) is not str:  # a label is text (prometheus_client: ``str(value)``)
            value = str(value)
        counts = counted.counts
        count = counts.get(value)
        if count is None:
            counted.created[value] = _created(record)
            counts[value] = 1
        else:
            counts[value] = count + 1

    def observe(self, record: dict[str, Any]) -> None:
        status = record["status"]
        latency = record.get("latency_ms") or {}
        applied = record.get("applied_policies") or ()
        tier = record.get("tier")
        error = record.get("error")
        count = self._count
        with self._lock:
            count(self.requests, status, record)
            histograms = self.latency
            for stage, ms in latency.items():
                seconds = ms / 1000
                if seconds != seconds:  # NaN: below no bound (prometheus_client counts it nowhere)
                    continue
                histogram = histograms.get(stage)
                if histogram is None:
                    histogram = histograms[stage] = _Latency(_created(record))
                histogram.buckets[bisect_left(BUCKETS, seconds)] += 1  # the first bound >= it
                histogram.sum += seconds
            for policy_id in applied:
                count(self.policies_fired, policy_id, record)
            if tier:
                count(self.tier_served, tier, record)
            if error:
                count(self.errors, error["code"], record)
        if status == "no_results":
            self.zero_results.inc()
        elif status == "abstained":
            self.abstentions.inc()

    def collect(self) -> list[Metric]:
        with self._lock:  # a consistent copy: observation goes on meanwhile
            counted = [self.requests.family(), self._latency_family(), self.policies_fired.family(),
                       self.tier_served.family()]
            errors = self.errors.family()
        return [*counted, *self.zero_results.collect(), *self.abstentions.collect(), errors]

    def _latency_family(self) -> Metric:
        name = "govsearch_stage_latency_seconds"
        metric = Metric(name, "latency per pipeline stage", "histogram")
        for stage, histogram in self.latency.items():
            total = 0.0
            for bound, observed in zip(_BOUNDS, histogram.buckets, strict=True):
                total += observed
                metric.add_sample(name + "_bucket", {"stage": stage, "le": bound}, total)
            metric.add_sample(name + "_count", {"stage": stage}, total)
            metric.add_sample(name + "_sum", {"stage": stage}, histogram.sum)
            if _CREATED:
                metric.add_sample(name + "_created", {"stage": stage}, histogram.created)
        return metric


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.decisions = DecisionTallies()
        r.register(self.decisions)
        self.events = Counter("govsearch_events", "outcome events, by type", ["type"], registry=r)
        self.sink_failures = Counter(
            "govsearch_audit_sink_failures", "audit records a sink refused", ["sink"], registry=r
        )
        self.buffered = Gauge(
            "govsearch_audit_buffered_records", "audit records waiting to be written", registry=r
        )
        self.batch_records = Histogram(
            "govsearch_audit_batch_records",
            "records per audit batch written by a log's writer (one write, one sync: the group commit)",
            ["log"],
            buckets=BATCH_RECORDS_BUCKETS,
            registry=r,
        )
        self.batch_seconds = Histogram(
            "govsearch_audit_batch_seconds",
            "time a log's writer took to write one batch and sync it (the sink's whole call)",
            ["log"],
            buckets=BATCH_SECONDS_BUCKETS,
            registry=r,
        )
        self.backlog_refusals = Counter(
            "govsearch_audit_backlog_refusals",
            "requests refused because their record could not be taken: 503 audit_backlog (the"
            " audit queue was full) or audit_unavailable (no writer thread could be started)",
            ["log"],
            registry=r,
        )

    def watch_cache(self, counts: Callable[[], tuple[int, int]]) -> None:
        self.registry.register(
            _PairCollector("govsearch_plan_cache", "plan cache lookups", "result", ("hit", "miss"), counts)
        )

    def watch_speculation(self, counts: Callable[[], tuple[int, int]]) -> None:
        self.registry.register(_PairCollector(
            "govsearch_speculation",
            "plan misses whose tiers were sent with their percolation, by whether the guess was right",
            "guess", ("right", "wrong"), counts,
        ))

    def observe_decision(self, record: dict[str, Any]) -> None:
        """A decision record's metrics (one lock taken; a scrape after this sees them)."""
        self.decisions.observe(record)

    def render(self) -> bytes:
        return generate_latest(self.registry)
