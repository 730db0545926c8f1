"""The engine client's cost per request on the hot path, in process, against a real engine.

``python -m bench.engine_client [--engine-url URL] [--rounds N]`` loads the demo catalog and
policies, runs the governed intents of ``bench.governed`` twice through a
:class:`~control_plane.service.SearchService` with its plan cache on, and keeps what the
second (warm) run sent: each request's ``_msearch`` searches, the cached tier bodies as text.
Then each variant sends those same ``_msearch`` requests, interleaved (every round runs every
variant over every request, the first variant rotating), and the thread CPU time
(``thread_time_ns``: user + system of this thread, what the call cost without waiting for a
core) and wall time of each call are recorded:

- ``library``: the adapter as it was before ADR 0026: ``opensearch-py``'s
  ``transport.perform_request`` (its connection pool, urllib3 and ``http.client``, its
  logging) and its default serializer (the standard library's ``json``);
- ``library_orjson``: the same transport with a serializer decoding by ``orjson``
  (:func:`control_plane.engine.codec.decode`): the codec alone;
- ``wire``: the adapter now (:class:`~control_plane.engine.opensearch.OpenSearchEngine`):
  one :class:`~control_plane.engine.wire.Wire` exchange on the same urllib3 pool, decoded by
  the codec.

A second table times one large answer the same way: a ``_search`` of ``--large-size`` hits
(1,000 by default, the percolation page) with their ``_source`` and a highlight, the size of
what a percolation at 100,000 policies decodes. And the pieces alone, on the captured answers:
decoding by ``json`` and by the codec, and building the ``_msearch`` text. Results go to
``bench/results/<UTC date>-engine-client.json`` (or ``--out``) with the command, the machine
and the load average.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from bench import environment
from bench.governed import INTENTS
from control_plane.bootstrap import prepare, profile_of
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine, EngineError, codec
from control_plane.engine.opensearch import OpenSearchEngine
from control_plane.service import SearchRequest, SearchService
from control_plane.times import fixed_clock, system_clock

RESULTS = Path(__file__).resolve().parent / "results"
NOW = datetime(2026, 11, 15, 12, tzinfo=UTC)
VARIANTS = ("library", "library_orjson", "wire")

Searches = list[tuple[str, Mapping[str, Any] | str]]


class _Capturing:
    """Wraps an engine's ``msearch``: every call's searches are kept."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.original = engine.msearch
        self.calls: list[Searches] = []

    def __call__(
        self, searches: Sequence[tuple[str, Mapping[str, Any] | str]]
    ) -> list[dict[str, Any]]:
        self.calls.append(list(searches))
        return self.original(searches)


