"""Audit and observability: one hash-chained decision record per request, outcome events,
the audit API, replay, per-policy impact, Prometheus metrics and OpenTelemetry spans.

Modules, by concern: ``record`` (the schema), ``chain`` (hashing), ``sinks`` (JSONL, engine
index), ``recorder`` (building records), ``writer`` (the background writer and its queue),
``verify``, ``replay``, ``impact``, ``metrics``, ``telemetry``, ``router`` (HTTP) and ``cli``.
"""
