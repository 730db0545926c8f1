"""The warm path's Python, piece by piece, before and after ADR 0033, in one process.

``python -m bench.warm_path [--rounds 5] [--calls 3000] [--out FILE]``: each pair runs
interleaved (``rounds`` times each, the order alternating), ``calls`` calls per round,
and the median over the rounds of the **thread CPU** per call (``time.thread_time``: what
a call costs without waiting for a core, so a shared machine's load moves it little) is
kept, in microseconds. No engine:

- ``route``: a ``POST`` of a well-formed search body driven through a FastAPI app over
  ASGI (no server, no socket), the endpoint answering a constant ``Response``, with the
  search guard as its dependency: the route of ``/v1/search`` (``SearchRoute``) against
  FastAPI's own ``APIRoute``;
- ``normalise``: ``normalise_intent`` of the demo intents (printable ASCII) against the
  steps one by one (``intent_text._normalised``);
- ``answer``: ``search_response`` of a ten-hit answer against building each ``HitOut``
  and then the ``SearchResponse`` (the code before);
- ``lane``: the same ``POST`` through an app built as ``create_app`` builds its stack (the
  app's exception handlers, ``RecordRefused``, ``BodyLimit``, ``RequestDeadline``, the route
  of ``/v1/search``) with the search fast lane (ADR 0036) against the same app without it;
- ``hit``: ``executor._hit`` of ten hits with four clause names each, against parsing
  every name on every call (the code before).

Writes ``bench/results/<UTC date>-warm-path.json`` with the command, the machine and the
load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fastapi.routing
from fastapi import Depends, FastAPI, Request, Response

from bench import environment
from bench.governed import INTENTS
from control_plane.api.answer import search_response
from control_plane.api.auth import search_guard
from control_plane.api.models import HitOut, SearchBody, SearchResponse
from control_plane.api.search_route import SearchRoute
from control_plane.executor import Hit, _hit, _policies_of
from control_plane.intent_text import _normalised, normalise_intent
from control_plane.renderer import parse_clause_name
from control_plane.service import SearchRequest
from control_plane.times import system_clock

RESULTS = Path(__file__).resolve().parent / "results"
Pair = tuple[Callable[[], object], Callable[[], object], Callable[[], object]]
"""the code after, the code before, and what to close once measured"""


def _route_calls() -> Pair:
    async def endpoint(body: SearchBody, request: Request) -> Response:
        return Response(b'{"ok":true}', media_type="application/json")

    app = FastAPI()
    for path, route_class in (("/shortcut", SearchRoute), ("/general", fastapi.routing.APIRoute)):
        app.router.add_api_route(path, endpoint, methods=["POST"], route_class_override=route_class,
                                 dependencies=[Depends(search_guard(False))])
    body = json.dumps({"intent": "chocolat sans arachide", "size": 5}).encode()
    loop = asyncio.new_event_loop()

    return (lambda: loop.run_until_complete(_post(app, "/shortcut", body)),
            lambda: loop.run_until_complete(_post(app, "/general", body)), loop.close)


async def _post(app: Any, path: str, body: bytes) -> None:
    """``POST path`` with the JSON ``body`` straight into the ASGI ``app``; a 200 expected."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "state": {},
        "headers": [(b"host", b"bench"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[Any] = []

    async def receive() -> Any:
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope, receive, send)
    if sent[0]["status"] != 200:
        raise SystemExit(f"{path}: {sent}")


def _lane_calls() -> Pair:
    from control_plane.api import errors
    from control_plane.api.fast_lane import LanedApp
    from control_plane.api.limits import BodyLimit, RequestDeadline
    from control_plane.audit.router import RecordRefused

    async def endpoint(body: SearchBody, request: Request) -> Response:
        errors.request_id(request)
        return Response(b'{"ok":true}', media_type="application/json")

    async def refused(request: Request, status: int) -> None:
        raise SystemExit(f"refused: {status}")

    apps = []
    for lane in (True, False):
        app = LanedApp()
        errors.install(app)
        app.router.add_api_route("/v1/search", endpoint, methods=["POST"], route_class_override=SearchRoute,
                                 dependencies=[Depends(search_guard(False))])
        app.add_middleware(RequestDeadline, seconds=30.0)
        app.add_middleware(BodyLimit, limit=16_384)
        app.add_middleware(RecordRefused, recorder=None)  # type: ignore[arg-type]  # no refusal here
        if lane:
            app.enable_lane(limit=16_384, deadline_s=30.0, refused=refused)
        apps.append(app)
    body = json.dumps({"intent": "chocolat sans arachide", "size": 5}).encode()
    loop = asyncio.new_event_loop()

    laned, stacked = apps
    return (lambda: loop.run_until_complete(_post(laned, "/v1/search", body)),
            lambda: loop.run_until_complete(_post(stacked, "/v1/search", body)), loop.close)


def _answer_calls() -> Pair:
    profile = SimpleNamespace(title="title", brand="brand", price="price", display=("price", "category"))
    hits = tuple(
        SimpleNamespace(id=f"p{n}", score=1.0 + n, sponsored_by=(), policies=("in-stock-only", "vegan"),
                        source={"title": f"Product {n}", "brand": "Acme", "price": 3 + n, "category": "food"})
        for n in range(10)
    )
    execution = SimpleNamespace(hits=hits, status="ok", tier="strict", total=42, reason=None, dsl={},
                                facets={"brand": [{"key": "Acme", "count": 10}]})
    outcome = SimpleNamespace(execution=execution, compiled=SimpleNamespace(policy_set_version="v" * 64),
                              now=datetime(2026, 12, 1, tzinfo=UTC))
    request = SearchRequest(intent="chocolate")

    def hit_by_hit() -> None:
        SearchResponse(
            request_id="r" * 32, policy_set_version="v" * 64, now=outcome.now, status="ok", tier="strict",
            total=42, facets=dict(execution.facets), reason=None, explanation=None,
            hits=[HitOut(id=h.id, title=h.source.get("title"), brand=h.source.get("brand"),
                         price=h.source.get("price"), score=h.score, sponsored=bool(h.sponsored_by),
                         policies=list(h.policies),
                         display={k: h.source[k] for k in profile.display if k in h.source})
                  for h in hits],
        ).model_dump_json()

    answered: Any = outcome  # the fields search_response reads, as an Outcome has them

    return (lambda: search_response("r" * 32, request, answered, profile).model_dump_json(),
            hit_by_hit, lambda: None)


def _hit_calls() -> Pair:
    raws = [{"_id": f"p{n}", "_score": 1.0, "_source": {},
             "matched_queries": ["guard:in-stock-only", "guard:visible-only", f"boost:b{n % 3}",
                                 "filter:f#2"]}
            for n in range(10)]

    def parsed_every_time(raw: dict[str, Any]) -> Hit:
        policies: set[str] = set()
        sponsored: set[str] = set()
        for name in raw["matched_queries"]:
            clause = parse_clause_name(name)
            if clause is not None:
                (sponsored if clause.kind == "sponsored" else policies).add(clause.policy)
        return Hit(id=str(raw["_id"]), score=raw.get("_score"), source=raw.get("_source") or {},
                   policies=tuple(sorted(policies | sponsored)), sponsored_by=tuple(sorted(sponsored)))

    _policies_of.cache_clear()
    return (lambda: [_hit(raw) for raw in raws],
            lambda: [parsed_every_time(raw) for raw in raws], lambda: None)


def _normalise_calls() -> Pair:
    intents = list(INTENTS)
    return (lambda: [normalise_intent(i) for i in intents],
            lambda: [_normalised(i) for i in intents], lambda: None)


PAIRS: dict[str, Callable[[], Pair]] = {
    "route": _route_calls, "lane": _lane_calls, "normalise": _normalise_calls, "answer": _answer_calls,
    "hit": _hit_calls,
}


def _cpu_us(call: Callable[[], object], calls: int) -> float:
    started = time.thread_time()
    for _ in range(calls):
        call()
    return (time.thread_time() - started) / calls * 1e6


def measure(rounds: int, calls: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, make in PAIRS.items():
        after, before, close = make()
        samples: dict[str, list[float]] = {"after": [], "before": []}
        try:
            for call in (after, before):
                _cpu_us(call, max(1, calls // 10))  # warm up
            for number in range(rounds):
                order = (("after", after), ("before", before))
                for variant, call in order if number % 2 == 0 else order[::-1]:
                    samples[variant].append(_cpu_us(call, calls))
        finally:
            close()
        medians = {variant: round(statistics.median(values), 2) for variant, values in samples.items()}
        figures[name] = {**{f"{v}_cpu_us": m for v, m in medians.items()},
                         "ratio": round(medians["after"] / medians["before"], 3)}
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.warm_path", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000, help="calls per round and variant")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-warm-path.json)")
    args = parser.parse_args(argv)
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-warm-path.json"
    command = "python -m bench.warm_path " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = environment.recorded(command, out, lambda: {"warm_path": measure(args.rounds, args.calls)})
    print("| piece | after us CPU | before us CPU | ratio |\n| --- | --- | --- | --- |")
    for name, figures in result["warm_path"].items():
        print(f"| {name} | {figures['after_cpu_us']} | {figures['before_cpu_us']} | {figures['ratio']} |")
    loads = f"{result['load_average_at_start']} -> {result['load_average_at_end']}"
    print(f"\nload average {loads}; written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
