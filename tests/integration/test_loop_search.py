"""Searches a cached plan serves run on the event loop (ADR 0030), on the real engine:

- the loop path is the one a repeated search takes (no call of the synchronous
  ``SearchService.search``), and it answers and records exactly what the thread path does,
  for an intent served at strict and for one that falls back (its replay included);
- an engine that cannot be reached from the loop fails the search closed: 503
  ``engine_unavailable``, no hit, and the request's one record says ``error``;
- a search the cache cannot serve alone (a user whose purchases are not cached yet) still
  goes through the thread path, and is cached for the next one; the plan cache counts its
  miss once;
- a search cancelled on the loop while its engine call waits still gets its one record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from control_plane.api import create_app
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import AuditSettings, Settings
from control_plane.engine import Engine
from control_plane.engine.aio import AsyncEngine
from control_plane.service import SearchRequest, SearchService
from tests.clocks import FIXED_CLOCK
from tests.drills.harness import free_port
from tests.e2e.conftest import ready, settings  # noqa: F401

INTENTS = ("chocolat sans arachide", "orange juice", "cheap chocolate", "vegan chocolate")

VOLATILE = {
    "request_id", "time", "latency_ms", "sequence", "prev_hash", "hash", "mac", "key_id", "writer",
}
"""what differs between two records of the same search: identity, instants, timings, chain"""


@pytest.fixture()
def served(
    engine: Engine, settings: Settings, ready: Ready,  # noqa: F811
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[TestClient, list[str]]]:
    """A fresh service (empty plan cache) behind the app, its own audit log, and the
    intents the synchronous search ran for (the thread path)."""
    audit = AuditSettings(path=str(tmp_path / "decisions.jsonl"), key_file=str(tmp_path / "audit.key"))
    # watched values never due during a test: whether a search is served on the loop must
    # not depend on how long the one before took
    search = settings.search.model_copy(update={"alias_watch_interval_s": 3600.0})
    own = settings.model_copy(update={"audit": audit, "search": search})
    service = SearchService(own, engine, profile_of(own))
    threaded: list[str] = []
    synchronous = service.search

    def spied(request: Any, now: Any) -> Any:
        threaded.append(request.intent)
        return synchronous(request, now)

    monkeypatch.setattr(service, "search", spied)
    with TestClient(create_app(service, clock=FIXED_CLOCK)) as client:
        yield client, threaded
    service.close()


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != "request_id"}


def _record(client: TestClient, request_id: str) -> dict[str, Any]:
    found = client.app.state.recorder.find(request_id)  # type: ignore[attr-defined]
    assert found is not None, request_id
    record = {key: value for key, value in found.items() if key not in VOLATILE}
    record["tiers"] = [{k: v for k, v in tier.items() if k != "took_ms"} for tier in record["tiers"] or ()]
    return record


def test_a_repeated_search_is_served_on_the_loop_with_the_thread_paths_answer_and_record(
    served: tuple[TestClient, list[str]],
) -> None:
    client, threaded = served
    loop_engine = client.app.state.loop_engine  # type: ignore[attr-defined]
    assert isinstance(loop_engine, AsyncEngine)
    for intent in INTENTS:
        first = client.post("/v1/search", json={"intent": intent})
        assert first.status_code == 200 and threaded[-1] == intent  # a miss: the thread path
        calls = len(threaded)
        on_loop = client.post("/v1/search", json={"intent": intent})
        assert on_loop.status_code == 200 and len(threaded) == calls, "a cached plan left the loop"
        client.app.state.loop_engine = None  # type: ignore[attr-defined]
        try:
            in_thread = client.post("/v1/search", json={"intent": intent})
        finally:
            client.app.state.loop_engine = loop_engine  # type: ignore[attr-defined]
        assert in_thread.status_code == 200 and len(threaded) == calls + 1
        assert _answer(on_loop.json()) == _answer(in_thread.json()), intent
        assert _answer(on_loop.json()) == _answer(first.json()), intent
        loop_record = _record(client, on_loop.json()["request_id"])
        assert loop_record == _record(client, in_thread.json()["request_id"]), intent
        assert loop_record["status"] == "ok" and loop_record["hit_ids"], loop_record
    again = client.post("/v1/search", json={"intent": "orange juice"}).json()
    fell_back = _record(client, again["request_id"])
    assert len(fell_back["tiers"]) > 1 and any(tier.get("replayed") for tier in fell_back["tiers"]), fell_back


def test_a_user_without_cached_purchases_goes_through_the_thread_then_the_loop(
    served: tuple[TestClient, list[str]],
) -> None:
    client, threaded = served
    assert client.post("/v1/search", json={"intent": "cheap chocolate"}).status_code == 200
    calls = len(threaded)
    body = {"intent": "cheap chocolate", "user_id": "u-loop-1"}
    assert client.post("/v1/search", json=body).status_code == 200
    assert len(threaded) == calls + 1  # the purchases lookup is a call of its own
    assert client.post("/v1/search", json=body).status_code == 200
    assert len(threaded) == calls + 1  # now cached: on the loop


def test_an_engine_the_loop_cannot_reach_fails_the_search_closed_with_its_record(
    served: tuple[TestClient, list[str]],
) -> None:
    client, threaded = served
    assert client.post("/v1/search", json={"intent": "cheap chocolate"}).status_code == 200
    calls = len(threaded)
    client.app.state.loop_engine = AsyncEngine(f"http://127.0.0.1:{free_port()}", 2.0)  # type: ignore[attr-defined]
    response = client.post("/v1/search", json={"intent": "cheap chocolate"})
    assert response.status_code == 503 and len(threaded) == calls
    error = response.json()["error"]
    assert error["code"] == "engine_unavailable" and "hits" not in response.json()
    record = _record(client, error["request_id"])
    assert record["status"] == "error" and record["error"]["code"] == "engine_unavailable", record
    assert not record.get("hit_ids"), record


def test_a_search_that_leaves_the_loop_counts_one_plan_cache_miss(
    served: tuple[TestClient, list[str]],
) -> None:
    client, _ = served
    assert client.post("/v1/search", json={"intent": "cheap chocolate"}).status_code == 200  # watches read
    cache = client.app.state.service.cache  # type: ignore[attr-defined]
    hits, misses = cache.hits, cache.misses
    assert client.post("/v1/search", json={"intent": "vegan chocolate"}).status_code == 200
    assert (cache.hits, cache.misses) == (hits, misses + 1)  # looked at on the loop, counted once
    assert client.post("/v1/search", json={"intent": "vegan chocolate"}).status_code == 200
    assert (cache.hits, cache.misses) == (hits + 1, misses + 1)


def test_a_search_cancelled_on_the_loop_still_gets_its_one_record(
    served: tuple[TestClient, list[str]],
) -> None:
    """Cancelled while its ``_msearch`` waits on an engine that does not answer (a shutdown
    cancelling requests, a client gone): never answered, recorded as ``request_cancelled``."""
    client, _ = served
    assert client.post("/v1/search", json={"intent": "cheap chocolate"}).status_code == 200
    service = client.app.state.service  # type: ignore[attr-defined]
    recorder = client.app.state.recorder  # type: ignore[attr-defined]

    async def scenario() -> None:
        arrived = asyncio.Event()

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1 << 16)
            arrived.set()
            try:
                await asyncio.sleep(30)
            finally:
                writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        engine = AsyncEngine(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", 30.0)
        request = SearchRequest(intent="cheap chocolate")
        search = asyncio.create_task(recorder.search_cached(service, request, "cancelled-1", engine=engine))
        await asyncio.wait_for(arrived.wait(), 10)
        search.cancel()
        with pytest.raises(asyncio.CancelledError):
            await search
        engine.close()
        server.close()

    asyncio.run(scenario())
    deadline = time.monotonic() + 10
    while (found := recorder.find("cancelled-1")) is None and time.monotonic() < deadline:
        time.sleep(0.05)  # queued without waiting: the writer takes it in a moment
    assert found is not None and found["status"] == "error", found
    assert found["error"]["code"] == "request_cancelled" and not found.get("hit_ids"), found
