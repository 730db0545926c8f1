"""Governed search over HTTP against the same DSL sent raw to the engine over HTTP.

``python -m bench.http [--engine-url URL] [--workers N] [--seconds S]`` loads the demo
catalog and policies, starts ``govsearch serve --workers N`` on a free port (its audit log
in a temporary directory), and measures, interleaved in one run:

- single client: ``POST /v1/search`` (plan cache warm: the intents repeat); a new user
  (the same intents, each request under a new ``user_id`` without purchases: the plan is
  shared by every user, so this is the purchases lookup and the cached plan's tiers, the
  same final DSL); cold (a second server with ``search.plan_cache_size: 0``: every request
  percolates, composes, renders and runs its tiers as the first one did) against
  ``POST /<catalog alias>/_search`` with the final DSL the service serves for that intent at
  the same instant, one httpx client each, the order alternating every round;
  Two more servers run beside them in the same rounds: ``written`` (a third ``govsearch
  serve`` with ``audit.commit: written``: a record in the file, not yet synced, when the
  answer goes; ADR 0034) and the **floor** (:mod:`bench.floor`: the same request to a
  minimal Python front end on uvloop and httptools that sends the intent's warm ``_msearch``
  through govsearch's engine client and returns the engine's bytes, no governing at all):
  floor / raw is what a second HTTP hop through Python costs by itself, governed / floor
  what govsearch's own work costs on top; then the same rounds through the standard
  library's ``http.client`` for raw, warm, cold, written and the floor
  (:func:`_lean_single_client`: httpx's own cost dilutes every ratio);
- throughput at concurrency 1, 4 and 16: as many threads, each with its own connection,
  sending requests for ``S`` seconds per variant, in ``SLICES`` slices of ``S / SLICES``:
  per slice raw, governed, written, pipeline and floor one after another, the order reversed from one
  slice to the next, so each variant runs early and late in its level alike (the engine's
  state drifts within a level: it went on compiling hot code for tens of seconds at full
  load, while its CPU per request halved; and the machine's other work comes and goes). Each
  variant's rate is its mean over the slices; its **paired ratio** to raw is the median, with
  the lowest and highest, of the ratios of the rates measured side by side in each slice
  (``<variant>_paired``): the spread says how far the verdict on a target is from the noise.

Before anything is measured the engine is warmed: ``3 S`` seconds of the raw requests from
four clients (its JIT compiler settles: on this machine a fresh node's C2 compiler thread
used half of its CPU for the first 20,000 or so requests).

The engine round trips per search, cold and warm, are counted in process
(``Outcome.engine_requests``) on the same intents. ``--tier-batching`` sets the server's
``search.tier_batching`` (how the fallback tiers of a plan not run before are sent).

The result goes to ``bench/results/<UTC date>-http.json`` with the command, the machine and
the load average; the ratios are what to read on a shared machine.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench import environment
from bench.governed import INTENTS
from bench.stats import paired_ratios, paired_text, summary
from control_plane.bootstrap import prepare, profile_of
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine
from control_plane.engine.base import msearch_lines
from control_plane.service import SearchRequest, SearchService
from control_plane.times import system_clock

RESULTS = Path(__file__).resolve().parent / "results"
CONCURRENCY = (1, 4, 16)
SLICES = 4
"""slices each variant's throughput phase is cut in, per level (every slice runs every variant)"""
RATIOS = (("governed", "ratio"), ("governed_written", "written_ratio"), ("pipeline", "pipeline_ratio"),
          ("floor", "floor_ratio"))
"""the throughput variants measured against raw, and the key of each one's ratio to it"""
CLIENT_HEADERS = {"Accept-Encoding": "identity"}
"""what every client of the bench sends: httpx asks for gzip by default, and the engine then
compresses its answers to the raw client (about 0.5 ms of engine CPU and 0.3 ms per request
here), which govsearch's own engine client never asks for: the raw side would be slowed by
work the governed side does not have"""


