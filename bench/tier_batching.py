"""The fallback tiers of a plan's first run, sent three ways, interleaved (ADR 0013).

``python -m bench.tier_batching --engine-url URL [--rounds N] [--out FILE]`` on an engine
the demo was prepared on (``bench.http`` or ``govsearch demo`` does it): each bench intent
compiled once at the wall clock's instant, then per round, the order alternating, its
tiers executed (``executor.execute``, the bodies rendered once) as ``serial`` (one request
per tier), ``strict_first`` (strict, then relaxed and broad together) and ``together``
(one request): the cold path's tier time, with no stop tier known. Prints the medians and
writes the per-intent medians and the tiers each intent ran with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.governed import INTENTS
from control_plane.bootstrap import profile_of
from control_plane.config import EngineSettings, Settings
from control_plane.engine import connect
from control_plane.executor import Batching, execute, tier_batches, tiers_for
from control_plane.renderer import Tier
from control_plane.service import SearchRequest, SearchService
from control_plane.times import system_clock

MODES: tuple[Batching, ...] = ("serial", "strict_first", "cheap_first", "together")


def run(url: str, rounds: int) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    engine = connect(settings.engine)
    service = SearchService(settings, engine, profile_of(settings))
    now = system_clock()
    started = os.getloadavg()
    compiled = [(SearchRequest(intent=i), service.compile(SearchRequest(intent=i), now)) for i in INTENTS]
    samples: dict[str, dict[str, list[float]]] = {m: {i: [] for i in INTENTS} for m in MODES}
    tiers_run: dict[str, int] = {}
    for number in range(rounds + 2):
        order = MODES if number % 2 == 0 else MODES[::-1]
        for request, plan_of in compiled:
            plan = plan_of.composition.plan

            def render(tier: Tier, request: SearchRequest = request, plan_of: Any = plan_of) -> Any:
                return service.rendered(plan_of, request, tier)

            for mode in order:
                start = time.perf_counter_ns()
                execution = execute(engine, service.profile.alias, plan, render,
                                    min_hits=settings.search.min_hits,
                                    batches=tier_batches(tiers_for(plan), mode))
                if number >= 2:  # two warm-up rounds
                    samples[mode][request.intent].append((time.perf_counter_ns() - start) / 1e6)
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
            "by_intent_p50_ms": {i: round(statistics.median(v), 2) for i, v in samples[mode].items()},
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tier_batching",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", required=True, help="an engine the demo was prepared on")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", type=Path, help="result file (JSON)")
    args = parser.parse_args(argv)
    result = run(args.engine_url, args.rounds)
    result["command"] = f"python -m bench.tier_batching --engine-url {args.engine_url} --rounds {args.rounds}"
    for mode in MODES:
        print(mode, {k: result[mode][k] for k in ("p50_ms", "p95_ms", "mean_ms")})
    print("load average", result["load_average_at_start"], "->", result["load_average_at_end"])
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