class LibraryEngine(OpenSearchEngine):
    """The adapter's ``request`` before ADR 0026: through ``opensearch-py``'s transport."""

    def __init__(self, url: str, timeout_s: float, *, serializer: Any = None) -> None:
        from opensearchpy import OpenSearch

        super().__init__(url, timeout_s)
        self._client.close()
        extra = {"serializer": serializer} if serializer is not None else {}
        self._client = OpenSearch(
            hosts=[url], timeout=timeout_s, max_retries=0, retry_on_timeout=False, pool_maxsize=10,
            **extra,
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        import opensearchpy

        from control_plane import deadline
        from control_plane.engine.base import note_request

        headers = {"content-type": "application/x-ndjson"} if isinstance(body, str) else None
        note_request()
        timeout = deadline.call_timeout(timeout_s or self.timeout_s)
        try:
            return self._client.transport.perform_request(
                method, path, params=dict(params or {}), body=body, timeout=timeout, headers=headers
            )
        except opensearchpy.TransportError as error:
            raise EngineError(f"OpenSearch {method} {path} failed: {error}") from error


def _orjson_serializer() -> Any:
    from opensearchpy.serializer import JSONSerializer

    class OrjsonDecoding(JSONSerializer):
        def loads(self, s: str) -> Any:
            return codec.decode(s.encode("utf-8", "surrogatepass"))

    return OrjsonDecoding()


def _timed(call: Callable[[], Any]) -> tuple[int, int]:
    cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
    call()
    return time.thread_time_ns() - cpu, time.perf_counter_ns() - wall


def _us(samples: Sequence[int]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_us": round(statistics.median(ordered) / 1e3, 1),
        "mean_us": round(statistics.fmean(ordered) / 1e3, 1),
        "p95_us": round(ordered[int(0.95 * (len(ordered) - 1))] / 1e3, 1),
    }


def _interleaved(
    calls: Mapping[str, Callable[[int], Any]], count: int, warmup: int, rounds: int
) -> dict[str, dict[str, dict[str, float]]]:
    names = list(calls)
    for _ in range(warmup):
        for name in names:
            for n in range(count):
                calls[name](n)
    cpu: dict[str, list[int]] = {name: [] for name in names}
    wall: dict[str, list[int]] = {name: [] for name in names}
    for round_number in range(rounds):
        order = names[round_number % len(names):] + names[: round_number % len(names)]
        for n in range(count):
            for name in order:
                spent, elapsed = _timed(partial(calls[name], n))
                cpu[name].append(spent)
                wall[name].append(elapsed)
    return {name: {"thread_cpu": _us(cpu[name]), "wall": _us(wall[name])} for name in names}


def run(engine: Engine, url: str, rounds: int, large_size: int) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    ready = prepare(engine, settings, clock=fixed_clock(NOW))
    service = SearchService(settings, engine, profile_of(settings))
    capture = _Capturing(engine)
    try:
        for intent in INTENTS:
            service.search(SearchRequest(intent=intent), NOW)
        engine.msearch = capture  # type: ignore[method-assign]
        for intent in INTENTS:
            service.search(SearchRequest(intent=intent), NOW)
    finally:
        engine.msearch = capture.original  # type: ignore[method-assign]
        service.close()
    alias = service.profile.alias
    requests = [call for call in capture.calls if all(index == alias for index, _ in call)]
    variants: dict[str, Engine] = {
        "library": LibraryEngine(url, 30),
        "library_orjson": LibraryEngine(url, 30, serializer=_orjson_serializer()),
        "wire": OpenSearchEngine(url, 30),
    }
    alias = service.profile.alias
    large_body = {
        "size": large_size,
        "query": {"match_all": {}},
        "highlight": {"fields": {"title": {}}},
        "track_total_hits": True,
    }
    try:
        msearch = _interleaved(
            {name: _msearch_call(e, requests) for name, e in variants.items()},
            len(requests), warmup=5, rounds=rounds,
        )
        probe = variants["wire"].search(alias, large_body)
        large = _interleaved(
            {name: _search_call(e, alias, large_body) for name, e in variants.items()},
            1, warmup=3, rounds=max(rounds // 2, 10),
        )
        answers = [
            json.dumps(variants["wire"].request("POST", "/_msearch", body=_ndjson(r)), ensure_ascii=False)
            .encode()
            for r in requests
        ]
    finally:
        for variant in variants.values():
            variant.close()
    large_bytes = json.dumps(probe, ensure_ascii=False).encode()
    pieces = _interleaved(
        {
            "decode_json": lambda n: json.loads(answers[n].decode()),
            "decode_codec": lambda n: codec.decode(answers[n]),
            "build_msearch_text": lambda n: _ndjson(requests[n]),
        },
        len(requests), warmup=5, rounds=rounds,
    )
    large_pieces = _interleaved(
        {
            "decode_json": lambda n: json.loads(large_bytes.decode()),
            "decode_codec": lambda n: codec.decode(large_bytes),
        },
        1, warmup=3, rounds=max(rounds, 20),
    )
    return {
        "catalog_documents": ready.catalog.documents,
        "now": NOW.isoformat(),
        "rounds": rounds,
        "requests": len(requests),
        "searches_per_request": [len(r) for r in requests],
        "answer_bytes_median": int(statistics.median(len(a) for a in answers)),
        "msearch": msearch,
        "large_answer": {"hits": len(probe["hits"]["hits"]), "bytes": len(large_bytes), **large},
        "pieces": pieces,
        "large_answer_pieces": large_pieces,
    }


def _msearch_call(engine: Engine, requests: list[Searches]) -> Callable[[int], Any]:
    return lambda n: engine.msearch(requests[n])


def _search_call(engine: Engine, index: str, body: Mapping[str, Any]) -> Callable[[int], Any]:
    return lambda n: engine.search(index, body)


def _ndjson(searches: Searches) -> str:
    """The ``_msearch`` text :meth:`Engine.msearch` builds."""
    return "".join(
        json.dumps({"index": index}) + "\n" + (body if isinstance(body, str) else json.dumps(body)) + "\n"
        for index, body in searches
    )


def _row(name: str, row: Mapping[str, Any]) -> str:
    cpu = row["thread_cpu"]
    return f"| {name} | {cpu['p50_us']} | {cpu['mean_us']} | {row['wall']['p50_us']} |"


def report(result: Mapping[str, Any]) -> str:
    load = ", ".join(f"{v:.2f}" for v in result["load_average_at_start"])
    large = result["large_answer"]
    lines = [
        f"load average at start {load}; {result['requests']} warm `_msearch` requests,"
        f" answers of {result['answer_bytes_median']} bytes (median), {result['rounds']} rounds",
        "",
        "| `_msearch` of a cached plan | thread CPU p50 us | mean us | wall p50 us |",
        "| --- | --- | --- | --- |",
        *(_row(name, row) for name, row in result["msearch"].items()),
        "",
        f"| `_search`, {large['hits']} hits highlighted ({large['bytes']} bytes)"
        " | thread CPU p50 us | mean us | wall p50 us |",
        "| --- | --- | --- | --- |",
        *(_row(name, large[name]) for name in VARIANTS),
        "",
        "| piece | thread CPU p50 us (warm answers) | (large answer) |",
        "| --- | --- | --- |",
    ]
    for name, row in result["pieces"].items():
        big = result["large_answer_pieces"].get(name)
        large_p50 = big["thread_cpu"]["p50_us"] if big else "-"
        lines.append(f"| {name} | {row['thread_cpu']['p50_us']} | {large_p50} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.engine_client", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--engine-url", help="engine to measure against (default: start a local one)")
    parser.add_argument("--heap", default="1g", help="heap of the local engine it starts (default 1g)")
    parser.add_argument("--rounds", type=int, default=60, help="rounds over the captured requests")
    parser.add_argument("--large-size", type=int, default=1000, help="hits of the large answer")
    parser.add_argument("--out", type=Path, help="default: bench/results/<date>-engine-client.json")
    args = parser.parse_args(argv)
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-engine-client.json"
    command = "python -m bench.engine_client " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = environment.recorded_run(
        command, args.engine_url, args.heap, out,
        lambda engine, url: run(engine, url, args.rounds, args.large_size),
    )
    print(report(result))
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
