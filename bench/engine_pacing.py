"""The raw engine at one client, its requests paced: what a pause between two requests costs
the engine itself (issue 14, the concurrency-1 figures).

``python -m bench.engine_pacing [--engine-url URL] [--gaps 0,0.5,1,2,4] [--seconds 8]
[--rounds 3] [--warmup 60] [--out FILE]`` prepares the demo (catalog and policies), takes the
DSL a governed search serves for each of ``bench.governed.INTENTS`` (the figure sheet's raw
requests) and sends it straight to the engine's ``_search`` from one kept-alive connection
(``http.client``: the least client work): first back to back for ``--warmup`` seconds (a
fresh node's JIT compiler takes tens of seconds at full load to settle, and burns CPU at any
rate until it has), then for ``S`` seconds per gap: after each answer the client sleeps
``gap`` ms before the next request. Per gap, the order of the gaps rotating per round:
requests per second, the client's wall p50 / p90 (the sleep not counted), and the
engine's CPU per request (user + system of its process, ``bench.environment.engine_cpu_s``).

A governed search at concurrency 1 leaves the engine idle between its requests for as long
as the service works on the answer, the record and the next request (about 2 ms on this
machine); raw at concurrency 1 sends its next request at once. If the engine does more per
request after a pause, part of governed's distance to raw at concurrency 1 is the engine's,
not the service's: this measures how much.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.environment import engine_cpu_s, recorded_run
from bench.governed import INTENTS
from control_plane.bootstrap import prepare, profile_of
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine
from control_plane.service import SearchRequest, SearchService
from control_plane.times import system_clock


def _bodies(engine: Engine, url: str) -> tuple[str, list[bytes]]:
    """The catalog alias and, per intent, the DSL a warm governed search sends now."""
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    now = system_clock()
    prepare(engine, settings, clock=lambda: now)
    service = SearchService(settings, engine, profile_of(settings))
    try:
        bodies = [
            json.dumps(dict(service.search(SearchRequest(intent=i), now).execution.dsl)).encode()
            for i in INTENTS
        ]
        return service.profile.alias, bodies
    finally:
        service.close()


def _paced(
    connection: http.client.HTTPConnection, path: str, bodies: list[bytes], gap_s: float,
    seconds: float, cpu: Any, content_type: str = "application/json",
) -> dict[str, float]:
    """``bodies`` sent in turn to ``path`` for ``seconds``, ``gap_s`` of sleep after each
    answer: requests per second, wall p50 / p90, the engine's CPU per request (``cpu()``)."""
    headers = {"Content-Type": content_type}
    latencies: list[float] = []
    started, cpu_before = time.perf_counter(), cpu()
    while time.perf_counter() - started < seconds:
        body = bodies[len(latencies) % len(bodies)]
        sent = time.perf_counter()
        connection.request("POST", path, body, headers)
        answer = connection.getresponse()
        answer.read()
        latencies.append(time.perf_counter() - sent)
        if answer.status != 200:
            raise RuntimeError(f"the engine answered {answer.status}")
        if gap_s:
            time.sleep(gap_s)
    elapsed, used = time.perf_counter() - started, cpu() - cpu_before
    latencies.sort()
    return {
        "req_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 3),
        "p90_ms": round(latencies[int(len(latencies) * 0.9)] * 1000, 3),
        "engine_cpu_ms": round(used * 1000 / len(latencies), 3),
        "engine_cores": round(used / elapsed, 2),
    }


def run(
    engine: Engine, url: str, gaps_ms: list[float], seconds: float, rounds: int, warmup_s: float
) -> dict[str, Any]:
    alias, bodies = _bodies(engine, url)
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)
    path = f"/{alias}/_search"

    def cpu() -> float:
        return engine_cpu_s(engine)

    _paced(connection, path, bodies, 0, warmup_s, cpu)  # the engine's JIT settles first
    samples: dict[float, list[dict[str, float]]] = {gap: [] for gap in gaps_ms}
    for number in range(rounds):
        order = gaps_ms if number % 2 == 0 else gaps_ms[::-1]
        for gap in order:
            samples[gap].append(_paced(connection, path, bodies, gap / 1000, seconds, cpu))
    connection.close()
    return {"pacing": {
        "intents": len(bodies), "seconds": seconds, "rounds": rounds, "warmup_s": warmup_s,
        "gaps": [
            {"gap_ms": gap} | {key: round(statistics.median(s[key] for s in runs), 3) for key in runs[0]}
            for gap, runs in samples.items()
        ],
    }}


def sheet(result: dict[str, Any]) -> str:
    lines = ["| gap ms | req/s | p50 ms | p90 ms | engine CPU ms per request | engine cores |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in result["pacing"]["gaps"]:
        lines.append(f"| {row['gap_ms']} | {row['req_s']} | {row['p50_ms']} | {row['p90_ms']} |"
                     f" {row['engine_cpu_ms']} | {row['engine_cores']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.engine_pacing", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--engine-url", help="an engine to use (default: a local one of our own)")
    parser.add_argument("--gaps", default="0,0.5,1,2,4", help="pauses between requests, ms, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per gap and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds back to back before measuring")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--out", type=Path, default=Path("bench/results/engine-pacing.json"))
    args = parser.parse_args(argv)
    gaps = [float(g) for g in args.gaps.split(",")]
    result = recorded_run(
        " ".join(["python -m bench.engine_pacing", *(argv if argv is not None else sys.argv[1:])]),
        args.engine_url, args.heap, args.out,
        lambda engine, url: run(engine, url, gaps, args.seconds, args.rounds, args.warmup),
    )
    print(sheet(result))
    print(f"load average {result['load_average_at_start']} -> {result['load_average_at_end']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
