"""OpenTelemetry spans per stage, exported only when ``telemetry.otlp_endpoint`` is set.

Spans are emitted after the request from the stage timings the service measured
(``Outcome.stages``, ``perf_counter_ns``), with explicit start and end times: one root
span ``govsearch.search`` and a child per stage (``percolate``, ``purchases``,
``compose``, ``render.<tier>``, ``tier.<tier>``) carrying policy ids, tier and counts.
The pipeline itself never imports OpenTelemetry.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from control_plane.config import TelemetrySettings

log = logging.getLogger("govsearch.telemetry")


class Telemetry:
    def __init__(self, tracer: Any | None) -> None:
        self.tracer = tracer
        """an OpenTelemetry tracer; None: telemetry off"""

    @classmethod
    def off(cls) -> Telemetry:
        return cls(None)

    @classmethod
    def from_settings(cls, settings: TelemetrySettings) -> Telemetry:
        if not settings.otlp_endpoint:
            return cls.off()
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            log.warning("telemetry.otlp_endpoint is set but opentelemetry-sdk/exporter are not installed")
            return cls.off()
        provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otlp_endpoint)))
        return cls.with_provider(provider)

    @classmethod
    def with_provider(cls, provider: Any) -> Telemetry:
        return cls(provider.get_tracer("govsearch"))

    def emit(self, record: dict[str, Any], stages: Any) -> None:
        """One trace for one recorded request; ``stages`` are ``StageTiming`` s."""
        if self.tracer is None:
            return
        from opentelemetry import trace

        offset = time.time_ns() - time.perf_counter_ns()
        total_ms = record.get("latency_ms", {}).get("total", 0.0)
        end = time.time_ns()
        start = (offset + stages[0].start_ns) if stages else end - int(total_ms * 1e6)
        root = self.tracer.start_span("govsearch.search", start_time=start, attributes=_attributes(record))
        if record.get("error"):
            root.set_status(trace.Status(trace.StatusCode.ERROR, record["error"]["code"]))
        context = trace.set_span_in_context(root)
        for stage in stages:
            attributes: dict[str, Any] = {"govsearch.stage": stage.name}
            if stage.name == "percolate":
                attributes["govsearch.matched"] = [m["policy_id"] for m in record.get("matched", [])]
            elif stage.name == "compose":
                attributes["govsearch.applied"] = record.get("applied_policies", [])
            elif stage.name.startswith("tier."):
                tier = stage.name.split(".", 1)[1]
                attributes["govsearch.tier"] = tier
                attributes["govsearch.hits"] = next(
                    (run["total"] for run in record.get("tiers", []) if run["tier"] == tier), 0
                )
            span = self.tracer.start_span(
                stage.name, context=context, start_time=offset + stage.start_ns, attributes=attributes
            )
            span.end(end_time=offset + stage.end_ns)
        root.end(end_time=max(end, start))


def _attributes(record: dict[str, Any]) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "govsearch.request_id": record["request_id"],
        "govsearch.status": record["status"],
        "govsearch.hits": record.get("hits", 0),
        "govsearch.applied": record.get("applied_policies", []),
        "govsearch.cached": record.get("cached", False),
    }
    for key in ("policy_set_version", "tier"):
        if record.get(key):
            attributes[f"govsearch.{key}"] = record[key]
    if record.get("error"):
        attributes["govsearch.error"] = record["error"]["code"]
    return attributes
