"""The adapter against the real engine: indices, aliases, bulk, search, msearch,
percolation with highlight offsets, validation, and failures that fail closed."""

from __future__ import annotations

import pytest

from control_plane.config import EngineSettings
from control_plane.engine import Engine, EngineError, EngineUnavailable, connect
from control_plane.matcher import HIGHLIGHT, spans_from_highlight
from control_plane.policy_store import policies_mapping


def test_detects_the_engine_kind(engine: Engine) -> None:
    info = engine.info()
    expected = (
        "opensearch" if info["version"].get("distribution") == "opensearch" else "elasticsearch"
    )
    assert engine.kind == expected
    assert engine.health()["status"] in ("green", "yellow")


def test_index_alias_bulk_search_msearch(engine: Engine, index_prefix: str) -> None:
    first, second, alias = f"{index_prefix}-a", f"{index_prefix}-b", f"{index_prefix}-alias"
    body = {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"title": {"type": "text"}, "n": {"type": "integer"}}},
    }
    engine.create_index(first, body)
    engine.create_index(second, body)
    ops = []
    for n in range(5):
        ops += [
            {"index": {"_index": first, "_id": str(n)}},
            {"title": f"chocolate bar {n}", "n": n},
        ]
    assert engine.bulk(ops, refresh=True)["errors"] is False
    engine.update_aliases([{"add": {"index": first, "alias": alias}}])
    assert engine.alias_targets(alias) == [first]
    found = engine.search(alias, {"query": {"range": {"n": {"gte": 3}}}})
    assert sorted(hit["_id"] for hit in found["hits"]["hits"]) == ["3", "4"]
    engine.update_aliases(
        [{"remove": {"index": first, "alias": alias}}, {"add": {"index": second, "alias": alias}}]
    )
    assert engine.alias_targets(alias) == [second]
    answers = engine.msearch(
        [
            (first, {"query": {"match": {"title": "chocolate"}}}),
            (second, {"query": {"match_all": {}}}),
        ]
    )
    assert [a["hits"]["total"]["value"] for a in answers] == [5, 0]


def test_percolate_returns_stored_query_with_highlight_offsets(
    engine: Engine, index_prefix: str
) -> None:
    index = f"{index_prefix}-policies"
    engine.create_index(index, policies_mapping())
    engine.index_document(
        index,
        "no-peanuts",
        {
            "doc_type": "policy",
            "policy_id": "no-peanuts",
            "enabled": True,
            "cohorts": ["_all"],
            "query": {
                "bool": {
                    "should": [
                        {"match_phrase": {"intent": "sans"}},
                        {"match_phrase": {"intent": "free of"}},
                    ],
                    "minimum_should_match": 1,
                }
            },
        },
        refresh=True,
    )
    intent = "Chocolat noir sans arachides"
    result = engine.percolate(index, {"intent": intent}, highlight=HIGHLIGHT)
    hits = result["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == ["no-peanuts"]
    spans = spans_from_highlight(hits[0]["highlight"]["intent"][0])
    assert [(s.start, s.end, s.text) for s in spans] == [(14, 18, "sans")]
    assert intent[14:18] == "sans"
    # Multi-word phrase at the very end of the intent: one merged span, tags not trimmed away.
    hits = engine.percolate(index, {"intent": "dark chocolate free of"}, highlight=HIGHLIGHT)[
        "hits"
    ]["hits"]
    assert [(s.start, s.end) for s in spans_from_highlight(hits[0]["highlight"]["intent"][0])] == [
        (15, 22)
    ]
    assert (
        engine.percolate(index, {"intent": "chocolate with peanuts"})["hits"]["total"]["value"] == 0
    )


def test_validate_query(engine: Engine, index_prefix: str) -> None:
    index = f"{index_prefix}-v"
    engine.create_index(index, {"mappings": {"properties": {"title": {"type": "text"}}}})
    assert engine.validate_query(index, {"match": {"title": "x"}})[0] is True
    valid, reason = engine.validate_query(index, {"no_such_query": {}})
    assert valid is False and "no_such_query" in reason


def test_errors_are_typed(engine: Engine) -> None:
    with pytest.raises(EngineError) as missing:
        engine.search("gstest-does-not-exist", {"query": {"match_all": {}}})
    assert missing.value.status == 404
    assert engine.index_exists("gstest-does-not-exist") is False
    unreachable = connect(EngineSettings(url="http://127.0.0.1:9", kind=engine.kind, timeout_s=1))
    with pytest.raises(EngineUnavailable):
        unreachable.health()