def _serve(
    url: str, workers: int, directory: Path, batching: str, plan_cache: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    extra = {"GOVSEARCH_TIER_BATCHING": batching}
    if plan_cache is not None:
        extra["GOVSEARCH_PLAN_CACHE_SIZE"] = str(plan_cache)
    return environment.serve(url, workers, directory, extra)


def _floor(
    url: str, workers: int, directory: Path, intents: list[str], bodies: Mapping[str, str] | None,
    extra: dict[str, str],
) -> tuple[subprocess.Popen[bytes], str]:
    """:mod:`bench.floor` on a free port, ``workers`` processes in a process group of its own:
    the floor with ``bodies``, else ``--pipeline`` (``extra`` its settings); returns once it
    answers a search."""
    env = environment.server_env(url, directory, extra)
    mode = ["--pipeline"]
    if bodies is not None:
        path = directory / "floor-bodies.json"
        path.write_text(json.dumps(dict(bodies)), encoding="utf-8")
        mode = ["--bodies", str(path)]
    port = environment.free_port()
    log = directory / "floor.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.floor", "--engine-url", url, "--port", str(port), *mode,
         "--workers", str(workers)],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
    )
    served = f"http://127.0.0.1:{port}"
    first = {"intent": intents[0]}
    environment.await_ready(
        process, lambda: httpx.post(served + "/v1/search", json=first, timeout=5).status_code == 200,
        "bench.floor", log, 60,
    )
    return process, served


def _rounds(
    send: Mapping[str, Callable[[str], None]], intents: list[str], warmup: int, rounds: int
) -> dict[str, list[int]]:
    """Each variant's ``send`` of each intent, round after round, the variants' order
    alternating from one round to the next; the nanoseconds of each send after the warm-up."""
    samples: dict[str, list[int]] = {variant: [] for variant in send}
    variants = list(send)
    for number in range(warmup + rounds):
        order = variants if number % 2 == 0 else variants[::-1]
        for intent in intents:
            for variant in order:
                started = time.perf_counter_ns()
                send[variant](intent)
                if number >= warmup:
                    samples[variant].append(time.perf_counter_ns() - started)
    return samples


def _ratios(latency: Mapping[str, Mapping[str, float]], keys: Mapping[str, str]) -> dict[str, float]:
    """``{key}ratio_{p}``: the variant's ``p`` over raw's, for each (key prefix, variant) of
    ``keys`` measured."""
    raw = latency["raw"]
    return {
        f"{prefix}ratio_{p}": round(latency[variant][f"{p}_ms"] / raw[f"{p}_ms"], 2)
        for prefix, variant in keys.items() if variant in latency for p in ("p50", "p95", "p99")
    }


def _single_client(
    call: Mapping[str, Callable[[httpx.Client, str], None]], bases: dict[str, str], intents: list[str],
    warmup: int, rounds: int,
) -> dict[str, Any]:
    clients = {variant: httpx.Client(base_url=base, timeout=30, headers=CLIENT_HEADERS)
               for variant, base in bases.items()}
    try:
        samples = _rounds({variant: partial(call[variant], clients[variant]) for variant in call},
                          intents, warmup, rounds)
    finally:
        for client in clients.values():
            client.close()
    latency = {variant: summary(values) for variant, values in samples.items()}
    ratios = {"": "governed", "cold_": "governed_cold", "new_user_": "governed_new_user",
              "written_": "governed_written", "floor_": "floor", "pipeline_": "pipeline"}
    return {"latency": latency} | _ratios(latency, ratios)


LEAN = ("governed", "governed_cold", "governed_written", "floor", "raw")
"""the variants the lean single client measures too"""


def _lean_single_client(
    requests: Mapping[str, Callable[[str], tuple[str, bytes]]], bases: dict[str, str], intents: list[str],
    warmup: int, rounds: int,
) -> dict[str, Any]:
    """The single-client rounds again through the standard library's ``http.client`` (one
    kept-alive connection per variant, ``TCP_NODELAY``, the body framed once), the order
    alternating as in :func:`_single_client`. httpx costs the client about 0.6 ms a request
    here, the same for every variant: it is in the raw side's time too, so it dilutes every
    ratio. A storefront's backend calling govsearch from a pooled client in Java or Go costs
    far less, so these are the ratios it would see (informational: the targets keep the
    httpx figures they have always been measured with)."""
    connections: dict[str, http.client.HTTPConnection] = {}
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}

    def sender(variant: str) -> Callable[[str], None]:
        connection, request = connections[variant], requests[variant]

        def send(intent: str) -> None:
            path, body = request(intent)
            connection.request("POST", path, body=body, headers=headers)
            answer = connection.getresponse()
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"{variant} answered {answer.status} for {intent!r}")

        return send

    try:
        for variant in requests:
            parts = urlsplit(bases[variant])
            connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
            connections[variant] = connection
            connection.connect()
            assert connection.sock is not None
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        samples = _rounds({variant: sender(variant) for variant in requests}, intents, warmup, rounds)
    finally:
        for connection in connections.values():
            connection.close()
    latency = {variant: summary(values) for variant, values in samples.items()}
    return {"latency": latency} | _ratios(latency, {f"{v}_": v for v in requests if v != "raw"})


