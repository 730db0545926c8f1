"""Audit and observability: one hash-chained decision record per request, outcome events,
the audit API, replay, per-policy impact, Prometheus metrics and OpenTelemetry spans.

Modules, by concern: ``record`` (the schema), ``chain`` (hashing), ``sinks`` (JSONL, engine
index), ``recorder`` (write path, retry buffer), ``verify``, ``replay``, ``impact``,
``metrics``, ``telemetry``, ``router`` (HTTP) and ``cli``.
"""
