"""A second catalog, end to end: the fashion fixture (tests/fixtures/fashion: its mapping,
profile, policies and products, nothing else) comes up with ``--catalog fashion`` on every
command, against the real engine, and every behaviour holds on its own field names, in
Spanish, in rupees, without margin, popularity, stock or market data."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from control_plane.api import create_app
from control_plane.bootstrap import profile_of
from control_plane.catalog.stats import category_price_stats
from control_plane.cli import main
from control_plane.config import Settings, load_settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from tests.clocks import FIXED_CLOCK
from tests.fixtures.fashion import generate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fashion"
NOW = "2026-09-15T12:00:00Z"


def test_the_committed_products_are_what_the_generator_writes() -> None:
    assert (FIXTURE / "products.ndjson").read_text(encoding="utf-8") == generate.ndjson()
    products = generate.products()
    assert len(products) == 320 and len({p["sku"] for p in products}) == 320


@pytest.fixture(scope="module")
def config(engine_url: str, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A configuration naming the fashion catalog beside the default one."""
    where = tmp_path_factory.mktemp("fashion")
    prefix = f"gstest-{uuid.uuid4().hex[:8]}-fashion"
    path = where / "govsearch.yaml"
    path.write_text(yaml.safe_dump({
        "engine": {"url": engine_url, "timeout_s": 30},
        "audit": {"path": str(where / "decisions.jsonl"), "key_file": str(where / "audit.key")},
        "catalogs": {"fashion": {
            "profile": str(FIXTURE / "profile.yaml"),
            "file": str(FIXTURE / "products.ndjson"),
            "policies_dir": str(FIXTURE / "policies"),
            "policies_index_prefix": prefix,
        }},
    }), encoding="utf-8")
    yield path
    for name in engine.list_indices(prefix + "*"):
        engine.delete_index(name)


def run(config: Path, *argv: str) -> int:
    return main(["--config", str(config), *argv])


@pytest.fixture(scope="module")
def loaded(config: Path) -> Path:
    """load-catalog and policy publish, each with --catalog fashion."""
    assert run(config, "load-catalog", "--catalog", "fashion") == 0
    assert run(config, "policy", "publish", "--catalog", "fashion") == 0
    return config


@pytest.fixture(scope="module")
def settings(loaded: Path) -> Settings:
    return load_settings(loaded, environ={}, catalog="fashion")


@pytest.fixture(scope="module")
def service(settings: Settings, engine: Engine) -> Iterator[SearchService]:
    svc = SearchService(settings, engine, profile_of(settings))
    yield svc
    svc.close()


