"""The HTTP layer and the audit writer over HTTP: ``GET /healthz`` and ``POST /v1/search``
(plan cache warm) against several ``govsearch serve`` variants running side by side.

``python -m bench.http_layer [--engine-url URL] --variant NAME[=VAR=VALUE,...] ...`` loads
the demo catalog and policies, starts one ``govsearch serve --workers N`` per variant (each
with its own audit log in a temporary directory and the variant's extra environment, e.g.
``GOVSEARCH_AUDIT_COMMIT=queued``, or ``PYTHONPATH=/path/to/an/older/checkout`` to measure
the code before a change), and measures, interleaved (the variant order alternates every
round):

- single client: ``GET /healthz`` and ``POST /v1/search`` over the demo intents, one httpx
  client per variant (the search's p50 per intent too);
- throughput of ``POST /v1/search`` at concurrency 4 and 16 (``--concurrency 1,4,16`` for
  other levels; as many threads, each with its own connection, for ``S`` seconds per
  variant and level), in ``--slices K`` slices of ``S / K`` seconds: per slice every variant
  runs once, one after another, the order alternating from slice to slice (and from level
  to level), so a machine whose load drifts weighs on every variant alike. Reported per
  variant and level: the mean rate and the CPU per request of the variant's server (its
  process tree, user + system, from ``/proc``) over its slices, the **paired ratio** to the
  first variant (the median over the slices of the two rates measured side by side, with
  its lowest and highest: a spread that straddles 1 is no difference), and at
  ``--workers 1`` the decision log's group commit over the level (batches, records per
  batch, write + sync time per batch, from the server's ``govsearch_audit_batch_*``
  metrics; none from a server without them).

The result goes to ``bench/results/<UTC date>-http-layer.json`` with the command, the
machine and the load average; on a shared machine, read the ratios between variants.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench import environment
from bench.governed import INTENTS
from bench.http import _combined, _metered, slice_orders
from bench.stats import paired_ratios, paired_text, summary
from control_plane.bootstrap import prepare
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine
from control_plane.times import system_clock

RESULTS = Path(__file__).resolve().parent / "results"
CONCURRENCY = (4, 16)


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """``name`` or ``name=VAR=VALUE,VAR=VALUE``."""
    name, _, rest = text.partition("=")
    extra = dict(item.split("=", 1) for item in rest.split(",") if item)
    return name, extra


def _serve(
    url: str, workers: int, directory: Path, extra: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    return environment.serve(url, workers, directory, extra)


def _single_client(bases: dict[str, str], intents: list[str], rounds: int) -> dict[str, Any]:
    clients = {name: httpx.Client(base_url=base, timeout=30) for name, base in bases.items()}
    health: dict[str, list[int]] = {name: [] for name in bases}
    search: dict[str, list[int]] = {name: [] for name in bases}
    by_intent: dict[str, dict[str, list[int]]] = {name: {intent: [] for intent in intents} for name in bases}
    names = list(bases)
    try:
        for number in range(3 + rounds):
            order = names if number % 2 == 0 else names[::-1]
            for intent in intents:
                for name in order:
                    client = clients[name]
                    started = time.perf_counter_ns()
                    client.get("/healthz").raise_for_status()
                    middle = time.perf_counter_ns()
                    client.post("/v1/search", json={"intent": intent}).raise_for_status()
                    ended = time.perf_counter_ns()
                    if number >= 3:
                        health[name].append(middle - started)
                        search[name].append(ended - middle)
                        by_intent[name][intent].append(ended - middle)
    finally:
        for client in clients.values():
            client.close()
    return {
        name: {
            "healthz": summary(health[name]),
            "search_warm": summary(search[name]),
            "search_p50_ms_by_intent": {
                intent: summary(found)["p50_ms"] for intent, found in by_intent[name].items()
            },
        }
        for name in bases
    }


def run(engine: Engine, url: str, variants: dict[str, dict[str, str]], workers: int, seconds: float,
        rounds: int, concurrency: tuple[int, ...] = CONCURRENCY, slices: int = 1) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    now = system_clock()
    prepare(engine, settings, clock=lambda: now)
    intents = list(INTENTS)

    def governed(client: httpx.Client, intent: str) -> None:
        client.post("/v1/search", json={"intent": intent}).raise_for_status()

    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="govsearch-bench-http-layer-") as directory:
        try:
            bases: dict[str, str] = {}
            pids: dict[str, int] = {}
            for name, extra in variants.items():
                process, served = _serve(url, workers, Path(directory) / name, extra)
                processes.append(process)
                bases[name] = served
                pids[name] = process.pid
            single = _single_client(bases, intents, rounds)
            throughput: dict[str, dict[str, float]] = {}
            service_cpu: dict[str, dict[str, float]] = {}
            batches: dict[str, dict[str, dict[str, float]]] = {}
            paired: dict[str, dict[str, dict[str, float]]] = {}
            for number, threads in enumerate(concurrency):
                level = str(threads)
                before = {name: _batches(base) for name, base in bases.items()} if workers == 1 else {}
                measured: dict[str, list[dict[str, float]]] = {name: [] for name in bases}
                for order in slice_orders(list(bases), number, slices):
                    for name in order:
                        measured[name].append(_metered(
                            governed, bases[name], intents, threads, seconds / slices,
                            {"service": partial(environment.tree_cpu_s, pids[name])},
                        ))
                combined = {name: _combined(phases) for name, phases in measured.items()}
                throughput[level] = {name: figures["req_s"] for name, figures in combined.items()}
                service_cpu[level] = {name: figures["service_cpu_ms"] for name, figures in combined.items()}
                if len(bases) > 1:
                    paired[level] = paired_ratios(
                        {name: [phase["req_s"] for phase in phases] for name, phases in measured.items()}
                    )
                for name, earlier in before.items():
                    if earlier is not None:
                        batches.setdefault(level, {})[name] = _batched(earlier, _batches(bases[name]))
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(timeout=60)
    return {"http_layer": {"workers": workers, "variants": variants, "rounds": rounds, "seconds": seconds,
                           "slices": slices, "single_client": single, "throughput_req_s": throughput,
                           "throughput_paired_ratio": paired,
                           "service_cpu_ms_per_request": service_cpu, "audit_batches": batches}}


Totals = tuple[float, float, float]
"""the decision log's batches, their records and their write + sync seconds, so far"""


