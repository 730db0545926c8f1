"""The catalog profile and the catalog mapping: they agree, and bad profiles say why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from control_plane.catalog.product import Product
from control_plane.catalog.profile import (
    CatalogProfile,
    CatalogProfileError,
    load_profile,
    mapping_fields,
)

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "mappings" / "catalog.profile.yaml"
MAPPING = ROOT / "mappings" / "catalog.json"

#: the demo's shared chain: what it was before languages were configuration (elision,
#: lowercase, folding, minimal stemmers), with the stop-word marks before the folding
SHARED_CHAIN = [
    "govsearch_elision",
    "lowercase",
    "govsearch_en_stop_marks",
    "govsearch_fr_stop_marks",
    "asciifolding",
    "govsearch_en_stemmer",
    "govsearch_fr_stemmer",
]


@pytest.fixture(scope="module")
def profile() -> CatalogProfile:
    return load_profile(PROFILE)


@pytest.fixture(scope="module")
def mapping() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(MAPPING.read_text(encoding="utf-8"))
    return body


def write_profile(tmp_path: Path, **changes: Any) -> Path:
    raw = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    raw["mapping"] = str(MAPPING)
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


# --- the shipped profile and mapping ----------------------------------------------------


def test_profile_loads_and_resolves_its_mapping(profile: CatalogProfile) -> None:
    assert profile.alias == "govsearch-catalog"
    assert profile.mapping == MAPPING.resolve() and profile.mapping.is_absolute()
    on_disk = json.loads(MAPPING.read_text(encoding="utf-8"))
    loaded = profile.load_mapping()
    assert loaded["mappings"] == on_disk["mappings"]
    assert loaded["settings"]["analysis"]["normalizer"] == on_disk["settings"]["analysis"]["normalizer"]
    assert "analyzer" not in on_disk["settings"]["analysis"]  # generated from the languages
    assert [lang.code for lang in profile.languages] == ["en", "fr"]
    assert profile.category == "categories" and profile.category_leaf == "category"
    assert (profile.fulltext[0].field, profile.fulltext[0].weight) == ("title", 3)
    assert profile.facets.price_ranges == (0, 2, 5, 10, 20, 50)


def test_every_profile_field_exists_in_the_mapping(
    profile: CatalogProfile, mapping: dict[str, Any]
) -> None:
    fields = mapping_fields(mapping)
    roles = profile.field_roles()
    assert len(roles) >= 20
    for role, field in roles:
        assert field in fields, f"{role}: {field}"
    assert profile.check_mapping(mapping) == []


def test_mapping_has_the_generated_shared_analyzer_exactly(profile: CatalogProfile) -> None:
    analysis = profile.load_mapping()["settings"]["analysis"]
    assert analysis["analyzer"]["govsearch_text"]["filter"] == SHARED_CHAIN
    assert analysis["filter"]["govsearch_en_stemmer"] == {"type": "stemmer", "language": "minimal_english"}
    assert analysis["filter"]["govsearch_fr_stemmer"] == {"type": "stemmer", "language": "minimal_french"}
    articles = set(analysis["filter"]["govsearch_elision"]["articles"])
    assert articles >= {"l", "d", "j", "qu", "n", "s", "c", "m", "t"}
    # the .en / .fr subfields: the engine's own language stemmers and stop words
    assert analysis["filter"]["govsearch_en_language_stemmer"] == {"type": "stemmer", "language": "english"}
    assert analysis["filter"]["govsearch_fr_stop"] == {"type": "stop", "stopwords": "_french_"}
    assert analysis["normalizer"]["govsearch_keyword_folded"]["filter"] == [
        "lowercase",
        "asciifolding",
    ]


def test_mapping_settings_and_strictness(mapping: dict[str, Any]) -> None:
    assert mapping["settings"]["number_of_shards"] == 1
    assert mapping["settings"]["number_of_replicas"] == 0
    assert mapping["mappings"]["dynamic"] == "strict"


def test_mapping_properties_are_exactly_the_document_fields(mapping: dict[str, Any]) -> None:
    assert set(mapping["mappings"]["properties"]) == set(Product.model_fields)


def test_mapping_field_types(mapping: dict[str, Any]) -> None:
    fields = mapping_fields(mapping)
    assert fields["title"] == "text" and fields["title.en"] == "text"
    assert fields["title.raw"] == "keyword" and fields["brand.text"] == "text"
    assert fields["price"] in ("scaled_float", "float")
    for name in ("in_stock", "visible", "on_clearance"):
        assert fields[name] == "boolean"
    for name in ("id", "category", "categories", "allergens", "traces", "labels", "diet",
                 "market", "language", "source", "modelled"):
        assert fields[name] == "keyword", name
    props = mapping["mappings"]["properties"]
    assert props["brand"]["normalizer"] == "govsearch_keyword_folded"
    assert props["title"]["analyzer"] == props["text"]["analyzer"] == "govsearch_text"
    assert props["title"]["fields"]["fr"]["analyzer"] == "govsearch_text_fr"


def test_mapping_fields_walks_subfields_and_objects() -> None:
    body = {"mappings": {"properties": {
        "a": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "o": {"properties": {"x": {"type": "float"}}},
    }}}
    assert mapping_fields(body) == {"a": "text", "a.raw": "keyword", "o": "object",
                                    "o.x": "float"}


def test_profile_is_frozen(profile: CatalogProfile) -> None:
    with pytest.raises(ValueError):
        profile.price = "cost"  # type: ignore[misc]


# --- bad profiles --------------------------------------------------------------------------


def test_a_mapping_path_is_relative_to_the_profile(tmp_path: Path) -> None:
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "m.json").write_text(MAPPING.read_text(encoding="utf-8"))
    raw = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    raw["mapping"] = "maps/m.json"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert load_profile(path).mapping == (tmp_path / "maps" / "m.json").resolve()


def test_validation_problems_are_all_listed(tmp_path: Path) -> None:
    path = write_profile(
        tmp_path,
        price=None,
        colour="red",
        fulltext=[{"field": "title", "weight": 0}],
        facets={"category": "category", "brand": "brand.raw", "price_ranges": [5, 2]},
    )
    with pytest.raises(CatalogProfileError) as error:
        load_profile(path)
    text = "\n".join(error.value.problems)
    assert "price: Field required" in text
    assert "colour: Extra inputs are not permitted" in text
    assert "fulltext.0.weight" in text
    assert "strictly increasing" in text
    assert str(path) in str(error.value)


def test_a_field_missing_from_the_mapping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogProfileError, match="price: field 'cost' is not in the mapping"):
        load_profile(write_profile(tmp_path, price="cost"))


def test_a_field_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogProfileError, match="availability: field 'title' is text"):
        load_profile(write_profile(tmp_path, availability="title"))


def test_check_can_be_skipped(tmp_path: Path) -> None:
    profile = load_profile(write_profile(tmp_path, price="cost"), check=False)
    assert profile.check_mapping() == ["price: field 'cost' is not in the mapping"]


def test_a_missing_mapping_file_is_refused(tmp_path: Path) -> None:
    path = write_profile(tmp_path, mapping="nowhere.json")
    with pytest.raises(CatalogProfileError, match="file not found"):
        load_profile(path)


def test_a_profile_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(CatalogProfileError, match="expected a mapping"):
        load_profile(path)
