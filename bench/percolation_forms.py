"""The percolation request in its forms, interleaved: what the engine spends on it (ADR 0037).

``python -m bench.percolation_forms --engine-url URL [--sets demo,10000] [--rounds 30]
[--out FILE]``. Per set (``demo``: the index the live demo alias points to, so prepare the
demo first; a number: a synthetic set of that size, ``bench/synthetic.py``, published under
``govsearch-bench-forms-<size>`` and deleted after), two copies of the set's index are made
by reindexing and force-merged to one segment each (so that neither has fewer segments): one
under the mapping before ADR 0037 (``intent`` without offsets: the highlighter analyses the
intent again per hit) and one with offsets. Then per round, the order rotating, every
intent (the governed bench's 20 for the demo, the generator's 50 otherwise) is percolated
in each form:

- ``before``: no offsets, the layout marker asked for (an ``ids`` clause), as main sent it;
- ``offsets``: offsets, the marker asked for;
- ``no_marker``: no offsets, the layout known (no ``ids`` clause);
- ``after``: offsets and no marker (what a service sends since ADR 0037);
- ``floor``: ``match_all`` with ``size: 0`` on the same index: what any search costs.

Before timing, every form's hits (sort values) and highlights are checked equal to
``before``'s for every intent (the marker's own hit aside). Reported per form: client wall
p50 and mean, the engine's ``took`` mean, and the engine's CPU per request (user + system
of the engine process from ``/proc``, ``bench.environment.engine_cpu_s``, over each batch of
intents, averaged). The load average at start and end is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import synthetic
from bench.environment import engine_cpu_s, machine
from bench.governed import INTENTS
from control_plane import matcher, policy_store
from control_plane.bootstrap import profile_of
from control_plane.catalog_loader import load_catalog
from control_plane.config import EngineSettings, Settings, project_path
from control_plane.engine import Engine, connect
from control_plane.intent_text import normalise

FORMS = ("before", "offsets", "no_marker", "after", "floor")
PREFIX = "govsearch-bench-forms"


def _copy(engine: Engine, source: str, target: str, offsets: bool) -> None:
    """``source`` reindexed into ``target``, ``intent`` with or without offsets, one segment."""
    info = engine.request("GET", f"/{source}")[source]
    settings = {
        key: value
        for key, value in info["settings"]["index"].items()
        if key in ("analysis", "number_of_shards", "number_of_replicas")
    }
    mappings = info["mappings"]
    mappings["properties"]["intent"].pop("index_options", None)
    if offsets:
        mappings["properties"]["intent"]["index_options"] = "offsets"
    engine.delete_index(target)
    engine.request("PUT", f"/{target}", body={"settings": {"index": settings}, "mappings": mappings})
    engine.request("POST", "/_reindex", body={"source": {"index": source}, "dest": {"index": target}},
                   params={"refresh": "true"}, timeout_s=600)  # fmt: skip
    engine.request("POST", f"/{target}/_forcemerge", params={"max_num_segments": "1"}, timeout_s=600)


def _bodies(analysis: str, offsets: str) -> dict[str, tuple[str, Callable[[str], dict[str, Any]]]]:
    def marked(intent: str) -> dict[str, Any]:
        return matcher.percolation("", intent)[1]

    def known(intent: str) -> dict[str, Any]:
        return matcher.percolation("", intent, "triggers")[1]

    def floor(intent: str) -> dict[str, Any]:
        return {"size": 0, "query": {"match_all": {}}, "track_total_hits": False}

    return {
        "before": (analysis, marked),
        "offsets": (offsets, marked),
        "no_marker": (analysis, known),
        "after": (offsets, known),
        "floor": (offsets, floor),
    }


def _seen(answer: dict[str, Any]) -> list[tuple[Any, Any]]:
    return [
        (hit.get("sort"), hit.get("highlight"))
        for hit in answer["hits"]["hits"]
        if hit["_id"] != matcher.LAYOUT_ID
    ]


def measure(engine: Engine, source: str, intents: list[str], rounds: int) -> dict[str, Any]:
    analysis, offsets = f"{source}-forms-analysis", f"{source}-forms-offsets"
    _copy(engine, source, analysis, offsets=False)
    _copy(engine, source, offsets, offsets=True)
    forms = _bodies(analysis, offsets)
    try:
        differ: dict[str, int] = {}
        for name in FORMS[1:-1]:
            index, body = forms[name]
            differ[name] = sum(
                _seen(engine.search(index, body(i))) != _seen(engine.search(analysis, forms["before"][1](i)))
                for i in intents
            )
        wall: dict[str, list[float]] = {name: [] for name in FORMS}
        took: dict[str, list[float]] = {name: [] for name in FORMS}
        cpu: dict[str, list[float]] = {name: [] for name in FORMS}
        for number in range(rounds + 1):  # the first round warms up
            order = FORMS[number % len(FORMS):] + FORMS[: number % len(FORMS)]
            for name in order:
                index, body = forms[name]
                bodies = [body(i) for i in intents]
                spent = engine_cpu_s(engine)
                for request in bodies:
                    started = time.perf_counter_ns()
                    answer = engine.search(index, request)
                    if number:
                        wall[name].append((time.perf_counter_ns() - started) / 1e6)
                        took[name].append(answer["took"])
                if number:
                    cpu[name].append((engine_cpu_s(engine) - spent) * 1000 / len(bodies))
        return {
            "intents": len(intents),
            "differing_intents": differ,
            "forms": {
                name: {
                    "wall_p50_ms": round(statistics.median(wall[name]), 3),
                    "wall_mean_ms": round(statistics.fmean(wall[name]), 3),
                    "took_mean_ms": round(statistics.fmean(took[name]), 3),
                    "engine_cpu_per_request_ms": round(statistics.fmean(cpu[name]), 3),
                }
                for name in FORMS
            },
        }
    finally:
        engine.delete_index(analysis)
        engine.delete_index(offsets)


def run(url: str, sets: list[str], rounds: int) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=120))
    engine = connect(settings.engine)
    found: dict[str, Any] = {}
    try:
        for name in sets:
            load = os.getloadavg()[0]
            if name == "demo":
                alias = policy_store.alias_name(settings.policies.index_prefix, "live")
                live = policy_store.single_target(engine, alias)
                if live is None:
                    raise SystemExit("no live demo policy set: prepare the demo first (govsearch demo)")
                found[name] = measure(engine, live, [normalise(i) for i in INTENTS], rounds)
            else:
                size = int(name)
                vocabulary = synthetic.Vocabulary.from_catalog()
                load_catalog(engine, profile_of(settings), project_path(settings.catalog.file))
                policy_set = synthetic.policy_set(size, vocabulary)
                index = policy_store.publish(engine, f"{PREFIX}-{size}", policy_set, "live")
                try:
                    intents = [normalise(i) for i in synthetic.intents(vocabulary, 50)]
                    found[name] = measure(engine, index, intents, rounds)
                finally:
                    for leftover in engine.list_indices(f"{PREFIX}-{size}*"):
                        engine.delete_index(leftover)
            found[name]["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]
            print(name, json.dumps(found[name]), file=sys.stderr)
    finally:
        engine.close()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.percolation_forms", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--engine-url", required=True, help="a local engine the demo was prepared on")
    parser.add_argument("--sets", default="demo,10000", help="demo and/or synthetic sizes")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", type=Path, help="result file (JSON)")
    args = parser.parse_args(argv)
    result = {
        "command": "python -m bench.percolation_forms " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(),
        "sets": run(args.engine_url, args.sets.split(","), args.rounds),
    }
    print(json.dumps(result["sets"], indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
