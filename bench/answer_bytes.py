"""The search answer's bytes (ADR 0041): ``search_answer`` (written by ``orjson``, no
pydantic) against ``search_response(...).model_dump_json()`` (the pydantic builder it
replaced on ``/v1/search``), on real outcomes.

``python -m bench.answer_bytes --engine-url URL [--rounds 7] [--calls 200] [--out FILE]``
loads the demo catalog and policies, searches each demo intent once through the service
(plain, explained, and for a persona with purchases), then builds the answers of those
outcomes with each builder in turn, ``calls`` times per round, the order alternating every
round; it keeps the median over the rounds of the **thread CPU** per answer
(``time.thread_time``), in microseconds, and checks that both builders gave the same bytes.
Writes ``bench/results/<UTC date>-answer-bytes.json`` with the command, the machine and the
load average.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import environment
from bench.governed import INTENTS, USER
from control_plane.api.answer import search_answer, search_response
from control_plane.bootstrap import prepare, profile_of
from control_plane.config import EngineSettings, Settings
from control_plane.engine import connect
from control_plane.service import SearchRequest, SearchService
from control_plane.times import system_clock

RESULTS = Path(__file__).resolve().parent / "results"
KINDS: dict[str, dict[str, Any]] = {
    "plain": {},
    "explained": {"explain": True},
    "personalised": {"user_id": USER},
}
"""the requests of each demo intent: plain, explained, with a persona's purchases"""


def builders(answered: list[tuple[SearchRequest, Any]], profile: Any) -> dict[str, Callable[[], list[bytes]]]:
    """Each builder over every outcome of ``answered`` (one call: every answer once)."""
    rid = "r" * 32

    def written() -> list[bytes]:
        return [search_answer(rid, request, outcome, profile) for request, outcome in answered]

    def validated() -> list[bytes]:
        return [search_response(rid, request, outcome, profile).model_dump_json().encode()
                for request, outcome in answered]

    if written() != validated():
        raise SystemExit("the two builders wrote different bytes")
    return {"search_answer": written, "search_response": validated}


def _cpu_us(call: Callable[[], object], calls: int, answers: int) -> float:
    started = time.thread_time()
    for _ in range(calls):
        call()
    return (time.thread_time() - started) / (calls * answers) * 1e6


def measure(
    answered: list[tuple[SearchRequest, Any]], profile: Any, rounds: int, calls: int
) -> dict[str, Any]:
    """The median thread CPU per answer of each builder over ``answered``, in microseconds."""
    variants = builders(answered, profile)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for number in range(rounds):
        order = list(variants) if number % 2 == 0 else list(variants)[::-1]
        for name in order:
            samples[name].append(_cpu_us(variants[name], calls, len(answered)))
    medians = {name: round(statistics.median(values), 2) for name, values in samples.items()}
    return {**{f"{name}_cpu_us": value for name, value in medians.items()},
            "ratio": round(medians["search_answer"] / medians["search_response"], 3),
            "answers": len(answered),
            "answer_bytes_median": int(statistics.median(len(b) for b in variants["search_answer"]()))}


def outcomes(url: str) -> tuple[dict[str, list[tuple[SearchRequest, Any]]], Any, SearchService]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    engine = connect(settings.engine)
    now = system_clock()
    prepare(engine, settings, clock=lambda: now)
    service = SearchService(settings, engine, profile_of(settings))
    answered: dict[str, list[tuple[SearchRequest, Any]]] = {}
    for kind, fields in KINDS.items():
        requests = [SearchRequest(intent=intent, **fields) for intent in INTENTS]
        answered[kind] = [(request, service.search(request, now)) for request in requests]
    return answered, service.profile, service


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.answer_bytes", description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", default="http://127.0.0.1:9200")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200,
                        help="calls per round and builder (each call: every answer once)")
    parser.add_argument("--out", type=Path,
                        help="result file (default bench/results/<date>-answer-bytes.json)")
    args = parser.parse_args(argv)
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-answer-bytes.json"
    command = "python -m bench.answer_bytes " + shlex.join(sys.argv[1:] if argv is None else argv)

    def measured() -> dict[str, Any]:
        answered, profile, service = outcomes(args.engine_url)
        try:
            return {"answer_bytes": {kind: measure(found, profile, args.rounds, args.calls)
                                     for kind, found in answered.items()}}
        finally:
            service.close()

    result = environment.recorded(command, out, measured)
    print("| answers | search_answer us CPU | search_response us CPU | ratio | bytes (median) |")
    print("| --- | --- | --- | --- | --- |")
    for kind, figures in result["answer_bytes"].items():
        print(f"| {kind} | {figures['search_answer_cpu_us']} | {figures['search_response_cpu_us']}"
              f" | {figures['ratio']} | {figures['answer_bytes_median']} |")
    loads = f"{result['load_average_at_start']} -> {result['load_average_at_end']}"
    print(f"\nload average {loads}; written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
