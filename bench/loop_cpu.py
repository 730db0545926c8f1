"""The event loop's CPU per warm search: one ``govsearch serve --workers 1`` per variant side
by side, the CPU of its main thread (the event loop) and of the whole process per request.

``python -m bench.loop_cpu --engine-url URL --variant before=PYTHONPATH=DIR --variant after
[--rounds 10] [--requests 400]`` loads the demo catalog and policies, creates an auditor's
key (for ``explain``), starts the servers (``bench.environment.serve``: each its audit log,
the variant's extra environment), warms every plan, then per round and kind of request
(``plain``; ``explained``, with the auditor's key) sends ``requests`` warm searches over the
demo intents to each server in turn, one client each, the order alternating every round.
The CPU is read from ``/proc/<pid>/task/<tid>/schedstat`` (nanoseconds on a core) before and
after each batch: the main thread's, and every thread's summed. Reported per variant and
kind: the medians over the rounds (ms per request) and the client's p50, and, with two
variants, the median of the per-round differences of the loop thread's CPU (the last
variant minus the first). Writes ``bench/results/<UTC date>-loop-cpu.json`` with the command,
the machine and the load average.
"""

from __future__ import annotations

import argparse
import glob
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import environment
from bench.governed import INTENTS
from bench.http_layer import parse_variant
from control_plane.bootstrap import prepare
from control_plane.config import EngineSettings, Settings
from control_plane.engine import connect
from control_plane.lifecycle.keys import KeyStore
from control_plane.times import system_clock

RESULTS = Path(__file__).resolve().parent / "results"


def on_cpu_s(pid: int) -> tuple[float, float]:
    """(the main thread's, every thread's) seconds on a core so far."""
    threads: dict[int, float] = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(f"{task}/schedstat", encoding="ascii") as stat:
                threads[int(task.rsplit("/", 1)[1])] = int(stat.read().split()[0]) / 1e9
        except OSError:  # a thread that ended meanwhile
            continue
    return threads.get(pid, 0.0), sum(threads.values())


def run(url: str, variants: dict[str, dict[str, str]], rounds: int, requests: int) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    engine = connect(settings.engine)
    now = system_clock()
    prepare(engine, settings, clock=lambda: now)
    key, _ = KeyStore(engine, settings.auth.keys_index).create("bench-loop-cpu", ["auditor"], now)
    kinds: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
        "plain": ({}, {}), "explained": ({"explain": True}, {"authorization": f"Bearer {key}"}),
    }
    processes: dict[str, subprocess.Popen[bytes]] = {}
    samples: dict[str, dict[str, dict[str, list[float]]]] = {
        kind: {name: {"loop_ms": [], "process_ms": [], "p50_ms": []} for name in variants} for kind in kinds
    }
    with tempfile.TemporaryDirectory(prefix="govsearch-bench-loop-cpu-") as directory:
        clients: dict[str, httpx.Client] = {}
        try:
            for name, extra in variants.items():
                processes[name], base = environment.serve(url, 1, Path(directory) / name, extra)
                clients[name] = httpx.Client(
                    base_url=base, timeout=30, headers={"accept-encoding": "identity"}
                )
            for client in clients.values():  # every plan cached, every rendering kept
                for fields, headers in kinds.values():
                    for intent in INTENTS * 2:
                        client.post("/v1/search", json={"intent": intent, **fields}, headers=headers)
            names = list(variants)
            for number in range(rounds):
                for kind, (fields, headers) in kinds.items():
                    for name in names if number % 2 == 0 else names[::-1]:
                        loop_before, process_before = on_cpu_s(processes[name].pid)
                        latencies = []
                        for count in range(requests):
                            started = time.perf_counter()
                            clients[name].post("/v1/search", headers=headers, json={
                                "intent": INTENTS[count % len(INTENTS)], **fields,
                            }).raise_for_status()
                            latencies.append(time.perf_counter() - started)
                        loop_after, process_after = on_cpu_s(processes[name].pid)
                        figures = samples[kind][name]
                        figures["loop_ms"].append((loop_after - loop_before) * 1000 / requests)
                        figures["process_ms"].append((process_after - process_before) * 1000 / requests)
                        figures["p50_ms"].append(statistics.median(latencies) * 1000)
        finally:
            for client in clients.values():
                client.close()
            for process in processes.values():
                process.send_signal(signal.SIGTERM)
            for process in processes.values():
                process.wait(timeout=60)
    result: dict[str, Any] = {"rounds": rounds, "requests": requests, "variants": variants, "kinds": {}}
    for kind, by_variant in samples.items():
        medians = {name: {k: round(statistics.median(v), 4) for k, v in figures.items()}
                   for name, figures in by_variant.items()}
        entry: dict[str, Any] = {"medians": medians, "samples": by_variant}
        if len(names) == 2:
            first, last = (by_variant[name]["loop_ms"] for name in names)
            differences = [b - a for a, b in zip(first, last, strict=True)]
            entry["loop_ms_paired_difference"] = round(statistics.median(differences), 4)
        result["kinds"][kind] = entry
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loop_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", default="http://127.0.0.1:9200")
    parser.add_argument("--variant", action="append", required=True, help="NAME or NAME=VAR=VALUE,...")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=400, help="warm searches per round, kind and variant")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-loop-cpu.json)")
    args = parser.parse_args(argv)
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-loop-cpu.json"
    command = "python -m bench.loop_cpu " + shlex.join(sys.argv[1:] if argv is None else argv)
    variants = dict(map(parse_variant, args.variant))
    result = environment.recorded(
        command, out, lambda: {"loop_cpu": run(args.engine_url, variants, args.rounds, args.requests)}
    )
    print("| kind | variant | loop thread CPU ms/request | process CPU ms/request | p50 ms |")
    print("| --- | --- | --- | --- | --- |")
    for kind, entry in result["loop_cpu"]["kinds"].items():
        for name, medians in entry["medians"].items():
            print(f"| {kind} | {name} | {medians['loop_ms']} | {medians['process_ms']}"
                  f" | {medians['p50_ms']} |")
    for kind, entry in result["loop_cpu"]["kinds"].items():
        if "loop_ms_paired_difference" in entry:
            print(f"\n{kind}: loop thread, median of the per-round differences (last - first variant):"
                  f" {entry['loop_ms_paired_difference']} ms/request")
    loads = f"{result['load_average_at_start']} -> {result['load_average_at_end']}"
    print(f"\nload average {loads}; written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