def _round_trips(service: SearchService, intents: list[str], now: Any) -> dict[str, Any]:
    """Engine requests per search, in process: each intent cold (a plan-cache miss), warm
    (the same request again) and for a new user (the plan cached, the purchases not), and
    how many tiers it ran."""
    cold, warm, new_user, tiers = [], [], [], []
    for number, intent in enumerate(intents):
        request = SearchRequest(intent=intent, user_id=f"trips-{number}")
        first = service.search(request, now)
        cold.append(first.engine_requests)
        warm.append(service.search(request, now).engine_requests)
        other = request.model_copy(update={"user_id": f"trips-other-{number}"})
        new_user.append(service.search(other, now).engine_requests)
        tiers.append(len(first.execution.runs))
    return {"cold_mean": round(sum(cold) / len(cold), 2), "warm_mean": round(sum(warm) / len(warm), 2),
            "new_user_mean": round(sum(new_user) / len(new_user), 2),
            "cold": cold, "warm": warm, "new_user": new_user, "tiers_run": tiers}


def _throughput(
    send: Callable[[httpx.Client, str], None], base: str, intents: list[str], threads: int, seconds: float
) -> float:
    return _metered(send, base, intents, threads, seconds, {})["req_s"]


def _metered(
    send: Callable[[httpx.Client, str], None], base: str, intents: list[str], threads: int, seconds: float,
    cpu: Mapping[str, Callable[[], float]],
) -> dict[str, float]:
    """Requests per second over ``seconds`` with ``threads`` clients, and the CPU each
    process in ``cpu`` (name -> CPU seconds so far) used per request meanwhile, in ms. Each
    client sends at least one request, even one that started after ``seconds`` were up (a
    short phase on a loaded machine): a phase that ran is never a figure of zero."""
    done = [0] * threads
    stop = time.monotonic() + seconds

    def worker(number: int) -> None:
        with httpx.Client(base_url=base, timeout=30, headers=CLIENT_HEADERS) as client:
            while True:
                send(client, intents[(number + done[number]) % len(intents)])
                done[number] += 1
                if time.monotonic() >= stop:
                    break

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    before = {name: read() for name, read in cpu.items()}
    started = time.monotonic()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.monotonic() - started
    requests = max(sum(done), 1)
    return {"req_s": round(sum(done) / elapsed, 1)} | {
        f"{name}_cpu_ms": round((read() - before[name]) * 1000 / requests, 3) for name, read in cpu.items()
    }