def test_the_policies_lint_clean_and_say_which_roles_the_catalog_lacks(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(config, "policy", "lint", "--catalog", "fashion", "--now", NOW, "--json") == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [f for f in findings if f["severity"] != "info"] == []
    absent = {f["location"] for f in findings if f["code"] == "absent_role"}
    assert absent == {
        "profile:margin", "profile:popularity", "profile:availability", "profile:market",
        "profile:category_leaf", "profile:language",
    }


def test_policy_check_names_the_catalog(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(config, "policy", "check", "--catalog", "fashion") == 0
    assert "14 policies, 15 test cases" in capsys.readouterr().out


def test_its_policy_tests_pass_against_its_catalog(
    loaded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(loaded, "policy", "test", "--catalog", "fashion", "--json") == 0, capsys.readouterr().out


def test_cli_search_returns_the_display_fields(loaded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    intent = "sari de seda en granate"
    assert run(loaded, "search", "--catalog", "fashion", intent, "--now", NOW, "--json") == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert hits
    for hit in hits:
        assert hit["display"]["currency"] == "INR" and hit["display"]["colour"] == "rojo"
        assert hit["display"]["url"] == f"https://shop.example.com/p/{hit['id']}"
        assert hit["price"] == hit["display"]["amount"] and hit["title"] == hit["display"]["name"]
    assert run(loaded, "search", "--catalog", "fashion", intent, "--now", NOW) == 0
    assert "currency=INR" in capsys.readouterr().out


def test_cheap_is_the_percentile_of_the_union_of_the_categories(
    loaded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Anillos, Pendientes and Collares are all of Joyería: the union's p30 is Joyería's."""
    products = [json.loads(line) for line in (FIXTURE / "products.ndjson").read_text().splitlines()]
    stats = category_price_stats(products, profile_of(load_settings(loaded, environ={}, catalog="fashion")))
    capsys.readouterr()
    assert run(loaded, "compile", "--catalog", "fashion", "joyas baratas", "--now", NOW, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    ceiling = out["plan"]["price"]["max"]["value"]
    assert ceiling == stats["Joyería"].percentile(30)
    each = min(stats[name].percentile(30) for name in ("Anillos", "Pendientes", "Collares"))
    highest = max(stats[name].percentile(30) for name in ("Anillos", "Pendientes", "Collares"))
    assert each < ceiling < highest
    assert {"range": {"amount": {"lte": ceiling, "_name": "price:cheap"}}} in _walk(out["dsl"])


def _walk(node: Any) -> list[Any]:
    found = [node]
    if isinstance(node, dict):
        for value in node.values():
            found += _walk(value)
    elif isinstance(node, list):
        for value in node:
            found += _walk(value)
    return found


def test_no_margin_or_popularity_field_means_no_economics(service: SearchService) -> None:
    from control_plane.plan import Plan, Weight
    from control_plane.renderer import render

    plan = Plan(residual="ring", margin_weight=Weight(value=3.0), popularity_weight=Weight(value=2.0))
    fashion = json.dumps(render(plan, service.profile, engine="opensearch", tier="strict"))
    demo = json.dumps(render(plan, profile_of(Settings()), engine="opensearch", tier="strict"))
    assert "function_score" not in fashion and "margin" not in fashion
    assert '"field": "margin"' in demo and '"field": "popularity"' in demo


def test_the_api_serves_the_named_catalog_and_refuses_another(service: SearchService) -> None:
    client = TestClient(create_app(service, clock=FIXED_CLOCK))
    answer = client.post("/v1/search", json={"intent": "kurta para caballero", "catalog": "fashion"})
    assert answer.status_code == 200, answer.text
    hits = answer.json()["hits"]
    assert hits and all(h["display"]["audience"] in ("hombre", "unisex") for h in hits)
    assert all(set(h["display"]) <= set(service.profile.display) for h in hits)
    refused = client.post("/v1/search", json={"intent": "kurta", "catalog": "default"})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "catalog_not_served"
    assert client.post("/v1/compile", json={"intent": "kurta", "catalog": "groceries"}).status_code == 400
    agent = client.post("/v1/agent/query", json={"message": "a kurta", "catalog": "default"})
    assert agent.status_code == 400 and agent.json()["error"]["code"] == "catalog_not_served"


def test_an_amount_it_cannot_read_is_skipped_with_the_reason(service: SearchService) -> None:
    from control_plane.service import SearchRequest

    compiled = service.compile(SearchRequest(intent="anillo por menos de 150,000"), FIXED_CLOCK())
    skipped = {s.policy_id: s.reason for s in compiled.composition.explanation.skipped}
    assert "not written in INR notation" in skipped["under-price"]
    assert compiled.composition.plan.price.max is None


def _tokens(engine: Engine, index: str, text: str, **how: str) -> list[str]:
    answer = engine.request("POST", f"/{index}/_analyze", body={"text": text, **how})
    return [t["token"] for t in answer["tokens"]]


def test_the_policies_index_analyses_spanish_like_the_catalog(service: SearchService, engine: Engine) -> None:
    """The profile declares ``languages: [es]``: the live policies index and the catalog's
    text fields get the same generated chain, so a Spanish plural, capitalised or with its
    accent, is the same token as its singular in a trigger and in the catalog text."""
    live, _ = service.snapshot()
    index = engine.request("GET", f"/{live.index}/_settings")[live.index]["settings"]["index"]
    assert set(index["analysis"]["analyzer"]) == {"govsearch_text"}
    catalog = service.profile.alias
    pairs = (("Anillos", "anillo"), ("Lámparas", "lampara"), ("COLLARES", "collar"), ("Doradas", "dorado"))
    for plural, singular in pairs:
        trigger = _tokens(engine, live.index, plural, analyzer="govsearch_text")
        assert trigger == _tokens(engine, live.index, singular, analyzer="govsearch_text")
        assert trigger == _tokens(engine, catalog, plural, field="name")
        assert trigger == _tokens(engine, catalog, singular, field="description")
    # the chain is Spanish, not a neutral or an English one: "de" is a Spanish stop word
    # (marked, kept for triggers), and the standard analyzer keeps the plural
    assert _tokens(engine, catalog, "De", field="name") == ["_de"]
    assert _tokens(engine, catalog, "Anillos", field="name") != _tokens(
        engine, catalog, "Anillos", analyzer="standard"
    )


def test_a_spanish_plural_with_capitals_finds_the_singular_products(service: SearchService) -> None:
    """"anillo de plata", "Anillos de Plata" and "ANILLOS DE PLATA" find the same silver
    rings (named "Anillo ... de plata"): the rings trigger matches each, and the catalog
    text is stemmed alike."""
    from control_plane.service import SearchRequest

    products = [json.loads(line) for line in (FIXTURE / "products.ndjson").read_text().splitlines()]
    silver_rings = {
        p["sku"] for p in products
        if p["published"] and str(p["name"]).startswith("Anillo ") and p["material"] == "plata"
    }
    found: dict[str, set[str]] = {}
    for intent in ("anillo de plata", "Anillos de Plata", "ANILLOS DE PLATA"):
        outcome = service.search(SearchRequest(intent=intent, size=50), FIXED_CLOCK())
        applied = [step.policy_id for step in outcome.compiled.composition.explanation.applied]
        assert "rings" in applied, intent
        found[intent] = {hit.id for hit in outcome.execution.hits}
    assert silver_rings and found["anillo de plata"] == found["Anillos de Plata"] == found["ANILLOS DE PLATA"]
    assert silver_rings <= found["anillo de plata"]
