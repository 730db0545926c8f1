"""`govsearch compile`, `search` and `load-catalog` against the real engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from control_plane.bootstrap import Ready, profile_of
from control_plane.catalog_loader import CatalogLoadError, load_catalog
from control_plane.cli import main
from control_plane.config import Settings
from control_plane.engine import Engine


@pytest.fixture()
def env(monkeypatch: pytest.MonkeyPatch, settings: Settings, ready: Ready) -> None:
    monkeypatch.setenv("GOVSEARCH_ENGINE_URL", settings.engine.url)


def test_compile_json(env: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "cheap chocolate", "--now", "2026-12-10T12:00:00", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"policy_set_version", "plan", "explanation", "dsl"}
    assert out["plan"]["category"]["values"] == ["Christmas chocolates"]
    assert out["explanation"]["residual"] == "chocolate"


def test_compile_with_a_policy_directory(
    env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[2] / "policies"
    (tmp_path / "vocabularies").mkdir()
    (tmp_path / "governance.yaml").write_text((root / "governance.yaml").read_text())
    (tmp_path / "vocabularies" / "allergens.yaml").write_text(
        (root / "vocabularies" / "allergens.yaml").read_text()
    )
    (tmp_path / "only.yaml").write_text(
        "id: only-oranges\ntitle: t\nowner: o\ntrigger: {phrase: [chocolate]}\n"
        "rules:\n  - category: {values: [Oranges]}\n"
    )
    assert main(["compile", "chocolate", "--policies", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["plan"]["applied"] == ["only-oranges"]


def test_search_text_output(env: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "oranges"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok tier=strict") and "Navel oranges" in out


def test_malformed_catalog_lines_are_reported_and_nothing_goes_live(
    engine: Engine, settings: Settings, ready: Ready, tmp_path: Path
) -> None:
    profile = profile_of(settings)
    before = engine.alias_targets(profile.alias)
    indices = engine.list_indices(profile.alias + "-*")
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"id": "a", "title": "A"}\nnot json\n[1, 2]\n{"title": "no id"}\n{"id": "a"}\n')
    with pytest.raises(CatalogLoadError) as raised:
        load_catalog(engine, profile, bad)
    lines = [problem.split(":")[1] for problem in raised.value.problems]
    assert lines == ["2", "3", "4", "5"]
    assert engine.alias_targets(profile.alias) == before
    assert engine.list_indices(profile.alias + "-*") == indices


def test_a_document_the_engine_refuses_aborts_the_load(
    engine: Engine, settings: Settings, ready: Ready, tmp_path: Path
) -> None:
    profile = profile_of(settings)
    before = engine.alias_targets(profile.alias)
    indices = engine.list_indices(profile.alias + "-*")
    bad = tmp_path / "refused.ndjson"
    bad.write_text('{"id": "a", "title": "A", "price": 1.0}\n{"id": "b", "title": "B", "no_such_field": 1}\n')
    with pytest.raises(CatalogLoadError) as raised:
        load_catalog(engine, profile, bad)
    assert "'b'" in raised.value.problems[0]
    assert engine.alias_targets(profile.alias) == before
    assert engine.list_indices(profile.alias + "-*") == indices


def test_demo_catalog_loads_completely(engine: Engine, settings: Settings, ready: Ready) -> None:
    profile = profile_of(settings)
    expected = sum(1 for line in Path(settings.catalog.file).read_text().splitlines() if line.strip())
    assert ready.catalog.documents == expected == 1578
    assert engine.request("GET", f"/{profile.alias}/_count")["count"] == expected