def run(
    engine: Engine, url: str, workers: int, seconds: float, rounds: int, batching: str = "serial",
    slices: int = SLICES,
) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    settings = settings.model_copy(
        update={"search": settings.search.model_copy(update={"tier_batching": batching})}
    )
    now = system_clock()  # the server reads the wall clock: the raw DSL is the one it serves now
    prepare(engine, settings, clock=lambda: now)
    service = SearchService(settings, engine, profile_of(settings))
    alias = service.profile.alias
    intents = list(INTENTS)
    trips = _round_trips(service, intents, now)  # first: the plans are not cached yet
    dsl = {i: dict(service.search(SearchRequest(intent=i), now).execution.dsl) for i in intents}
    service.close()
    users = itertools.count()

    def governed(client: httpx.Client, intent: str) -> None:
        client.post("/v1/search", json={"intent": intent}).raise_for_status()

    def governed_new_user(client: httpx.Client, intent: str) -> None:
        body = {"intent": intent, "user_id": f"new-{next(users)}"}
        client.post("/v1/search", json=body).raise_for_status()

    def raw(client: httpx.Client, intent: str) -> None:
        client.post(f"/{alias}/_search", json=dsl[intent]).raise_for_status()

    call = {"governed": governed, "governed_new_user": governed_new_user, "governed_cold": governed,
            "governed_written": governed, "floor": governed, "pipeline": governed, "raw": raw}
    # what govsearch sends for a warm search: the served tier alone, in one _msearch
    bodies = {i: msearch_lines([(alias, json.dumps(dsl[i], ensure_ascii=False))]) for i in intents}
    with tempfile.TemporaryDirectory(prefix="govsearch-bench-http-") as name, ExitStack() as running:
        directory = Path(name)

        def started(server: tuple[subprocess.Popen[bytes], str], group: bool = False) -> tuple[str, int]:
            """``server``'s URL and pid; it is stopped when the run ends, however it ends
            (SIGTERM, to its process group for one that forks, then waited for)."""
            process, base = server
            running.callback(process.wait, timeout=60)
            running.callback(os.killpg if group else os.kill, process.pid, signal.SIGTERM)
            return base, process.pid

        served, governed_pid = started(_serve(url, workers, directory / "warm", batching))
        cold, _ = started(_serve(url, workers, directory / "cold", batching, plan_cache=0))
        served_written, written_pid = started(environment.serve(
            url, workers, directory / "written",
            {"GOVSEARCH_TIER_BATCHING": batching, "GOVSEARCH_AUDIT_COMMIT": "written"},
        ))
        served_floor, floor_pid = started(
            _floor(url, workers, directory / "floor", intents, bodies, {}), True
        )
        served_pipeline, pipeline_pid = started(_floor(
            url, workers, directory / "pipeline", intents, None, {"GOVSEARCH_TIER_BATCHING": batching}
        ), True)
        bases = {"governed": served, "governed_new_user": served, "governed_cold": cold,
                 "governed_written": served_written, "floor": served_floor, "pipeline": served_pipeline,
                 "raw": url}
        servers = {"governed": governed_pid, "governed_written": written_pid, "floor": floor_pid,
                   "pipeline": pipeline_pid}
        warmup_s = 3 * seconds
        _metered(raw, bases["raw"], intents, 4, warmup_s, {})  # the engine's JIT settles first
        single = _single_client(call, bases, intents, 3, rounds)
        searched = {i: json.dumps({"intent": i}).encode() for i in intents}
        raw_bodies = {i: json.dumps(dsl[i]).encode() for i in intents}

        def governed_request(intent: str) -> tuple[str, bytes]:
            return "/v1/search", searched[intent]

        def raw_request(intent: str) -> tuple[str, bytes]:
            return f"/{alias}/_search", raw_bodies[intent]

        lean = _lean_single_client(
            {variant: raw_request if variant == "raw" else governed_request for variant in LEAN},
            bases, intents, 3, rounds,
        )
        throughput: dict[str, Any] = {}
        cpu = {"engine": lambda: environment.engine_cpu_s(engine)}
        order = ["raw", "governed", "governed_written", "pipeline", "floor"]  # raw first: ratios to it
        for level, threads in enumerate(CONCURRENCY):
            figures: dict[str, Any] = {}
            phases: dict[str, list[dict[str, float]]] = {variant: [] for variant in order}
            for variants in slice_orders(order, level, slices):  # every variant in every slice
                for variant in variants:
                    pid = servers.get(variant)
                    meters = cpu | ({"service": partial(environment.tree_cpu_s, pid)} if pid else {})
                    phases[variant].append(
                        _metered(call[variant], bases[variant], intents, threads, seconds / slices, meters)
                    )
            for variant, measured in phases.items():
                combined = _combined(measured)
                figures[variant] = combined.pop("req_s")
                figures.update({f"{variant}_{name}": value for name, value in combined.items()})
            figures.update({key: round(figures[variant] / figures["raw"], 2) for variant, key in RATIOS})
            paired = paired_ratios({variant: [phase["req_s"] for phase in measured]
                                    for variant, measured in phases.items()})
            figures.update({f"{variant}_paired": spread for variant, spread in paired.items()})
            throughput[str(threads)] = figures
    return {"http": {"workers": workers, "tier_batching": batching, "intents": intents, "rounds": rounds,
                     "seconds": seconds, "engine_warmup_s": warmup_s, "throughput_slices": slices,
                     "single_client_warm": single, "single_client_lean": lean,
                     "throughput_req_s": throughput,
                     "engine_round_trips": trips}}


