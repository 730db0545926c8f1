"""Before and after over HTTP, interleaved in one run: another checkout's ``govsearch serve``
and this one's, against the same engine and the same raw DSL.

``python -m bench.http_compare --before DIR [--engine-url URL] [--seconds S] [--rounds N]``
with ``DIR`` a checkout of the commit to compare with (``git worktree add DIR <commit>``):
its server runs with ``PYTHONPATH=DIR``, so it serves that commit's code with this
environment's dependencies. Measured as in :mod:`bench.http` (single client warm and cold,
throughput at concurrency 1/4/16), every variant interleaved: on a machine shared with
other work, the load moves both sides alike, so the before/after ratios hold where
figures from two separate runs do not. Writes ``bench/results/<UTC date>-http-compare.json``
(or ``--out``) with the command, the machine and the load average.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shlex
import signal
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench import environment
from bench import http as bench_http
from bench.governed import INTENTS
from control_plane.bootstrap import prepare, profile_of
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine
from control_plane.service import SearchRequest, SearchService
from control_plane.times import system_clock


def _serve_checkout(url: str, workers: int, directory: Path, checkout: Path) -> Any:
    os.environ["PYTHONPATH"] = str(checkout)
    try:
        return bench_http._serve(url, workers, directory, "serial")
    finally:
        del os.environ["PYTHONPATH"]


def run(engine: Engine, url: str, before: Path, workers: int, seconds: float, rounds: int) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    now = system_clock()  # the servers read the wall clock: the raw DSL is the one they serve now
    prepare(engine, settings, clock=lambda: now)
    service = SearchService(settings, engine, profile_of(settings))
    alias = service.profile.alias
    intents = list(INTENTS)
    dsl = {i: dict(service.search(SearchRequest(intent=i), now).execution.dsl) for i in intents}
    trips = bench_http._round_trips(service, intents, now)
    service.close()
    users = itertools.count()

    def warm(client: httpx.Client, intent: str) -> None:
        client.post("/v1/search", json={"intent": intent}).raise_for_status()

    def cold(client: httpx.Client, intent: str) -> None:
        body = {"intent": intent, "user_id": f"cold-{next(users)}"}
        client.post("/v1/search", json=body).raise_for_status()

    def raw(client: httpx.Client, intent: str) -> None:
        client.post(f"/{alias}/_search", json=dsl[intent]).raise_for_status()

    with tempfile.TemporaryDirectory() as old_dir, tempfile.TemporaryDirectory() as new_dir:
        old, old_url = _serve_checkout(url, workers, Path(old_dir), before)
        new, new_url = bench_http._serve(url, workers, Path(new_dir), "serial")
        try:
            call = {"governed": warm, "governed_cold": cold, "raw": raw, "before": warm, "before_cold": cold}
            bases = {"governed": new_url, "governed_cold": new_url, "raw": url,
                     "before": old_url, "before_cold": old_url}
            single = bench_http._single_client(call, bases, intents, 3, rounds)
            latency, raw_ms = single["latency"], single["latency"]["raw"]
            for variant in ("before", "before_cold"):
                single[f"{variant}_ratio_p50"] = round(latency[variant]["p50_ms"] / raw_ms["p50_ms"], 2)
                single[f"{variant}_ratio_p95"] = round(latency[variant]["p95_ms"] / raw_ms["p95_ms"], 2)
            throughput: dict[str, Any] = {}
            for threads in bench_http.CONCURRENCY:
                figures: dict[str, Any] = {}
                for variant in ("before", "governed", "raw"):  # each server's CPU per request too
                    server = {"before": old, "governed": new}.get(variant)
                    meters = {"service": partial(environment.tree_cpu_s, server.pid)} if server else {}
                    measured = bench_http._metered(call[variant], bases[variant], intents, threads, seconds,
                                                   meters)
                    figures[variant] = measured.pop("req_s")
                    figures.update({f"{variant}_{name}": value for name, value in measured.items()})
                figures["ratio_before"] = round(figures["before"] / figures["raw"], 2)
                figures["ratio"] = round(figures["governed"] / figures["raw"], 2)
                throughput[str(threads)] = figures
        finally:
            for process in (old, new):
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)
    return {"http_compare": {"before": str(before), "workers": workers, "intents": intents, "rounds": rounds,
                             "seconds": seconds, "single_client": single, "throughput_req_s": throughput,
                             "engine_round_trips": trips}}


def report(result: dict[str, Any]) -> str:
    data = result["http_compare"]
    single = data["single_client"]
    lines = [f"Command: `{result['command']}` ({result['duration_s']} s); load average"
             f" {result['load_average_at_start']} at start, {result['load_average_at_end']} at end", "",
             "| single client | p50 ms | p95 ms | p99 ms |", "| --- | --- | --- | --- |"]
    for variant in ("before", "before_cold", "governed", "governed_cold", "raw"):
        lat = single["latency"][variant]
        lines.append(f"| {variant} | {lat['p50_ms']} | {lat['p95_ms']} | {lat['p99_ms']} |")
    lines += ["", "| concurrency | before req/s | after req/s | raw req/s | before / raw | after / raw"
              " | service CPU ms / request, before | after |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for threads, f in data["throughput_req_s"].items():
        lines.append(f"| {threads} | {f['before']} | {f['governed']} | {f['raw']}"
                     f" | {f['ratio_before']} | {f['ratio']} | {f.get('before_service_cpu_ms')}"
                     f" | {f.get('governed_service_cpu_ms')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http_compare", description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the commit to compare with")
    parser.add_argument("--engine-url", help="engine to measure against (default: start a local one)")
    parser.add_argument("--heap", default="1g", help="heap of the local engine it starts (default 1g)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="each server's --workers")
    parser.add_argument("--seconds", type=float, default=8.0, help="each throughput phase (default 8)")
    parser.add_argument("--rounds", type=int, default=15, help="single-client rounds over the intents")
    parser.add_argument("--out", type=Path,
                        help="result file (default bench/results/<date>-http-compare.json)")
    args = parser.parse_args(argv)
    out = args.out or bench_http.RESULTS / f"{system_clock().date().isoformat()}-http-compare.json"
    command = "python -m bench.http_compare " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = environment.recorded_run(
        command, args.engine_url, args.heap, out,
        lambda engine, url: run(engine, url, args.before.resolve(), args.workers, args.seconds, args.rounds),
    )
    print(report(result))
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
