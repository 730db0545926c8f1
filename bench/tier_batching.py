"""The fallback tiers of a plan's first run, sent three ways, interleaved (ADR 0013).

``python -m bench.tier_batching --engine-url URL [--rounds N] [--out FILE]`` on an engine
the demo was prepared on (``bench.http`` or ``govsearch demo`` does it): each bench intent
compiled once at the wall clock's instant, then per round, the order alternating, its
tiers executed (``executor.execute``, the bodies rendered once) as ``serial`` (one request
per tier), ``strict_first`` (strict, then relaxed and broad together) and ``together``
(one request): the cold path's tier time, with no stop tier known. Prints the medians and
writes the per-intent medians and the tiers each intent ran with the load average.

Also the engine's CPU per search in each mode (``bench.environment.engine_cpu_s``: the
engine process's user + system time from ``/proc``, summed over each mode's calls, divided
by their number), and with ``--concurrency 1,4,16``, per level and mode (interleaved, the
order alternating each of ``--phases`` rounds), ``--seconds`` of that many threads (each its
own engine connection) running the intents' tiers in turn: searches per second and the
engine's CPU per search (ADR 0037).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.environment import engine_cpu_s
from bench.governed import INTENTS
from control_plane.bootstrap import profile_of
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine, connect
from control_plane.executor import Batching, execute, tier_batches, tiers_for
from control_plane.renderer import Tier
from control_plane.service import SearchRequest, SearchService
from control_plane.times import system_clock

MODES: tuple[Batching, ...] = ("serial", "strict_first", "cheap_first", "together")


def run(
    url: str, rounds: int, concurrency: list[int] | None = None, seconds: float = 3.0, phases: int = 4
) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    engine = connect(settings.engine)
    service = SearchService(settings, engine, profile_of(settings))
    now = system_clock()
    started = os.getloadavg()
    compiled = [(SearchRequest(intent=i), service.compile(SearchRequest(intent=i), now)) for i in INTENTS]
    samples: dict[str, dict[str, list[float]]] = {m: {i: [] for i in INTENTS} for m in MODES}
    tiers_run: dict[str, int] = {}
    engine_cpu: dict[str, float] = dict.fromkeys(MODES, 0.0)
    for number in range(rounds + 2):
        order = MODES if number % 2 == 0 else MODES[::-1]
        for request, plan_of in compiled:
            plan = plan_of.composition.plan

            def render(tier: Tier, request: SearchRequest = request, plan_of: Any = plan_of) -> Any:
                return service.rendered(plan_of, request, tier)

            for mode in order:
                spent = engine_cpu_s(engine) if number >= 2 else 0.0
                start = time.perf_counter_ns()
                execution = execute(engine, service.profile.alias, plan, render,
                                    min_hits=settings.search.min_hits,
                                    batches=tier_batches(tiers_for(plan), mode))
                if number >= 2:  # two warm-up rounds
                    samples[mode][request.intent].append((time.perf_counter_ns() - start) / 1e6)
                    engine_cpu[mode] += engine_cpu_s(engine) - spent
                tiers_run[request.intent] = len(execution.runs)
    service.close()
    engine.close()
    result: dict[str, Any] = {"now": now.isoformat(), "rounds": rounds,
                              "load_average_at_start": list(started),
                              "load_average_at_end": list(os.getloadavg()), "tiers_run": tiers_run}
    for mode in MODES:
        every = sorted(v for values in samples[mode].values() for v in values)
        result[mode] = {
            "p50_ms": round(statistics.median(every), 2),
            "p95_ms": round(every[int(len(every) * 0.95)], 2),
            "mean_ms": round(statistics.fmean(every), 2),
            "engine_cpu_per_search_ms": round(engine_cpu[mode] * 1000 / len(every), 3),
            "by_intent_p50_ms": {i: round(statistics.median(v), 2) for i, v in samples[mode].items()},
        }
    if concurrency:
        result["concurrency"] = _concurrent(settings, service, compiled, concurrency, seconds, phases)
    return result


def _rendering(service: SearchService, request: SearchRequest, plan_of: Any) -> Callable[[Tier], Any]:
    def render(tier: Tier) -> Any:
        return service.rendered(plan_of, request, tier)

    return render


def _concurrent(
    settings: Settings, service: SearchService, compiled: list[tuple[SearchRequest, Any]],
    levels: list[int], seconds: float, phases: int,
) -> dict[str, dict[str, Any]]:
    """Per level and mode: searches per second and engine CPU per search, the modes
    interleaved (order alternating) over ``phases`` rounds of ``seconds`` each."""
    found: dict[str, dict[str, Any]] = {}
    for level in levels:
        engines = [connect(settings.engine) for _ in range(level)]
        counts: dict[str, int] = dict.fromkeys(MODES, 0)
        spent: dict[str, float] = dict.fromkeys(MODES, 0.0)
        elapsed: dict[str, float] = dict.fromkeys(MODES, 0.0)
        for number in range(phases):
            for mode in MODES if number % 2 == 0 else MODES[::-1]:
                done = [0] * level
                deadline = time.monotonic() + seconds

                def client(
                    slot: int, mode: Batching = mode, deadline: float = deadline,
                    engines: list[Engine] = engines, done: list[int] = done,
                ) -> None:
                    engine, turn = engines[slot], slot
                    while time.monotonic() < deadline:
                        request, plan_of = compiled[turn % len(compiled)]
                        plan = plan_of.composition.plan
                        execute(engine, service.profile.alias, plan,
                                _rendering(service, request, plan_of),
                                min_hits=settings.search.min_hits,
                                batches=tier_batches(tiers_for(plan), mode))
                        done[slot] += 1
                        turn += 1

                threads = [threading.Thread(target=client, args=(slot,)) for slot in range(level)]
                cpu, start = engine_cpu_s(engines[0]), time.perf_counter()
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                elapsed[mode] += time.perf_counter() - start
                spent[mode] += engine_cpu_s(engines[0]) - cpu
                counts[mode] += sum(done)
        for engine in engines:
            engine.close()
        found[str(level)] = {
            mode: {
                "searches_per_s": round(counts[mode] / elapsed[mode], 1),
                "engine_cpu_per_search_ms": round(spent[mode] * 1000 / max(counts[mode], 1), 3),
            }
            for mode in MODES
        }
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tier_batching",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", required=True, help="an engine the demo was prepared on")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--concurrency", help="also throughput at these levels, e.g. 1,4,16")
    parser.add_argument("--seconds", type=float, default=3.0, help="per level, mode and phase")
    parser.add_argument("--phases", type=int, default=4, help="interleaved phases per level and mode")
    parser.add_argument("--out", type=Path, help="result file (JSON)")
    args = parser.parse_args(argv)
    levels = [int(level) for level in args.concurrency.split(",")] if args.concurrency else None
    result = run(args.engine_url, args.rounds, levels, args.seconds, args.phases)
    result["command"] = "python -m bench.tier_batching " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    for mode in MODES:
        print(mode, {k: result[mode][k] for k in ("p50_ms", "p95_ms", "mean_ms", "engine_cpu_per_search_ms")})
    for level, modes in result.get("concurrency", {}).items():
        print("concurrency", level, modes)
    print("load average", result["load_average_at_start"], "->", result["load_average_at_end"])
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
