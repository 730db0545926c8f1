"""Prometheus metrics, one registry per recorder (so two apps in one process, e.g. in
tests, never share or clash). Served at ``GET /metrics``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _CacheCollector(Collector):
    def __init__(self, counts: Callable[[], tuple[int, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        hits, misses = self.counts()
        family = CounterMetricFamily("govsearch_plan_cache", "plan cache lookups", labels=["result"])
        family.add_metric(["hit"], hits)
        family.add_metric(["miss"], misses)
        yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._children: dict[tuple[int, str], Any] = {}
        """labelled children by (metric, label value): see ``_child``"""
        r = self.registry
        self.requests = Counter("govsearch_requests", "requests recorded, by status", ["status"], registry=r)
        self.stage_latency = Histogram(
            "govsearch_stage_latency_seconds",
            "latency per pipeline stage",
            ["stage"],
            buckets=BUCKETS,
            registry=r,
        )
        self.policies_fired = Counter(
            "govsearch_policies_fired", "applied policies, by policy id", ["policy_id"], registry=r
        )
        self.tier_served = Counter("govsearch_tier_served", "tier served", ["tier"], registry=r)
        self.zero_results = Counter("govsearch_zero_results", "requests with no result", registry=r)
        self.abstentions = Counter("govsearch_abstentions", "requests abstained", registry=r)
        self.errors = Counter("govsearch_errors", "failed requests, by error code", ["code"], registry=r)
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

    def _child(self, metric: Any, label: str) -> Any:
        """``metric.labels(label)``, looked up once per label (``labels`` takes a lock and
        checks its arguments every time: a dictionary read is enough on the request path)."""
        key = (id(metric), label)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(label)
        return child

    def observe_decision(self, record: dict[str, Any]) -> None:
        child = self._child
        status = record["status"]
        child(self.requests, status).inc()
        for stage, ms in record.get("latency_ms", {}).items():
            child(self.stage_latency, stage).observe(ms / 1000)
        for policy_id in record.get("applied_policies", []):
            child(self.policies_fired, policy_id).inc()
        if record.get("tier"):
            child(self.tier_served, record["tier"]).inc()
        if status == "no_results":
            self.zero_results.inc()
        elif status == "abstained":
            self.abstentions.inc()
        if record.get("error"):
            child(self.errors, record["error"]["code"]).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
