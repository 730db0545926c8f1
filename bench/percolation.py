"""Percolation and full compile by policy-set size.

Per size, a synthetic set (``bench/synthetic.py``) is published under its own prefix
(publish time and the engine's memory after it recorded); then, interleaved by size and
round, every intent is timed twice: ``matcher.match`` end to end with the loaded set's policy
map and the index's layout read once, as a service loads a version (one percolation of the
distinct trigger documents, highlighted and paged, no layout marker asked for, ADR 0037;
then the expansion to policies in memory: filters, spans, captures; ADR 0015) and
``SearchService.compile`` with the plan cache off (percolate, catalog statistics, compose)
against the set's index. The first load of each set is timed, then its steps one by one,
then the load of a next version (one policy in 1,000 changed) from the served one and alone.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from bench import environment, synthetic
from bench.stats import summary, timed
from control_plane import matcher, policy_store
from control_plane.bootstrap import profile_of
from control_plane.catalog_loader import load_catalog
from control_plane.config import EngineSettings, SearchSettings, Settings, project_path
from control_plane.engine import Engine
from control_plane.policy import Policy, PolicySet
from control_plane.policy_index import build_index
from control_plane.service import SearchRequest, SearchService

PREFIX = "govsearch-bench-policies"
COHORTS = ("vegan",)


def run(
    engine: Engine, url: str, sizes: list[int], intent_count: int, warmup: int, rounds: int
) -> dict[str, Any]:
    """Publish one synthetic set per size, then time every intent against every size.

    Rounds interleave the sizes (rotating which goes first) so drift on the machine spreads
    over all of them; within a size the intents run in a fixed order.
    """
    settings = Settings(
        engine=EngineSettings(url=url, timeout_s=60), search=SearchSettings(plan_cache_size=0)
    )
    profile = profile_of(settings)
    load_catalog(engine, profile, project_path(settings.catalog.file))  # compile reads its price statistics
    vocabulary = synthetic.Vocabulary.from_catalog()
    intents = synthetic.intents(vocabulary, intent_count)
    published: dict[int, tuple[str, dict[str, Policy], SearchService]] = {}
    report: dict[int, dict[str, Any]] = {}
    try:
        for size in sizes:
            started = time.perf_counter()
            policy_set = synthetic.policy_set(size, vocabulary)
            generated_s = time.perf_counter() - started
            started = time.perf_counter()
            index = policy_store.publish(engine, f"{PREFIX}-{size}", policy_set, "live")
            publish_s = time.perf_counter() - started
            print(f"published {size} policies to {index} in {publish_s:.1f}s", file=sys.stderr)
            service = SearchService(settings, engine, profile, index=index)
            started, cpu = time.perf_counter(), time.thread_time()
            service.snapshot()  # the first request's load of the set, once
            load_s, load_cpu_s = time.perf_counter() - started, time.thread_time() - cpu
            parts = _load_parts(engine, index)
            next_load = _next_load(engine, index, service.snapshot()[0])
            published[size] = (index, service.snapshot()[1], service)  # the loaded set's map
            report[size] = {
                "policies": size,
                "version": policy_set.version,
                "trigger_kinds": _kinds(policy_set.policies),
                "generate_s": round(generated_s, 2),
                "publish_s": round(publish_s, 2),
                "first_load_s": round(load_s, 2),
                "first_load_cpu_s": round(load_cpu_s, 2),
                "load_parts_s": parts,
                "next_load": next_load,
                "engine_memory_after_publish": environment.engine_memory(engine),
            }
        return _measure(published, report, sizes, intents, warmup, rounds)
    finally:
        for _, _, service in published.values():
            service.close()


def _load_parts(engine: Engine, index: str) -> dict[str, float]:
    """What a load spends its time on, step by step as ``policy_store.read_index`` does them
    (cyclic collector paused): the document read (HTTP and JSON), validation, lookups."""
    with policy_store._without_cyclic_gc():
        started = time.perf_counter()
        meta = engine.get_document(index, policy_store.META_ID)
        assert meta is not None
        read = time.perf_counter()
        policy_set = PolicySet.model_validate(meta["_source"]["policy_set"])
        validated = time.perf_counter()
        build_index(policy_set)
        built = time.perf_counter()
    return {
        "read": round(read - started, 2),
        "validate": round(validated - read, 2),
        "lookups": round(built - validated, 2),
    }


#: one policy in this many is changed in the next version (:func:`_next_load`)
CHANGED_EVERY = 1000


def _next_load(engine: Engine, index: str, served: policy_store.LivePolicySet) -> dict[str, Any]:
    """The load of the next version while ``served`` is served (a promotion: one policy in
    :data:`CHANGED_EVERY` changed): its set document, priorities edited, written alone to a
    scratch index (all ``read_index`` reads), loaded from ``served`` and then without it."""
    meta = engine.get_document(index, policy_store.META_ID)
    assert meta is not None
    document = meta["_source"]
    for policy in document["policy_set"]["policies"][::CHANGED_EVERY]:
        policy["priority"] = policy["priority"] % 100 + 1
    scratch = f"{index}-next"
    if engine.index_exists(scratch):
        engine.delete_index(scratch)
    engine.create_index(scratch, {"settings": {"number_of_shards": 1, "number_of_replicas": 0},
                                  "mappings": {"enabled": False}})
    try:
        engine.index_document(scratch, policy_store.META_ID, document, refresh=True)
        del meta, document
        result: dict[str, Any] = {"changed_every": CHANGED_EVERY}
        for label, previous in (("from_served", served), ("alone", None)):
            started, cpu = time.perf_counter(), time.thread_time()
            loaded = policy_store.read_index(engine, scratch, previous)
            result[label] = {
                "s": round(time.perf_counter() - started, 2),
                "cpu_s": round(time.thread_time() - cpu, 2),
                "reused": loaded.reused,
            }
            del loaded
        return result
    finally:
        engine.delete_index(scratch)


def _kinds(policies: tuple[Policy, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for policy in policies:
        counts[policy.trigger.kind] = counts.get(policy.trigger.kind, 0) + 1
    return dict(sorted(counts.items()))


def _measure(
    published: dict[int, tuple[str, dict[str, Policy], SearchService]],
    report: dict[int, dict[str, Any]],
    sizes: list[int],
    intents: list[str],
    warmup: int,
    rounds: int,
) -> dict[str, Any]:
    requests = {intent: SearchRequest(intent=intent, cohorts=COHORTS) for intent in intents}
    # read once per version, as a service does when it loads one (ADR 0037)
    layouts = {size: matcher.layout_of(entry[2].engine, entry[0]) for size, entry in published.items()}

    def percolate(size: int, intent: str) -> tuple[int, int]:
        index, by_id, service = published[size]
        elapsed, found = timed(
            lambda: matcher.match(
                service.engine, index, intent, by_id, cohorts=COHORTS, now=synthetic.NOW, layout=layouts[size]
            )
        )
        return elapsed, len(found)

    def compile_(size: int, intent: str) -> int:
        service = published[size][2]
        return timed(lambda: service.compile(requests[intent], synthetic.NOW))[0]

    for _ in range(warmup):
        for size in sizes:
            for intent in intents:
                percolate(size, intent)
                compile_(size, intent)
    samples: dict[str, dict[int, list[int]]] = {
        "percolate": {s: [] for s in sizes}, "compile": {s: [] for s in sizes}
    }
    by_intent: dict[int, dict[str, list[int]]] = {size: {i: [] for i in intents} for size in sizes}
    matches: dict[int, list[int]] = {size: [] for size in sizes}
    for round_number in range(rounds):
        order = sizes[round_number % len(sizes):] + sizes[: round_number % len(sizes)]
        for size in order:
            for intent in intents:
                elapsed, count = percolate(size, intent)
                samples["percolate"][size].append(elapsed)
                by_intent[size][intent].append(elapsed)
                samples["compile"][size].append(compile_(size, intent))
                if round_number == 0:
                    matches[size].append(count)
    for size in sizes:
        counts = sorted(matches[size])
        report[size] |= {
            "latency": summary(samples["percolate"][size]),
            "compile_latency": summary(samples["compile"][size]),
            "matches_per_intent": {
                "mean": round(sum(counts) / len(counts), 1),
                "median": counts[len(counts) // 2],
                "max": counts[-1],
            },
            "per_intent": [
                {"intent": intent, "matches": count, "p50_ms": summary(by_intent[size][intent])["p50_ms"]}
                for intent, count in zip(intents, matches[size], strict=True)
            ],
        }
    first, last = sizes[0], sizes[-1]
    return {
        "intents": intents,
        "cohorts": list(COHORTS),
        "now": synthetic.NOW.isoformat(),
        "warmup_rounds": warmup,
        "rounds": rounds,
        "sizes": [report[size] for size in sizes],
        "growth_p50": {
            "from": first,
            "to": last,
            "percolate": round(report[last]["latency"]["p50_ms"] / report[first]["latency"]["p50_ms"], 2),
            "compile": round(
                report[last]["compile_latency"]["p50_ms"] / report[first]["compile_latency"]["p50_ms"], 2
            ),
        },
    }


def clean_up(engine: Engine, sizes: list[int]) -> None:
    for size in sizes:
        for name in engine.list_indices(f"{PREFIX}-{size}-*"):
            engine.delete_index(name)
