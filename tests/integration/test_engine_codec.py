"""The engine client's own exchange and codec (ADR 0026) against the real engine: what the
engine stores comes back exactly as ``json`` decodes it (non-ASCII text and its highlight,
integers outside 64 bits, floats at their limits), and every failure still fails closed: a
failed ``_msearch`` item, a failed shard, a body the engine refuses, a read timeout and an
expired deadline; a timed-out exchange never leaves its late answer for the next request."""

from __future__ import annotations

import json
import math

import pytest

from control_plane import deadline
from control_plane.config import EngineSettings
from control_plane.engine import (
    Engine,
    EngineError,
    EnginePartialResults,
    EngineTimeout,
    EngineUnavailable,
    connect,
)

STORED = {
    "title": "Chocolat noir à 70 % — 東京 🍫 café",
    "big": 123456789012345678901234567890,
    "below_int64": -9223372036854775809,
    "u64_max": 18446744073709551615,
    "int64_max": 9223372036854775807,
    "digits_in_text": "EAN 12345678901234567890123",
    "floats": [0.1, 1e-07, 1.7976931348623157e308, -0.0, 123.456, 5e-324, 2.5e19],
}
SLOW_HEALTH = {"wait_for_nodes": "99", "timeout": "10s"}
"""a health request the engine holds for 10 s (the cluster never has 99 nodes)"""


def _typed(value: object) -> object:
    """``value`` with every number's type kept (1 and 1.0 differ, -0.0 and 0.0 differ)."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    if isinstance(value, float):
        return ("float", math.copysign(1.0, value), repr(value))
    return (type(value).__name__, value)


@pytest.fixture()
def stored(engine: Engine, index_prefix: str) -> str:
    index = f"{index_prefix}-codec"
    engine.create_index(
        index,
        {
            "settings": {"number_of_shards": 1},
            "mappings": {"dynamic": False, "properties": {"title": {"type": "text"}}},
        },
    )
    engine.index_document(index, "1", STORED, refresh=True)
    return index


def test_stored_values_come_back_exactly(engine: Engine, stored: str) -> None:
    body = {"query": {"match": {"title": "chocolat"}}, "highlight": {"fields": {"title": {}}}}
    searched = engine.search(stored, body)["hits"]["hits"][0]
    (multi,) = engine.msearch([(stored, json.dumps(body, ensure_ascii=False))])
    got = engine.get_document(stored, "1")
    assert got is not None
    for source in (searched["_source"], multi["hits"]["hits"][0]["_source"], got["_source"]):
        assert _typed(source) == _typed(STORED)
    assert searched["highlight"]["title"] == ["<em>Chocolat</em> noir à 70 % — 東京 🍫 café"]


def test_a_document_read_for_some_fields_brings_only_those(engine: Engine, stored: str) -> None:
    """What ``write_index`` reads of a version's meta document: not the 38 MB set."""
    got = engine.get_document(stored, "1", source=("title",))
    assert got is not None and got["_source"] == {"title": STORED["title"]}
    assert engine.get_document(stored, "absent", source=("title",)) is None


def test_a_failed_msearch_item_fails_closed(engine: Engine, stored: str) -> None:
    with pytest.raises(EngineError) as failed:
        engine.msearch([(stored, {"size": 0}), (f"{stored}-missing", {"size": 0})])
    assert failed.value.status == 404
    assert "index_not_found" in str(failed.value)


def test_a_failed_shard_fails_closed(engine: Engine, index_prefix: str) -> None:
    """One index can aggregate ``kind`` (keyword), the other cannot (text): the same search
    answers 200 with one of two shards failed."""
    good, bad = f"{index_prefix}-keyword", f"{index_prefix}-text"
    for index, kind in ((good, "keyword"), (bad, "text")):
        engine.create_index(
            index,
            {"settings": {"number_of_shards": 1}, "mappings": {"properties": {"kind": {"type": kind}}}},
        )
        engine.index_document(index, "1", {"kind": "tea"}, refresh=True)
    body = {"size": 1, "aggs": {"kinds": {"terms": {"field": "kind"}}}}
    assert engine.search(good, body)["aggregations"]["kinds"]["buckets"][0]["key"] == "tea"
    with pytest.raises(EnginePartialResults) as partial:
        engine.search(f"{good},{bad}", body)
    assert partial.value.status == 503 and bad in json.dumps(partial.value.info)
    with pytest.raises(EnginePartialResults):
        engine.msearch([(good, body), (f"{good},{bad}", json.dumps(body))])


def test_a_nan_is_refused_by_the_engine_not_sent_as_null(engine: Engine, stored: str) -> None:
    """A ``null`` bound is no bound: a NaN must fail the request, not widen it."""
    with pytest.raises(EngineError) as refused:
        engine.search(stored, {"query": {"range": {"big": {"lte": math.nan}}}})
    assert refused.value.status == 400


def test_a_read_timeout_maps_to_engine_timeout_and_the_pool_recovers(engine_url: str) -> None:
    """One pooled connection: the request after the timed-out one must get its own answer
    (health), never the late answer of the first."""
    client = connect(EngineSettings(url=engine_url, timeout_s=30, connections=1))
    try:
        with pytest.raises(EngineTimeout) as timed_out:
            client.request("GET", "/_cluster/health", params=SLOW_HEALTH, timeout_s=0.3)
        assert not isinstance(timed_out.value, deadline.DeadlineExceeded)
        assert "number_of_nodes" in client.health()
        assert client.info()["version"]["number"]
    finally:
        client.close()


def test_an_expired_deadline_maps_to_deadline_exceeded(engine_url: str) -> None:
    client = connect(EngineSettings(url=engine_url, timeout_s=30))
    try:
        with deadline.bounded(0.3), pytest.raises(deadline.DeadlineExceeded):
            client.request("GET", "/_cluster/health", params=SLOW_HEALTH)
        with deadline.bounded(0.0), pytest.raises(deadline.DeadlineExceeded):
            client.health()  # nothing left: not even sent
        assert client.health()["status"] in ("green", "yellow")
    finally:
        client.close()


def test_a_closed_client_opens_its_pool_again(engine_url: str) -> None:
    """As the client library does: ``close`` drops the connections, a later call reconnects."""
    client = connect(EngineSettings(url=engine_url, timeout_s=5))
    assert client.health()["status"] in ("green", "yellow")
    client.close()
    assert client.health()["status"] in ("green", "yellow")
    client.close()


def test_an_unreachable_engine_is_unavailable(engine: Engine) -> None:
    unreachable = connect(EngineSettings(url="http://127.0.0.1:9", kind=engine.kind, timeout_s=1))
    with pytest.raises(EngineUnavailable) as refused:
        unreachable.msearch([("catalog", {"size": 0})])
    assert not isinstance(refused.value, EngineTimeout)