def slice_orders(names: list[str], level: int, slices: int) -> list[list[str]]:
    """The order the variants run in, slice by slice, at the ``level``-th concurrency: the
    given order and its reverse in turn, the first slice of each level the reverse of the
    previous level's."""
    return [names if (level + number) % 2 == 0 else names[::-1] for number in range(slices)]


def _combined(phases: list[dict[str, float]]) -> dict[str, float]:
    """Phases of equal length as one: their mean rate, and CPU per request over all of them
    (each phase's figure weighted by its requests)."""
    rates = [phase["req_s"] for phase in phases]
    total = sum(rates) or 1.0
    combined = {"req_s": round(sum(rates) / len(rates), 1)}
    for name in phases[0]:
        if name != "req_s":
            combined[name] = round(sum(phase[name] * phase["req_s"] for phase in phases) / total, 3)
    return combined


def report(result: dict[str, Any]) -> str:
    http = result["http"]
    single = http["single_client_warm"]
    lines = [
        f"Command: `{result['command']}` ({result['duration_s']} s); load average"
        f" {result['load_average_at_start']} at start, {result['load_average_at_end']} at end;"
        f" govsearch serve --workers {http['workers']}, tier batching {http.get('tier_batching')}",
        "",
        "| single client | p50 ms | p95 ms | p99 ms |",
        "| --- | --- | --- | --- |",
    ]
    variants = ("governed", "governed_new_user", "governed_cold", "governed_written", "pipeline", "floor",
                "raw")
    for variant in variants:
        if variant not in single["latency"]:  # a result from before the variant existed
            continue
        lat = single["latency"][variant]
        lines.append(f"| {variant} | {lat['p50_ms']} | {lat['p95_ms']} | {lat['p99_ms']} |")
    trips = http["engine_round_trips"]
    lines += [f"| warm / raw | {single['ratio_p50']}x | {single['ratio_p95']}x | |",
              f"| new user / raw | {single['new_user_ratio_p50']}x | {single['new_user_ratio_p95']}x | |",
              f"| cold / raw | {single['cold_ratio_p50']}x | {single['cold_ratio_p95']}x | |",
              *(f"| {key} / raw | {single[f'{key}_ratio_p50']}x | {single[f'{key}_ratio_p95']}x | |"
                for key in ("written", "pipeline", "floor") if f"{key}_ratio_p50" in single),
              "",
              f"Engine round trips per search: {trips['warm_mean']} warm, {trips['new_user_mean']} new user,"
              f" {trips['cold_mean']} cold.", "",
              "| concurrency | req/s: governed, written, pipeline, floor, raw | ratios to raw: governed,"
              " written, pipeline, floor | governed / raw slice by slice | written / raw slice by slice"
              " | CPU ms per request (server, engine): governed | written | pipeline | floor"
              " | raw (engine) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for threads, figures in http["throughput_req_s"].items():
        kinds = tuple(variant for variant, _ in RATIOS)
        lines.append(
            f"| {threads} | {', '.join(str(figures.get(k, '-')) for k in (*kinds, 'raw'))} |"
            f" {', '.join(str(figures.get(key, '-')) for _, key in RATIOS)} |"
            f" {paired_text(figures.get('governed_paired'))} |"
            f" {paired_text(figures.get('governed_written_paired'))} | "
            + " | ".join(
                f"{figures.get(f'{k}_service_cpu_ms', '-')}, {figures.get(f'{k}_engine_cpu_ms', '-')}"
                for k in kinds
            )
            + f" | {figures.get('raw_engine_cpu_ms')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http", description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", help="engine to measure against (default: start a local one)")
    parser.add_argument("--heap", default="1g", help="heap of the local engine it starts (default 1g)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="govsearch serve --workers (default: the number of CPUs)")
    parser.add_argument("--seconds", type=float, default=10.0, help="each throughput phase (default 10)")
    parser.add_argument("--rounds", type=int, default=20, help="single-client rounds over the intents")
    parser.add_argument("--tier-batching", default="serial",
                        choices=("together", "strict_first", "serial"),
                        help="the server's search.tier_batching (default serial, the server's)")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-http.json)")
    args = parser.parse_args(argv)
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-http.json"
    command = "python -m bench.http " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = environment.recorded_run(
        command, args.engine_url, args.heap, out,
        lambda engine, url: run(engine, url, args.workers, args.seconds, args.rounds, args.tier_batching),
    )
    print(report(result))
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
