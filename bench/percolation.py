"""Percolation latency by policy-set size: ``matcher.match`` timed end to end (one
``percolate`` request with highlighting, plus span and capture extraction)."""

from __future__ import annotations

import sys
import time
from typing import Any

from bench import synthetic
from bench.stats import summary, timed
from control_plane import matcher, policy_store
from control_plane.engine import Engine
from control_plane.policy import Policy

PREFIX = "govsearch-bench-policies"


def run(engine: Engine, sizes: list[int], intent_count: int, warmup: int, rounds: int) -> dict[str, Any]:
    """Publish one synthetic set per size, then time every intent against every size.

    Rounds interleave the sizes (rotating which goes first) so drift on the machine spreads
    over all of them; within a size the intents run in a fixed order.
    """
    vocabulary = synthetic.Vocabulary.from_catalog()
    intents = synthetic.intents(vocabulary, intent_count)
    published: dict[int, tuple[str, dict[str, Policy]]] = {}
    report: dict[int, dict[str, Any]] = {}
    for size in sizes:
        policy_set = synthetic.policy_set(size, vocabulary)
        prefix = f"{PREFIX}-{size}"
        started = time.perf_counter()
        index = policy_store.publish(engine, prefix, policy_set, "live")
        publish_s = time.perf_counter() - started
        print(f"published {size} policies to {index} in {publish_s:.1f}s", file=sys.stderr)
        published[size] = (index, {p.id: p for p in policy_set.policies})
        report[size] = {"policies": size, "version": policy_set.version, "publish_s": round(publish_s, 2)}

    def once(size: int, intent: str) -> tuple[int, int]:
        index, by_id = published[size]
        elapsed, found = timed(
            lambda: matcher.match(engine, index, intent, by_id, cohorts=("vegan",), now=synthetic.NOW)
        )
        return elapsed, len(found)

    for _ in range(warmup):
        for size in sizes:
            for intent in intents:
                once(size, intent)
    samples: dict[int, list[int]] = {size: [] for size in sizes}
    by_intent: dict[int, dict[str, list[int]]] = {size: {i: [] for i in intents} for size in sizes}
    matches: dict[int, list[int]] = {size: [] for size in sizes}
    for round_number in range(rounds):
        order = sizes[round_number % len(sizes):] + sizes[: round_number % len(sizes)]
        for size in order:
            for intent in intents:
                elapsed, count = once(size, intent)
                samples[size].append(elapsed)
                by_intent[size][intent].append(elapsed)
                if round_number == 0:
                    matches[size].append(count)
    for size in sizes:
        counts = sorted(matches[size])
        report[size] |= {
            "latency": summary(samples[size]),
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
    return {
        "intents": intents,
        "cohorts": ["vegan"],
        "now": synthetic.NOW.isoformat(),
        "warmup_rounds": warmup,
        "rounds": rounds,
        "sizes": [report[size] for size in sizes],
    }


def clean_up(engine: Engine, sizes: list[int]) -> None:
    for size in sizes:
        for name in engine.list_indices(f"{PREFIX}-{size}-*"):
            engine.delete_index(name)
