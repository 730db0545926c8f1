"""Prometheus metrics, one registry per recorder (so two apps in one process, e.g. in
tests, never share or clash). Served at ``GET /metrics``.

The metrics of decision records (requests, stage latency, policies fired, tier served, zero
results, abstentions, errors) are observed on every request: they are kept as plain tallies
under one lock (:class:`DecisionTallies`), one acquisition per record, and turned into
Prometheus families when scraped, the same families, samples and values
``prometheus_client``'s ``Counter`` and ``Histogram`` expose (which take a lock per child and
per call: about fifteen per record). A scrape sees every record observed before it (ADR
0044). The other metrics (events, sink failures, the queue, backlog refusals) are rare and
stay ``prometheus_client`` objects.
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from control_plane.times import Clock

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_BOUNDS: tuple[str, ...] = (*(floatToGoString(bound) for bound in BUCKETS), "+Inf")  # type: ignore[no-untyped-call]
_CREATED = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False").lower() not in ("true", "1", "t")
"""``*_created`` samples, as ``prometheus_client`` decides (read once, at import, as it does)"""


class _CacheCollector(Collector):
    def __init__(self, counts: Callable[[], tuple[int, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        hits, misses = self.counts()
        family = CounterMetricFamily("govsearch_plan_cache", "plan cache lookups", labels=["result"])
        family.add_metric(["hit"], hits)
        family.add_metric(["miss"], misses)
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

    def __init__(self, clock: Clock | None) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.requests = _Counted("govsearch_requests", "requests recorded, by status", "status")
        self.latency: dict[str, _Latency] = {}
        self.policies_fired = _Counted(
            "govsearch_policies_fired", "applied policies, by policy id", "policy_id"
        )
        self.tier_served = _Counted("govsearch_tier_served", "tier served", "tier")
        self.zero_results = _Counted("govsearch_zero_results", "requests with no result", None)
        self.abstentions = _Counted("govsearch_abstentions", "requests abstained", None)
        self.errors = _Counted("govsearch_errors", "failed requests, by error code", "code")
        started = self._now()
        for single in (self.zero_results, self.abstentions):  # unlabelled: exposed from the start
            single.counts[""] = 0
            single.created[""] = started

    def _now(self) -> float:
        """A series' creation instant (``*_created``): the recorder's clock, read once per
        new series; 0 without one."""
        return self._clock().timestamp() if self._clock is not None else 0.0

    def _count(self, counted: _Counted, value: str) -> None:
        counts = counted.counts
        count = counts.get(value)
        if count is None:
            counted.created[value] = self._now()
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
            count(self.requests, status)
            histograms = self.latency
            for stage, ms in latency.items():
                seconds = ms / 1000
                histogram = histograms.get(stage)
                if histogram is None:
                    histogram = histograms[stage] = _Latency(self._now())
                histogram.buckets[bisect_left(BUCKETS, seconds)] += 1  # the first bound >= it
                histogram.sum += seconds
            for policy_id in applied:
                count(self.policies_fired, policy_id)
            if tier:
                count(self.tier_served, tier)
            if status == "no_results":
                self.zero_results.counts[""] += 1
            elif status == "abstained":
                self.abstentions.counts[""] += 1
            if error:
                count(self.errors, error["code"])

    def collect(self) -> Iterator[Metric]:
        with self._lock:  # a consistent copy: observation goes on meanwhile
            yield self.requests.family()
            yield self._latency_family()
            for counted in (self.policies_fired, self.tier_served, self.zero_results,
                            self.abstentions, self.errors):
                yield counted.family()

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
    def __init__(self, clock: Clock | None = None) -> None:
        """``clock``: when a series was created (its ``*_created`` sample; the recorder's)."""
        self.registry = CollectorRegistry()
        r = self.registry
        self.decisions = DecisionTallies(clock)
        r.register(self.decisions)
        self.events = Counter("govsearch_events", "outcome events, by type", ["type"], registry=r)
        self.sink_failures = Counter(
            "govsearch_audit_sink_failures", "audit records a sink refused", ["sink"], registry=r
        )
        self.buffered = Gauge(
            "govsearch_audit_buffered_records", "audit records waiting to be written", registry=r
        )
        self.backlog_refusals = Counter(
            "govsearch_audit_backlog_refusals",
            "requests refused (503 audit_backlog): the audit queue was full",
            ["log"],
            registry=r,
        )

    def watch_cache(self, counts: Callable[[], tuple[int, int]]) -> None:
        self.registry.register(_CacheCollector(counts))

    def observe_decision(self, record: dict[str, Any]) -> None:
        """A decision record's metrics (one lock taken; a scrape after this sees them)."""
        self.decisions.observe(record)

    def render(self) -> bytes:
        return generate_latest(self.registry)
