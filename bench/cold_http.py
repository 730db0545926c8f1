"""The cold path (a plan-cache miss) over HTTP, on an earlier tree and on this one,
interleaved in one run.

``python -m bench.cold_http --engine-url URL --before DIR [--rounds R] [--variant NAME]...
[--user ID] [--out FILE]``: ``DIR`` is an earlier checkout (``git archive COMMIT | tar -x -C
DIR``). The demo is prepared once at the wall clock's instant; then one ``govsearch serve
--workers 1`` per variant runs, side by side (``before_*`` with ``PYTHONPATH=DIR``):

- ``before_cold``, ``after_cold``: ``search.plan_cache_size: 0``, every request percolates,
  composes, renders and runs its tiers as a first one does (the figure sheet's cold);
- ``before_cohort``, ``after_cohort``: the plan cache on, every request for a cohort not
  seen before: a plan miss for an intent already matched (ADR 0043);
- ``after_warm``: the plan cache on, the intents repeat.

One client per server sends ``POST /v1/search`` for each of ``bench.governed.INTENTS`` (no
user, or ``--user``), the servers' order rotating every round, after one warm-up round.
Per server: the wall time p50 / p95, and its CPU time (user + system of its process tree,
from ``/proc``) over the measured rounds per request. The result (with the load average at
start and end) is printed and written to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import environment
from bench.governed import INTENTS

HEADERS = {"Accept-Encoding": "identity"}


COLD = {"GOVSEARCH_PLAN_CACHE_SIZE": "0"}
VARIANTS: dict[str, tuple[bool, dict[str, str], bool]] = {
    "before_cold": (True, COLD, False),
    "after_cold": (False, COLD, False),
    "before_cohort": (True, {}, True),
    "after_cohort": (False, {}, True),
    "after_warm": (False, {}, False),
}
"""name: (served from the earlier tree, the server's environment, a fresh cohort per request)"""


def _serve(url: str, directory: Path, tree: Path | None, extra: dict[str, str]) -> Any:
    if tree is not None:
        os.environ["PYTHONPATH"] = str(tree)
    try:
        return environment.serve(url, 1, directory, extra)
    finally:
        os.environ.pop("PYTHONPATH", None)


def run(
    url: str, before: Path, rounds: int, user: str | None = None, only: tuple[str, ...] = ()
) -> dict[str, Any]:
    from control_plane.bootstrap import prepare
    from control_plane.config import EngineSettings, Settings
    from control_plane.engine import connect
    from control_plane.times import system_clock

    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    engine = connect(settings.engine)
    now = system_clock()
    prepare(engine, settings, clock=lambda: now)
    engine.close()
    load = [round(os.getloadavg()[0], 2)]
    names = only or tuple(VARIANTS)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, float] = {n: 0.0 for n in names}
    body: dict[str, Any] = {"user_id": user} if user else {}
    cohorts = itertools.count()
    with tempfile.TemporaryDirectory(prefix="govsearch-cold-http-") as tmp:
        servers = {
            name: _serve(url, Path(tmp) / name, before if VARIANTS[name][0] else None, VARIANTS[name][1])
            for name in names
        }
        clients = {n: httpx.Client(base_url=servers[n][1], timeout=30, headers=HEADERS) for n in names}
        try:
            for number in range(rounds + 1):
                order = names[number % len(names):] + names[: number % len(names)]
                for name in order:
                    pid = servers[name][0].pid
                    spent = environment.tree_cpu_s(pid)
                    times = []
                    for intent in INTENTS:
                        fresh = {"cohorts": [f"bench-{next(cohorts)}"]} if VARIANTS[name][2] else {}
                        sent = {"intent": intent, **body, **fresh}
                        started = time.perf_counter_ns()
                        clients[name].post("/v1/search", json=sent).raise_for_status()
                        times.append((time.perf_counter_ns() - started) / 1e6)
                    spent = environment.tree_cpu_s(pid) - spent
                    if number == 0:
                        continue
                    wall[name] += times
                    cpu[name] += spent
        finally:
            for client in clients.values():
                client.close()
            for process, _ in servers.values():
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)
    load.append(round(os.getloadavg()[0], 2))
    return {
        "load_average": load,
        "rounds": rounds,
        "user": user,
        "variants": list(names),
        "figures": {
            name: {
                "wall_p50_ms": round(statistics.median(wall[name]), 3),
                "wall_p95_ms": round(statistics.quantiles(wall[name], n=20)[18], 3),
                "service_cpu_ms_per_request": round(cpu[name] * 1000 / len(wall[name]), 3),
            }
            for name in names
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_http", description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", required=True)
    parser.add_argument("--before", type=Path, required=True, help="an earlier checkout")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--user", help="a user_id sent with every request (default: none)")
    parser.add_argument("--variant", action="append", choices=tuple(VARIANTS), default=[],
                        help="run only these servers (repeatable; default: all)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = {"command": "python -m bench.cold_http " + " ".join(sys.argv[1:] if argv is None else argv)}
    result |= run(args.engine_url, args.before.resolve(), args.rounds, args.user, tuple(args.variant))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
