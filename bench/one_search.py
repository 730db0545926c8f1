"""One search sent as a ``_search`` against the same search as an ``_msearch`` of one: what
the engine's multi-search layer costs (ADR 0047).

``python -m bench.one_search [--engine-url URL] [--gaps 0,2] [--clients 1,4,16] [--seconds 6]
[--rounds 4] [--warmup 40] [--out FILE]`` prepares the demo, takes the DSL a warm governed search sends
for each of ``bench.governed.INTENTS`` (as :mod:`bench.engine_pacing` does) and sends it from
one kept-alive connection (``http.client``) in the two forms, alternating per round (the
order reversed every other round): ``POST /<alias>/_search`` with the body, and ``POST
/_msearch`` with its header line and the body. First back to back for ``--warmup`` seconds (the
engine's JIT settles), then per gap (ms of sleep after each answer: 0 is the engine kept
busy, 2 about what a governed search at concurrency 1 leaves it idle): requests per second,
wall p50 / p90, and the engine's CPU per request (its process, user + system). Then, back to
back, per number of clients (each a thread with its own connection, for ``S`` seconds per
form, the forms alternating per round): requests per second and the engine's CPU per request.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.engine_pacing import _bodies, _paced
from bench.environment import engine_cpu_s, recorded_run
from control_plane.engine import Engine

FORMS = ("search", "msearch")


def run(
    engine: Engine, url: str, gaps_ms: list[float], clients: list[int], seconds: float, rounds: int,
    warmup_s: float,
) -> dict[str, Any]:
    alias, bodies = _bodies(engine, url)
    header = (json.dumps({"index": alias}) + "\n").encode()
    forms = {
        "search": (f"/{alias}/_search", bodies, "application/json"),
        "msearch": ("/_msearch", [header + body + b"\n" for body in bodies], "application/x-ndjson"),
    }
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)

    def cpu() -> float:
        return engine_cpu_s(engine)

    _paced(connection, forms["search"][0], bodies, 0, warmup_s, cpu)  # the engine's JIT settles first

    def paced(gap: float, form: str) -> dict[str, float]:
        path, sent, content_type = forms[form]
        return _paced(connection, path, sent, gap / 1000, seconds, cpu, content_type)

    def together(count: int, form: str) -> dict[str, float]:
        path, sent, content_type = forms[form]
        return _clients(url, path, sent, content_type, count, seconds, cpu)

    samples = _alternating(gaps_ms, rounds, paced)
    connection.close()
    several = _alternating(clients, rounds, together)

    def medians(runs: list[dict[str, float]]) -> dict[str, float]:
        return {key: round(statistics.median(s[key] for s in runs), 3) for key in runs[0]}

    return {"one_search": {
        "intents": len(bodies), "seconds": seconds, "rounds": rounds, "warmup_s": warmup_s,
        "rows": [{"gap_ms": gap, "form": form} | medians(runs) for (gap, form), runs in samples.items()],
        "clients": [
            {"clients": count, "form": form} | medians(runs) for (count, form), runs in several.items()
        ],
    }}


def _alternating(
    levels: Sequence[Any], rounds: int, measure: Callable[[Any, str], dict[str, float]]
) -> dict[tuple[Any, str], list[dict[str, float]]]:
    """``measure(level, form)`` for each level, ``rounds`` times, both forms per round, their
    order reversed every other round."""
    samples: dict[tuple[Any, str], list[dict[str, float]]] = {}
    for level in levels:
        for number in range(rounds):
            for form in FORMS if number % 2 == 0 else FORMS[::-1]:
                samples.setdefault((level, form), []).append(measure(level, form))
    return samples


def _clients(
    url: str, path: str, bodies: list[bytes], content_type: str, count: int, seconds: float, cpu: Any
) -> dict[str, float]:
    """``count`` threads, each with its own connection, sending ``bodies`` back to back for
    ``seconds``: requests per second and the engine's CPU per request."""
    parts = urlsplit(url)
    sent = [0] * count
    stop = time.perf_counter() + seconds

    def client(number: int) -> None:
        connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)
        done = 0
        while time.perf_counter() < stop:
            body = bodies[(number + done) % len(bodies)]
            connection.request("POST", path, body, {"Content-Type": content_type})
            answer = connection.getresponse()
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"the engine answered {answer.status}")
            done += 1
        connection.close()
        sent[number] = done

    threads = [threading.Thread(target=client, args=(n,)) for n in range(count)]
    started, cpu_before = time.perf_counter(), cpu()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed, used, total = time.perf_counter() - started, cpu() - cpu_before, sum(sent)
    return {"req_s": round(total / elapsed, 1), "engine_cpu_ms": round(used * 1000 / max(total, 1), 3)}


def sheet(result: dict[str, Any]) -> str:
    lines = ["| gap ms | form | req/s | p50 ms | p90 ms | engine CPU ms per request |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in result["one_search"]["rows"]:
        lines.append(f"| {row['gap_ms']} | {row['form']} | {row['req_s']} | {row['p50_ms']} |"
                     f" {row['p90_ms']} | {row['engine_cpu_ms']} |")
    lines += ["", "| clients | form | req/s | engine CPU ms per request |", "| --- | --- | --- | --- |"]
    for row in result["one_search"]["clients"]:
        lines.append(f"| {row['clients']} | {row['form']} | {row['req_s']} | {row['engine_cpu_ms']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.one_search", description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", help="an engine to use (default: a local one of our own)")
    parser.add_argument("--gaps", default="0,2", help="pauses after each answer, ms, comma-separated")
    parser.add_argument("--clients", default="1,4,16",
                        help="numbers of clients back to back, comma-separated")
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds per gap, form and round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=float, default=40.0, help="seconds back to back before measuring")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--out", type=Path, default=Path("bench/results/one-search.json"))
    args = parser.parse_args(argv)
    gaps = [float(g) for g in args.gaps.split(",")]
    clients = [int(c) for c in args.clients.split(",")]
    result = recorded_run(
        " ".join(["python -m bench.one_search", *(argv if argv is not None else sys.argv[1:])]),
        args.engine_url, args.heap, args.out,
        lambda engine, url: run(engine, url, gaps, clients, args.seconds, args.rounds, args.warmup),
    )
    print(sheet(result))
    print(f"load average {result['load_average_at_start']} -> {result['load_average_at_end']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
