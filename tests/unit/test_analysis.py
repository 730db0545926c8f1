"""Analysis as configuration, without an engine: what the profile's languages generate,
and what a profile may and may not say (the engine's side is tests/integration/test_analysis.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from control_plane.catalog.analysis import (
    PRESETS,
    Language,
    catalog_mapping,
    engine_stopwords,
    generated_analysis,
    mark,
    policies_mapping,
    policy_analysis,
)
from control_plane.catalog.profile import CatalogProfileError, load_profile

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "mappings" / "catalog.profile.yaml"
MAPPING = ROOT / "mappings" / "catalog.json"


def langs(*codes: Any) -> tuple[Language, ...]:
    return tuple(Language.model_validate(code) for code in codes)


def write_profile(tmp_path: Path, mapping: dict[str, Any] | None = None, **changes: Any) -> Path:
    raw = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    if mapping is not None:
        (tmp_path / "mapping.json").write_text(json.dumps(mapping), encoding="utf-8")
        raw["mapping"] = str(tmp_path / "mapping.json")
    else:
        raw["mapping"] = str(MAPPING)
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def demo_mapping() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(MAPPING.read_text(encoding="utf-8"))
    return body


def test_every_preset_has_its_engine_stop_words_shipped() -> None:
    assert {"en", "fr", "de", "es"} <= set(PRESETS)
    for code in PRESETS:
        words = engine_stopwords(code)
        assert len(words) >= 30 and len(set(words)) == len(words), code
    assert {"the", "a", "no", "not"} <= set(engine_stopwords("en"))
    assert {"de", "à", "pas", "la"} <= set(engine_stopwords("fr"))
    assert "été" not in engine_stopwords("fr")  # left out by snowball: it also means summer
    assert {"für", "die", "und"} <= set(engine_stopwords("de"))


def test_marks_are_ascii_distinct_and_no_word_folds_to_one() -> None:
    words = {w for code in PRESETS for w in engine_stopwords(code)}
    marks = {mark(w) for w in words}
    assert len(marks) == len(words)  # distinct words keep distinct marks
    assert all(m.isascii() and m.startswith("_") for m in marks)
    assert mark("the") == "_the" and mark("à") != mark("a")


def test_the_shared_chain_marks_stop_words_before_folding_then_stems() -> None:
    analysis = generated_analysis(langs("en", "fr"))
    chain = analysis["analyzer"]["govsearch_text"]["filter"]
    assert chain.index("govsearch_en_stop_marks") < chain.index("asciifolding")
    assert chain.index("govsearch_fr_stop_marks") < chain.index("asciifolding")
    assert chain.index("asciifolding") < chain.index("govsearch_en_stemmer")
    assert chain[0] == "govsearch_elision" and chain[1] == "lowercase"
    rules = analysis["filter"]["govsearch_en_stop_marks"]["rules"]
    assert "the => _the" in rules and len(rules) == len(engine_stopwords("en"))
    # light stemmers by default; the engine's own language stemmer on the .xx analyzer
    assert analysis["filter"]["govsearch_en_stemmer"]["language"] == "light_english"
    assert analysis["filter"]["govsearch_fr_stemmer"]["language"] == "light_french"
    assert analysis["filter"]["govsearch_en_language_stemmer"]["language"] == "english"


def test_each_language_analyzer_drops_its_own_stop_words_and_marks_the_others() -> None:
    analysis = generated_analysis(langs("en", "fr", "de"))
    fr = analysis["analyzer"]["govsearch_text_fr"]["filter"]
    assert fr[:3] == ["govsearch_fr_elision", "lowercase", "govsearch_fr_stop"]
    assert {"govsearch_en_stop_marks", "govsearch_de_stop_marks"} <= set(fr)
    assert "govsearch_fr_stop_marks" not in fr
    assert analysis["filter"]["govsearch_fr_stop"] == {"type": "stop", "stopwords": "_french_"}
    de = analysis["analyzer"]["govsearch_text_de"]["filter"]
    assert not any("elision" in f for f in de)  # German has no elision
    assert "govsearch_possessive" in analysis["analyzer"]["govsearch_text_en"]["filter"]


def test_elision_is_the_union_of_the_languages_that_have_it() -> None:
    articles = generated_analysis(langs("fr", "it", "es"))["filter"]["govsearch_elision"]["articles"]
    assert {"l", "qu", "dell", "all"} <= set(articles)
    assert "govsearch_elision" not in generated_analysis(langs("en", "de"))["filter"]


def test_no_language_gives_a_language_neutral_chain() -> None:
    analysis = generated_analysis(())
    assert analysis["analyzer"]["govsearch_text"]["filter"] == ["lowercase", "asciifolding"]
    assert analysis["filter"] == {}


def test_overrides_replace_the_preset() -> None:
    (lang,) = langs({"code": "fr", "stemmer": "minimal_french", "stopwords": ["le"], "elision": []})
    analysis = generated_analysis((lang,))
    assert analysis["filter"]["govsearch_fr_stemmer"]["language"] == "minimal_french"
    assert analysis["filter"]["govsearch_fr_stop_marks"]["rules"] == ["le => _le"]
    assert analysis["filter"]["govsearch_fr_stop"] == {"type": "stop", "stopwords": ["le"]}
    assert "govsearch_elision" not in analysis["filter"]


def test_a_language_without_preset_needs_its_stemmer_and_stop_words() -> None:
    with pytest.raises(ValidationError, match="no preset for language 'sv'"):
        Language.model_validate("sv")
    (lang,) = langs({"code": "sv", "stemmer": "light_swedish", "stopwords": ["och"]})
    assert generated_analysis((lang,))["filter"]["govsearch_sv_stemmer"]["language"] == "light_swedish"


def test_the_mapping_gets_the_generated_analysis_and_keeps_its_own() -> None:
    merged = catalog_mapping(demo_mapping(), langs("en", "fr"))
    analysis = merged["settings"]["analysis"]
    assert {"govsearch_text", "govsearch_text_en", "govsearch_text_fr"} <= set(analysis["analyzer"])
    assert "govsearch_keyword_folded" in analysis["normalizer"]  # the mapping's own
    assert catalog_mapping(merged, langs("en", "fr")) == merged  # merging again changes nothing


def test_a_mapping_defining_a_generated_name_otherwise_is_refused() -> None:
    body = demo_mapping()
    body["settings"]["analysis"]["analyzer"] = {"govsearch_text": {"tokenizer": "whitespace"}}
    with pytest.raises(ValueError, match="generated from the profile's languages"):
        catalog_mapping(body, langs("en"))
    # without languages (a profile written before they existed), the mapping's own is kept
    kept = catalog_mapping(body, ())
    assert kept["settings"]["analysis"]["analyzer"]["govsearch_text"] == {"tokenizer": "whitespace"}


def test_the_policies_index_gets_the_analyzer_and_only_what_it_uses() -> None:
    merged = catalog_mapping(demo_mapping(), langs("en", "fr"))
    analysis = policy_analysis(merged, "govsearch_text")
    assert set(analysis.settings["analyzer"]) == {"govsearch_text"}
    assert set(analysis.settings["filter"]) == {
        "govsearch_elision", "govsearch_en_stop_marks", "govsearch_fr_stop_marks",
        "govsearch_en_stemmer", "govsearch_fr_stemmer",
    }
    template = json.loads((ROOT / "mappings" / "policies.json").read_text(encoding="utf-8"))
    body = policies_mapping(template, analysis)
    intent = body["mappings"]["properties"]["intent"]
    assert intent["analyzer"] == intent["fields"]["tokens"]["analyzer"] == "govsearch_text"
    assert body["settings"]["analysis"] == analysis.settings
    assert "analysis" not in template["settings"]  # the template is not changed
    other = policy_analysis(catalog_mapping(demo_mapping(), langs("en", "de")), "govsearch_text")
    assert other.fingerprint != analysis.fingerprint


def test_a_users_own_analyzer_is_copied_with_its_components() -> None:
    body = demo_mapping()
    body["settings"]["analysis"].update({
        "char_filter": {"shop_dashes": {"type": "mapping", "mappings": ["- => \\u0020"]}},
        "filter": {"shop_plural": {"type": "stemmer", "language": "minimal_english"}},
        "analyzer": {"shop_text": {
            "tokenizer": "standard", "char_filter": ["shop_dashes"], "filter": ["lowercase", "shop_plural"],
        }},
    })
    analysis = policy_analysis(catalog_mapping(body, ()), "shop_text")
    assert analysis.settings == {
        "analyzer": {"shop_text": body["settings"]["analysis"]["analyzer"]["shop_text"]},
        "char_filter": {"shop_dashes": body["settings"]["analysis"]["char_filter"]["shop_dashes"]},
        "filter": {"shop_plural": body["settings"]["analysis"]["filter"]["shop_plural"]},
    }
    with pytest.raises(ValueError, match="analyzer 'nope' is not defined"):
        policy_analysis(body, "nope")


def test_profile_languages_parse_from_codes_and_mappings(tmp_path: Path) -> None:
    path = write_profile(tmp_path, languages=["de", {"code": "es", "stemmer": "spanish"}])
    profile = load_profile(path, check=False)
    # the demo mapping's .en / .fr subfields name analyzers only en and fr generate
    assert sum("govsearch_text_en" in p or "govsearch_text_fr" in p for p in profile.check_mapping()) == 4
    assert [lang.code for lang in profile.languages] == ["de", "es"]
    assert profile.languages[1].shared_stemmer() == "spanish"
    assert profile.languages[0].shared_stemmer() == "light_german"


def test_profile_refuses_bad_languages_and_a_missing_analyzer(tmp_path: Path) -> None:
    with pytest.raises(CatalogProfileError, match="a language is listed twice"):
        load_profile(write_profile(tmp_path, languages=["en", "en"]))
    with pytest.raises(CatalogProfileError, match="no preset for language 'xx'"):
        load_profile(write_profile(tmp_path, languages=["xx"]))
    with pytest.raises(CatalogProfileError, match="analysis: analyzer 'shop_text' is not defined"):
        load_profile(write_profile(tmp_path, analyzer="shop_text"))


def test_a_field_naming_an_analyzer_nobody_defines_is_a_profile_problem(tmp_path: Path) -> None:
    body = demo_mapping()
    german = {"type": "text", "analyzer": "govsearch_text_de"}
    body["mappings"]["properties"]["title"]["fields"]["de"] = german
    path = write_profile(tmp_path, mapping=body)
    with pytest.raises(CatalogProfileError, match=r"field title\.de uses analyzer 'govsearch_text_de'"):
        load_profile(path)
    # declaring German generates it
    profile = load_profile(write_profile(tmp_path, mapping=body, languages=["en", "fr", "de"]))
    assert "govsearch_text_de" in profile.load_mapping()["settings"]["analysis"]["analyzer"]
    body["mappings"]["properties"]["title"]["fields"]["de"]["analyzer"] = "german"  # built in
    assert load_profile(write_profile(tmp_path, mapping=body)).check_mapping() == []


def test_nested_filters_and_built_in_analyzers_are_handled() -> None:
    body = demo_mapping()
    body["settings"]["analysis"].update({
        "filter": {
            "shop_plural": {"type": "stemmer", "language": "minimal_english"},
            "shop_short": {"type": "length", "max": 3},
            "shop_when_long": {"type": "condition", "filter": ["shop_plural"], "script": {"source": "true"}},
            "shop_both": {"type": "multiplexer", "filters": ["lowercase, shop_short", "shop_when_long"]},
        },
        "analyzer": {"shop_text": {"tokenizer": "standard", "filter": ["shop_both"]}},
    })
    analysis = policy_analysis(body, "shop_text")
    assert set(analysis.settings["filter"]) == {"shop_both", "shop_short", "shop_when_long", "shop_plural"}
    assert policy_analysis(body, "english").settings == {}  # the engine's own


def test_overridden_stop_words_are_lowercased_once() -> None:
    (lang,) = langs({"code": "fr", "stopwords": ["Le", "le", " La "]})
    assert lang.words() == ("le", "la")
