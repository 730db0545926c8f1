"""Governed search against the same DSL sent directly, on the demo catalog and policies.

For each intent: ``SearchService.search`` end to end, with the plan cache off
(``plan_cache_size=0``: anonymous, and for a user whose purchases are looked up, the demo's
``alice``) and on, against ``engine.search(alias, dsl)`` with the final DSL the governed
search served (``outcome.execution.dsl``). The four run interleaved, the order rotating
every round; each call's process CPU time is noted with its wall time (the engine is
another process), and the cold searches' stages (percolate, purchases, compose, render,
tiers) and engine requests are kept: where a plan-cache miss spends its time. The governed
search may run more than one tier (strict, relaxed, broad) when a tier returns fewer than
``min_hits``; the direct request is always one, and the report says how many tiers each
intent ran.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from bench.stats import summary, timed
from control_plane.bootstrap import prepare, profile_of
from control_plane.config import EngineSettings, SearchSettings, Settings
from control_plane.engine import Engine
from control_plane.service import SearchRequest, SearchService
from control_plane.times import fixed_clock

NOW = datetime(2026, 11, 15, 12, tzinfo=UTC)
INTENTS = (
    "oranges",
    "orange juice",
    "chocolate",
    "cheap chocolate",
    "chocolate without peanuts",
    "chocolat sans arachide",
    "chocolat sans cacahuètes",
    "dark chocolate",
    "chocolate under 5",
    "baby formula",
    "sodas",
    "clearance",
    "french fries",
    "vanilla ice cream",
    "coffee creamer without milk",
    "green beans pas cher",
    "salad dressing",
    "mustard",
    "lentils",
    "french toast",
)
VARIANTS = ("governed", "governed_user", "governed_cached", "direct")
USER = "alice"
"""a demo persona with purchases: the cold search with a user looks them up"""
COLD = ("governed", "governed_user")


def run(engine: Engine, url: str, intent_count: int, warmup: int, rounds: int) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    ready = prepare(engine, settings, clock=fixed_clock(NOW))
    no_cache = settings.model_copy(update={"search": SearchSettings(plan_cache_size=0)})
    uncached = SearchService(no_cache, engine, profile_of(settings))
    cached = SearchService(settings, engine, profile_of(settings))
    alias = uncached.profile.alias
    intents = list(INTENTS[:intent_count])
    requests = {intent: SearchRequest(intent=intent) for intent in intents}
    users = {intent: SearchRequest(intent=intent, user_id=USER) for intent in intents}
    try:
        first = {intent: uncached.search(requests[intent], NOW) for intent in intents}
        dsl = {intent: dict(outcome.execution.dsl) for intent, outcome in first.items()}
        calls: dict[str, Callable[[str], Any]] = {
            "governed": lambda intent: uncached.search(requests[intent], NOW),
            "governed_user": lambda intent: uncached.search(users[intent], NOW),
            "governed_cached": lambda intent: cached.search(requests[intent], NOW),
            "direct": lambda intent: engine.search(alias, dsl[intent]),
        }
        for _ in range(warmup):
            for intent in intents:
                for variant in VARIANTS:
                    calls[variant](intent)
        samples: dict[str, dict[str, list[int]]] = {v: {i: [] for i in intents} for v in VARIANTS}
        cpu: dict[str, list[int]] = {v: [] for v in VARIANTS}
        stages: dict[str, list[float]] = {"compile": [], "execute": []}
        cold: dict[str, dict[str, list[float]]] = {v: {} for v in COLD}
        for round_number in range(rounds):
            shift = round_number % len(VARIANTS)
            order = VARIANTS[shift:] + VARIANTS[:shift]
            for intent in intents:
                for variant in order:
                    started_cpu = time.process_time_ns()
                    elapsed, result = timed(partial(calls[variant], intent))
                    cpu[variant].append(time.process_time_ns() - started_cpu)
                    samples[variant][intent].append(elapsed)
                    if variant == "governed":
                        stages["compile"].append(result.latency_ms["compile"])
                        stages["execute"].append(result.latency_ms["execute"])
                    if variant in COLD:
                        parts = cold[variant]
                        for name, ms in result.latency_ms.items():
                            parts.setdefault(name, []).append(ms)
                        parts.setdefault("engine_requests", []).append(result.engine_requests)
    finally:
        uncached.close()
        cached.close()
    pooled = {v: [s for i in intents for s in samples[v][i]] for v in VARIANTS}
    report = {v: summary(pooled[v]) for v in VARIANTS}
    direct_p50 = report["direct"]["p50_ms"]
    return {
        "catalog_documents": ready.catalog.documents,
        "policy_set_version": ready.policy_set_version,
        "now": NOW.isoformat(),
        "warmup_rounds": warmup,
        "rounds": rounds,
        "intents": intents,
        "latency": report,
        "governed_stage_p50_ms": {k: round(statistics.median(v), 3) for k, v in stages.items()},
        "cpu_p50_ms": {v: round(statistics.median(cpu[v]) / 1e6, 3) for v in VARIANTS},
        "cold_parts": {
            variant: {
                "stage_p50_ms": {
                    name: round(statistics.median(values), 3)
                    for name, values in sorted(parts.items())
                    if name != "engine_requests"
                },
                "stage_samples": {name: len(values) for name, values in sorted(parts.items())},
                "engine_requests_mean": round(statistics.fmean(parts["engine_requests"]), 2),
            }
            for variant, parts in cold.items()
        },
        "ratio_of_medians": {
            "governed/direct": round(report["governed"]["p50_ms"] / direct_p50, 2),
            "governed_user/direct": round(report["governed_user"]["p50_ms"] / direct_p50, 2),
            "governed_cached/direct": round(report["governed_cached"]["p50_ms"] / direct_p50, 2),
        },
        "overhead_p50_ms": {
            "governed": round(report["governed"]["p50_ms"] - direct_p50, 3),
            "governed_user": round(report["governed_user"]["p50_ms"] - direct_p50, 3),
            "governed_cached": round(report["governed_cached"]["p50_ms"] - direct_p50, 3),
        },
        "per_intent": [
            {
                "intent": intent,
                "tiers_run": len(first[intent].execution.runs),
                "tier_served": first[intent].execution.tier,
                "total_hits": first[intent].execution.total,
                **{f"{v}_p50_ms": summary(samples[v][intent])["p50_ms"] for v in VARIANTS},
            }
            for intent in intents
        ],
    }