def _batches(base: str) -> Totals | None:
    """The decision log's batches so far, from the server's ``/metrics`` (its one worker's)."""
    return batch_totals(httpx.get(base + "/metrics", timeout=30).raise_for_status().text)


def batch_totals(text: str) -> Totals | None:
    """The decision log's batches, records and batch seconds so far in a ``/metrics`` text;
    None for a text without ``govsearch_audit_batch_*`` (a server of an older checkout)."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("log") == "decisions" and sample.name in _BATCH_SAMPLES:
                found[sample.name] = sample.value
    if len(found) < len(_BATCH_SAMPLES):
        return None
    return tuple(found[name] for name in _BATCH_SAMPLES)  # type: ignore[return-value]


_BATCH_SAMPLES = ("govsearch_audit_batch_records_count", "govsearch_audit_batch_records_sum",
                  "govsearch_audit_batch_seconds_sum")


def _batched(before: Totals, after: Totals | None) -> dict[str, float]:
    """A phase's group commit: how many records shared a write and a sync, and its time."""
    assert after is not None
    batches, records, seconds = (later - earlier for later, earlier in zip(after, before, strict=True))
    return {"batches": batches, "records_per_batch": round(records / max(batches, 1), 2),
            "batch_ms": round(seconds * 1000 / max(batches, 1), 3)}


def report(result: dict[str, Any]) -> str:
    layer = result["http_layer"]
    lines = [
        f"Command: `{result['command']}` ({result['duration_s']} s); load average"
        f" {result['load_average_at_start']} at start, {result['load_average_at_end']} at end;"
        f" govsearch serve --workers {layer['workers']}",
        "",
        "| variant | healthz p50 ms | healthz p95 ms | search warm p50 ms | search warm p95 ms | "
        + " | ".join(f"req/s at {c}" for c in layer["throughput_req_s"]) + " |",
        "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in layer["throughput_req_s"]) + " |",
    ]
    for name, figures in layer["single_client"].items():
        rates = " | ".join(str(level[name]) for level in layer["throughput_req_s"].values())
        lines.append(
            f"| {name} | {figures['healthz']['p50_ms']} | {figures['healthz']['p95_ms']} |"
            f" {figures['search_warm']['p50_ms']} | {figures['search_warm']['p95_ms']} | {rates} |"
        )
    cpu = layer.get("service_cpu_ms_per_request")
    if cpu:  # results written before it was measured have none
        lines += ["", "| variant | " + " | ".join(f"service CPU ms per request at {c}" for c in cpu) + " |",
                  "| --- | " + " | ".join("---" for _ in cpu) + " |"]
        for name in layer["single_client"]:
            lines.append(f"| {name} | " + " | ".join(str(level[name]) for level in cpu.values()) + " |")
    paired = layer.get("throughput_paired_ratio")
    if paired and any(paired.values()):  # two variants or more, measured in slices
        first = next(iter(layer["single_client"]))
        lines += ["", f"Paired throughput ratio to {first}, median (lowest-highest) over"
                  f" {layer['slices']} slices per level:", "",
                  "| variant | " + " | ".join(f"at {c}" for c in paired) + " |",
                  "| --- | " + " | ".join("---" for _ in paired) + " |"]
        for name in list(layer["single_client"])[1:]:
            cells = (level.get(name) for level in paired.values())
            lines.append(f"| {name} | " + " | ".join(paired_text(c) for c in cells) + " |")
    batches = layer.get("audit_batches")
    if batches:  # measured at --workers 1, from a server with the batch metrics
        lines += ["", "| concurrency | variant | batches | records per batch | batch write + sync ms |",
                  "| --- | --- | --- | --- | --- |"]
        for level, variants in batches.items():
            for name, figures in variants.items():
                lines.append(f"| {level} | {name} | {figures['batches']:.0f} | {figures['records_per_batch']}"
                             f" | {figures['batch_ms']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http_layer", description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", help="engine to measure against (default: start a local one)")
    parser.add_argument("--heap", default="1g", help="heap of the local engine it starts (default 1g)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME[=VAR=VALUE,...]",
                        help="a govsearch serve to measure, with extra environment (repeat; default: one)")
    parser.add_argument("--workers", type=int, default=1, help="govsearch serve --workers (default 1)")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="each variant's throughput phase per level, all its slices (default 5)")
    parser.add_argument("--slices", type=int, default=4,
                        help="slices each throughput phase is cut in, the variants alternating (default 4)")
    parser.add_argument("--rounds", type=int, default=10, help="single-client rounds over the intents")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)), metavar="N,N,...",
                        help="client threads of the throughput phases (default 4,16)")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-http-layer.json)")
    args = parser.parse_args(argv)
    variants = dict(parse_variant(text) for text in args.variant or ["default"])
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-http-layer.json"
    command = "python -m bench.http_layer " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = environment.recorded_run(
        command, args.engine_url, args.heap, out,
        lambda engine, url: run(engine, url, variants, args.workers, args.seconds, args.rounds,
                                tuple(int(n) for n in args.concurrency.split(",")), max(args.slices, 1)),
    )
    print(report(result))
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
