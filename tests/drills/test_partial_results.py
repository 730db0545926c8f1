"""Drill: the engine answers a search with a failed shard (partial results), and ``govsearch
serve`` fails it closed: 503 ``engine_partial_results`` in the one error shape, one decision
record, never the hits the other shards found (docs/api.md, Partial results; docs/audit.md).

The partial results are the engine's own. The catalog is the demo's, loaded through a
profile whose mapping asks for two shards (a profile's mapping is the operator's, as any
large catalog's would be), with one more product: oranges whose margin was entered as
-150 % (a loss leader, in percent where the profile says fractions). The economics layer
scores every matching product ``1 + ln(1 + margin) + ...`` (``field_value_factor``,
``ln1p``): for that product the engine computes NaN, refuses the score, and the shard
holding it fails the query while the other answers (``_shards.failed: 1`` of 2). Any search
that reaches that product gets partial results; the others are whole.

Both engine clients are attacked over HTTP: the first "oranges" (for a shopper whose purchases
are not known yet) is a plan-cache miss, served in a thread through the synchronous client
(its percolation with the purchases lookup, then its tiers, ADR 0032); the second is a warm
hit, served on the event loop through the loop's own client
(``control_plane/engine/aio.py``, ADR 0030); "water" shares no word with any trigger, so its
miss is speculated (ADR 0048): its percolation and first tier in one ``_msearch``, the
tier's answer checked once the percolation found what was guessed (hundreds of products
mention water: unchecked, the other shard's hits would be served). A relay in front of
the engine (it forwards, never alters) shows which client sent each ``_msearch``: the
library's user agent, or none (the loop's).

The percolation is not attacked here: govsearch writes every policies index with one shard
(``mappings/policies.json``), and a search whose only shard fails is not a partial result:
the engine answers the whole ``_msearch`` item with an error (all shards failed), which
fails the request closed as 503 ``engine_error``. ``_shards.failed > 0`` with an answer can
only come from an index of several shards, which govsearch never makes of policies.

Runs on the session's engine (nothing is paused or killed), under its own index prefix.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from control_plane.bootstrap import publish_policies
from control_plane.catalog.profile import load_profile
from control_plane.catalog_loader import load_catalog
from control_plane.config import AuditSettings, CatalogSettings, EngineSettings, Settings
from control_plane.engine import Engine
from control_plane.service import SearchRequest, SearchService
from tests.clocks import FIXED_CLOCK, FIXED_NOW
from tests.drills.harness import ROOT, Served, audit_records, classify, readyz, serve, wait_until
from tests.drills.relay import Relay, Seen

pytestmark = pytest.mark.drill

SHARDS = 2
BAD_PRODUCT = {
    **json.loads(
        next(
            line for line in (ROOT / "data" / "catalog.ndjson").read_text(encoding="utf-8").splitlines()
            if '"id":"demo-oranges-navel-1kg"' in line
        )
    ),
    "id": "drill-loss-leader-oranges-2kg",
    "title": "Loss leader oranges 2kg",
    "text": "Fresh navel oranges, sold below cost this week: sweet, full of water.",
    "margin": -1.5,
}
"""in stock, visible, an orange like the others; its margin is a data error"""
PARTIAL = "engine_partial_results"
SEARCHES: dict[str, dict[str, Any]] = {
    "miss": {"intent": "oranges", "user_id": "drill-shopper"},
    "warm hit": {"intent": "oranges"},
    "speculated miss": {"intent": "water"},
}


@dataclass(frozen=True)
class Setup:
    settings: Settings
    alias: str
    served: Served
    relay: Relay


@pytest.fixture()
def partial(engine: Engine, index_prefix: str, tmp_path: Path) -> Iterator[Setup]:
    """The demo catalog plus the loss leader in a two-shard index under its own alias, the
    demo policies live under their own prefix, and a ``govsearch serve`` over them through a
    relay (aliases watched hourly: a warm hit stays on the event loop)."""
    mapping = json.loads((ROOT / "mappings" / "catalog.json").read_text(encoding="utf-8"))
    mapping["settings"]["number_of_shards"] = SHARDS
    (tmp_path / "catalog.json").write_text(json.dumps(mapping), encoding="utf-8")
    profile_doc = yaml.safe_load((ROOT / "mappings" / "catalog.profile.yaml").read_text(encoding="utf-8"))
    alias = f"{index_prefix}-catalog"
    profile_doc.update(alias=alias, mapping="catalog.json")
    profile_path = tmp_path / "catalog.profile.yaml"
    profile_path.write_text(yaml.safe_dump(profile_doc), encoding="utf-8")
    products = tmp_path / "catalog.ndjson"
    shutil.copyfile(ROOT / "data" / "catalog.ndjson", products)
    with products.open("a", encoding="utf-8") as out:
        out.write(json.dumps(BAD_PRODUCT) + "\n")
    settings = Settings(
        engine=EngineSettings(url=engine.url, timeout_s=30),
        catalog=CatalogSettings(profile=str(profile_path), file=str(products)),
        audit=AuditSettings(path=str(tmp_path / "setup" / "decisions.jsonl")),
    )
    settings = settings.model_copy(update={
        "policies": settings.policies.model_copy(update={"index_prefix": index_prefix}),
        "auth": settings.auth.model_copy(update={"keys_index": f"{index_prefix}-keys"}),
    })
    load_catalog(engine, load_profile(profile_path), products)
    publish_policies(engine, settings, "policies", "live", clock=FIXED_CLOCK)
    (tmp_path / "govsearch.yaml").write_text("search:\n  alias_watch_interval_s: 3600\n", encoding="utf-8")
    with Relay(engine.url) as relay:
        served = serve(
            relay.url, tmp_path, "serve",
            GOVSEARCH_CONFIG=str(tmp_path / "govsearch.yaml"),
            GOVSEARCH_CATALOG_PROFILE=str(profile_path),
            GOVSEARCH_CATALOG_FILE=str(products),
            GOVSEARCH_POLICIES_INDEX_PREFIX=index_prefix,
            GOVSEARCH_KEYS_INDEX=f"{index_prefix}-keys",
            GOVSEARCH_AUDIT_KEY_FILE=str(tmp_path / "audit.key"),
        )
        try:
            yield Setup(settings, alias, served, relay)
        finally:
            served.stop()


def _searched(relay: Relay, since: float) -> list[Seen]:
    """The ``_msearch`` requests the relay saw since ``since`` (a head is noted before it is
    forwarded, so before its answer can come back; the guesses' background ``_analyze``
    requests are left out)."""
    return [seen for seen in relay.requests if seen.at >= since and seen.path == "/_msearch"]


def test_a_search_answered_with_a_failed_shard_fails_closed_on_both_clients(
    engine: Engine, partial: Setup
) -> None:
    served, relay = partial.served, partial.relay
    assert wait_until(lambda: readyz(served.url) == 200, 60) is not None  # both shards assigned: green

    # the engine itself: the strict tier govsearch renders for "oranges", asked directly, is
    # answered from one shard of two (the other refused the loss leader's NaN score)
    service = SearchService(partial.settings, engine, load_profile(Path(partial.settings.catalog.profile)))
    try:
        request = SearchRequest(intent="oranges")
        body = service.render(service.compile(request, FIXED_NOW), request, "strict")
    finally:
        service.close()
    raw = engine.request("POST", f"/{partial.alias}/_search", body=body)
    shards = raw["_shards"]
    assert (shards["total"], shards["failed"]) == (SHARDS, 1), shards
    assert "invalid score" in json.dumps(shards["failures"]), shards["failures"]

    with httpx.Client(base_url=served.url, timeout=60) as client:
        # a search that never reaches the loss leader is whole, and served
        control = client.post("/v1/search", json={"intent": "chocolate", "size": 5})
        assert control.status_code == 200 and classify(control, None)[0] == "governed", control.text

        answers: dict[str, httpx.Response] = {}
        asked: dict[str, list[Seen]] = {}
        for name, search in SEARCHES.items():
            before = time.monotonic()
            answers[name] = client.post("/v1/search", json={**search, "size": 5})
            asked[name] = _searched(relay, before)
    assert served.stop() in (0, -signal.SIGTERM)
    records: dict[str, list[dict[str, Any]]] = {}
    for line in audit_records(served.audit_path):
        records.setdefault(line["request_id"], []).append(line)

    for name, answer in answers.items():
        assert answer.status_code == 503, f"{name}: {answer.status_code} {answer.text[:300]}"
        error = answer.json()["error"]
        assert set(error) == {"code", "message", "request_id", "details"}, error
        assert error["code"] == PARTIAL, f"{name}: {error}"
        assert "only some of its shards" in error["message"] and "Loss leader" not in answer.text, error
        mine = records.get(error["request_id"], [])
        assert len(mine) == 1, f"{name}: {len(mine)} decision records"
        assert mine[0]["status"] == "error" and mine[0]["error"]["code"] == PARTIAL, mine[0]
        assert mine[0]["error"]["status"] == 503 and not mine[0].get("hit_ids"), mine[0]
    assert len(records) == 1 + len(SEARCHES), sorted(records)  # the control's and theirs: nothing else

    # the misses went through the synchronous client (the library's user agent), in threads:
    # a percolation, then the tiers; a speculated percolation and tier, together
    for name, sent in (("miss", 2), ("speculated miss", 1)):
        assert len(asked[name]) == sent and all(seen.user_agent for seen in asked[name]), asked[name]
    # the warm hit sent its one _msearch through the event loop's client (no user agent)
    assert [(seen.method, seen.path, seen.user_agent) for seen in asked["warm hit"]] == [
        ("POST", "/_msearch", None)
    ], asked["warm hit"]
