"""The cold path (a plan-cache miss) in process, on an earlier tree and on this one,
alternating, under the same load.

``python -m bench.cold_compare --engine-url URL --before DIR [--runs N] [--rounds R] --out FILE``:
``DIR`` is an earlier checkout (``git archive COMMIT | tar -x -C DIR``). The demo is
prepared once (``bootstrap.prepare`` at the governed bench's instant); then each run starts
one process per tree (``PYTHONPATH`` the tree, this file run as a script, so each measures
its own tree's ``control_plane`` with the same measuring code), alternating before and
after. A process runs three variants per intent (``bench.governed.INTENTS``), interleaved,
the order rotating every round, after two warm-up rounds:

- ``cold``: ``SearchService.search`` with the plan cache off (``plan_cache_size=0``), no user;
- ``cold_user``: the same for the demo persona ``alice`` (her purchases looked up every time);
- ``cached``: the plan cache on, no user (the plan cached after the first round);
- ``cold_cohort``: the plan cache on, every request for a cohort not seen before (a plan
  miss for an intent already matched: what a miss for other cohorts, another market or
  past a window edge costs; ADR 0043);
- ``cold_recorded``: ``cold`` and what a served search adds to it but HTTP: its decision
  record's data (``audit.decision.decision_data``, raw intents stored, as served by default)
  and the answer's bytes (``api.answer.search_answer``); a miss builds the plan's record
  parts and explanation once, as a hit does not (ADR 0046).

Per variant: the wall time p50 and the process CPU time (user + system of the process, all
its threads, ``time.process_time``; the engine is another process) p50 and mean, the engine
requests per search, and the cold stages' medians. The watches are read once (interval 3600 s).
The summary is the median over the runs of each run's figures; each run's load average is kept.

``--before-index`` / ``--after-index``: serve that side from this policies index (the
service's ``index=``) instead of the live alias, e.g. two copies of the demo set under two
mappings (ADR 0037: ``intent`` with and without offsets).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 11, 15, 12, tzinfo=UTC)
"""the instant of ``bench.governed`` (not imported: the earlier tree's bench may differ)"""
VARIANTS = ("cold", "cold_user", "cached", "cold_cohort", "cold_recorded")
USER = "alice"


def measure(url: str, rounds: int, index: str | None = None) -> dict[str, Any]:
    """One side, in this process: the figures of each variant."""
    from bench.governed import INTENTS  # of the tree on PYTHONPATH: the same 20 intents
    from control_plane.api.answer import search_answer
    from control_plane.audit.decision import decision_data
    from control_plane.bootstrap import profile_of
    from control_plane.config import EngineSettings, SearchSettings, Settings
    from control_plane.engine import connect
    from control_plane.service import SearchRequest, SearchService

    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    engine = connect(settings.engine)

    def service(**search: Any) -> SearchService:
        tuned = SearchSettings(alias_watch_interval_s=3600.0, **search)
        served = settings.model_copy(update={"search": tuned})
        return SearchService(served, engine, profile_of(settings), index=index)

    cold, cached, cohorts = service(plan_cache_size=0), service(), service()
    fresh = itertools.count()

    def recorded(intent: str) -> Any:
        request = SearchRequest(intent=intent)
        outcome = cold.search(request, NOW)
        decision_data("bench", request, outcome, raw=True, time=NOW.isoformat(), now=NOW.isoformat(),
                      client=None, endpoint="search", extraction=None, status=None)
        search_answer("bench", request, outcome, cold.profile)
        return outcome

    calls = {
        "cold": lambda intent: cold.search(SearchRequest(intent=intent), NOW),
        "cold_user": lambda intent: cold.search(SearchRequest(intent=intent, user_id=USER), NOW),
        "cached": lambda intent: cached.search(SearchRequest(intent=intent), NOW),
        "cold_cohort": lambda intent: cohorts.search(
            SearchRequest(intent=intent, cohorts=(f"bench-{next(fresh)}",)), NOW
        ),
        "cold_recorded": recorded,
    }
    wall: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    requests: dict[str, list[int]] = {v: [] for v in VARIANTS}
    stages: dict[str, dict[str, list[float]]] = {v: {} for v in VARIANTS}
    for number in range(rounds + 2):
        turn = number % len(VARIANTS)
        order = VARIANTS[turn:] + VARIANTS[:turn]
        for intent in INTENTS:
            for variant in order:
                started_cpu, started = time.process_time_ns(), time.perf_counter_ns()
                outcome = calls[variant](intent)
                elapsed, spent = time.perf_counter_ns() - started, time.process_time_ns() - started_cpu
                if number < 2:
                    continue
                wall[variant].append(elapsed / 1e6)
                cpu[variant].append(spent / 1e6)
                requests[variant].append(outcome.engine_requests)
                for name, ms in outcome.latency_ms.items():
                    stages[variant].setdefault(name, []).append(ms)
    cold.close()
    cached.close()
    cohorts.close()
    engine.close()
    return {
        variant: {
            "wall_p50_ms": round(statistics.median(wall[variant]), 3),
            "cpu_p50_ms": round(statistics.median(cpu[variant]), 3),
            "cpu_mean_ms": round(statistics.fmean(cpu[variant]), 3),
            "engine_requests_mean": round(statistics.fmean(requests[variant]), 2),
            "stage_p50_ms": {n: round(statistics.median(v), 3) for n, v in sorted(stages[variant].items())},
        }
        for variant in VARIANTS
    }


def _side(tree: Path, url: str, rounds: int, index: str | None = None) -> dict[str, Any]:
    load = os.getloadavg()[0]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    served = ["--index", index] if index else []
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", url, "--rounds", str(rounds), *served],
        cwd="/", env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    figures: dict[str, Any] = json.loads(done.stdout)
    return {"figures": figures, "load": [round(load, 2), round(os.getloadavg()[0], 2)]}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for variant in VARIANTS:
        keys = ("wall_p50_ms", "cpu_p50_ms", "cpu_mean_ms", "engine_requests_mean")
        summary[variant] = {
            key: round(statistics.median(run["figures"][variant][key] for run in runs), 3) for key in keys
        }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", help="an engine to measure against (the demo is prepared on it)")
    parser.add_argument("--before", type=Path, help="an earlier checkout")
    parser.add_argument("--runs", type=int, default=3, help="processes per tree (default 3)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds over the intents per process")
    parser.add_argument("--out", type=Path, help="result file (JSON)")
    parser.add_argument("--before-index", help="the index the before side serves (default: the alias)")
    parser.add_argument("--after-index", help="the index the after side serves (default: the alias)")
    parser.add_argument("--index", help=argparse.SUPPRESS)  # of one side
    parser.add_argument("--measure", metavar="URL", help=argparse.SUPPRESS)  # one side, JSON to stdout
    args = parser.parse_args(argv)
    here = str(Path(__file__).resolve().parent)  # run as a script: bench/http.py would shadow http
    sys.path[:] = [entry for entry in sys.path if entry != here]
    if args.measure:
        print(json.dumps(measure(args.measure, args.rounds, args.index)))
        return 0
    if not (args.engine_url and args.before and args.out):
        parser.error("--engine-url, --before and --out are required")
    sys.path.insert(0, str(HERE))
    from bench.environment import machine
    from control_plane.bootstrap import prepare
    from control_plane.config import EngineSettings, Settings
    from control_plane.engine import connect
    from control_plane.times import fixed_clock

    settings = Settings(engine=EngineSettings(url=args.engine_url, timeout_s=30))
    engine = connect(settings.engine)
    prepare(engine, settings, clock=fixed_clock(NOW))
    engine.close()
    sides: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for number in range(args.runs):
        order = ("before", "after") if number % 2 == 0 else ("after", "before")
        for side in order:
            tree = args.before.resolve() if side == "before" else HERE
            index = args.before_index if side == "before" else args.after_index
            sides[side].append(_side(tree, args.engine_url, args.rounds, index))
    result = {
        "command": "python -m bench.cold_compare " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(),
        "now": NOW.isoformat(),
        "runs": sides,
        "summary": {side: _summary(runs) for side, runs in sides.items()},
    }
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
