"""Analysis as configuration, on the real engine: per language, catalog text and triggers
analysed alike (plural, accents, elision), languages kept apart, a user's own analyzer,
and policies indices written with the previous built-in ``govsearch_text``.

Each language gets a profile of its own (the demo profile with ``languages: [xx]`` and a
mapping whose ``title`` has a ``.xx`` subfield); the catalog index is created from
``profile.load_mapping()`` and the policies index by ``policy_store.write_index`` with
``profile.policy_analysis()``, exactly as ``load-catalog`` and ``policy publish`` do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from control_plane import matcher, policy_store
from control_plane.catalog.analysis import PRESETS, engine_stopwords
from control_plane.catalog.profile import CatalogProfile, load_profile
from control_plane.catalog_loader import load_catalog
from control_plane.engine import Engine
from control_plane.loader import build_policy_set
from control_plane.policy import Governance, Policy, PolicySet
from tests.clocks import FIXED_NOW

ROOT = Path(__file__).resolve().parents[2]
GOVERNANCE = Governance(filterable_fields=("brand",), boostable_fields=("brand",))
V1_MAPPING = ROOT / "tests" / "fixtures" / "policies_mapping_v1.json"


def language_profile(tmp_path: Path, languages: list[Any], subfields: list[str]) -> CatalogProfile:
    """The demo profile and mapping, with ``languages`` and ``title.xx`` subfields."""
    mapping = json.loads((ROOT / "mappings" / "catalog.json").read_text(encoding="utf-8"))
    for field in ("title", "text"):
        props = mapping["mappings"]["properties"][field]
        props["fields"] = {"raw": props["fields"]["raw"]} if "raw" in props["fields"] else {}
        for code in subfields:
            props["fields"][code] = {"type": "text", "analyzer": f"govsearch_text_{code}"}
    (tmp_path / "catalog.json").write_text(json.dumps(mapping), encoding="utf-8")
    raw = yaml.safe_load((ROOT / "mappings" / "catalog.profile.yaml").read_text(encoding="utf-8"))
    raw.update(
        mapping="catalog.json",
        languages=languages,
        fulltext=[{"field": "title", "weight": 3}]
        + [{"field": f"title.{c}", "weight": 1} for c in subfields],
    )
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return load_profile(tmp_path / "profile.yaml")


def catalog(engine: Engine, profile: CatalogProfile, name: str, titles: dict[str, str]) -> str:
    engine.create_index(name, profile.load_mapping())
    for doc_id, title in titles.items():
        engine.index_document(name, doc_id, {"id": doc_id, "title": title, "text": title})
    engine.refresh(name)
    return name


def found(engine: Engine, index: str, field: str, query: str) -> set[str]:
    body = {"size": 50, "query": {"match": {field: query}}}
    return {h["_id"] for h in engine.search(index, body)["hits"]["hits"]}


def policy_set(triggers: dict[str, list[str]]) -> PolicySet:
    policies = [
        Policy.model_validate({
            "id": pid, "title": pid, "owner": "test", "trigger": {"any": phrases},
            "rules": [{"boost": {"field": "brand", "values": ["x"], "weight": 1.5}}],
        })
        for pid, phrases in triggers.items()
    ]
    return build_policy_set(policies, (), GOVERNANCE)


def fired(engine: Engine, index: str, policies: PolicySet, intent: str) -> set[str]:
    by_id = {p.id: p for p in policies.policies}
    matches = matcher.match(engine, index, matcher.clean_intent(intent), by_id, now=FIXED_NOW)
    return {m.policy_id for m in matches}


# --- the engine's stop words are the ones shipped ----------------------------------------


def test_shipped_stop_words_are_the_engines_built_in_lists(engine: Engine, index_prefix: str) -> None:
    """Every shipped word is removed by the engine's ``_xx_`` stop filter (and a word that
    is in no list is not), so the marks cover the words the engine's own analyzers drop."""
    index = f"{index_prefix}-stop"
    filters = {code: {"type": "stop", "stopwords": f"_{p.name}_"} for code, p in PRESETS.items()}
    engine.create_index(index, {"settings": {"analysis": {"filter": filters}}})
    for code in PRESETS:
        words = engine_stopwords(code)
        body = {"tokenizer": "whitespace", "filter": [code], "text": " ".join(words) + " zebra"}
        kept = [t["token"] for t in engine.request("POST", f"/{index}/_analyze", body=body)["tokens"]]
        assert kept == ["zebra"], (code, kept)


# --- four languages: plural, accents, elision, in the catalog and in triggers ----------------

LANGUAGE_CASES: dict[str, dict[str, Any]] = {
    "en": {
        "titles": {"e1": "Running Shoes", "e2": "Café Latte Mix", "e3": "Berries and Cherries"},
        "queries": {"shoe": {"e1"}, "cafe": {"e2"}, "café": {"e2"}, "cherry": {"e3"}, "berry": {"e3"}},
        "triggers": {"shoe": ["shoe"], "coffee": ["cafe"]},
        "intents": {"red shoes": {"shoe"}, "café latte": {"coffee"}, "the shoemaker": set()},
    },
    "fr": {
        "titles": {"f1": "Chaussures de randonnée", "f2": "Jus de l'Orange pressée", "f3": "Café moulu"},
        "queries": {"chaussure": {"f1"}, "oranges": {"f2"}, "l'orange": {"f2"}, "cafe": {"f3"},
                    "randonnees": {"f1"}},
        "triggers": {"orange": ["orange"], "shoe": ["chaussure"], "coffee": ["café"]},
        "intents": {"l'orange": {"orange"}, "d'oranges": {"orange"}, "chaussures": {"shoe"},
                    "cafe noir": {"coffee"}},
    },
    "de": {
        "titles": {"g1": "Schuhe für Kinder", "g2": "Äpfel aus Südtirol", "g3": "Bio Müsli"},
        "queries": {"Schuh": {"g1"}, "Apfel": {"g2"}, "musli": {"g3"}, "Sudtirol": {"g2"}},
        "triggers": {"shoe": ["schuh"], "apple": ["apfel"]},
        "intents": {"schuhe": {"shoe"}, "äpfel": {"apple"}, "apfel": {"apple"}},
    },
    "es": {
        "titles": {"s1": "Zapatos de cuero", "s2": "Café de Colombia", "s3": "Melón amarillo"},
        "queries": {"zapato": {"s1"}, "cafe": {"s2"}, "melon": {"s3"}, "zapatos": {"s1"}},
        "triggers": {"shoe": ["zapato"], "melon": ["melon"]},
        "intents": {"zapatos": {"shoe"}, "melón": {"melon"}},
    },
    "it": {
        "titles": {"i1": "Succo d'Arancia", "i2": "Scarpe da ginnastica", "i3": "Caffè macinato"},
        "queries": {"arance": {"i1"}, "dell'arancia": {"i1"}, "scarpa": {"i2"}, "caffe": {"i3"}},
        "triggers": {"orange": ["arancia"], "shoe": ["scarpa"]},
        "intents": {"l'arancia": {"orange"}, "arance rosse": {"orange"}, "scarpe": {"shoe"}},
    },
}


@pytest.mark.parametrize("code", sorted(LANGUAGE_CASES))
def test_a_language_profile_matches_plural_accents_elision(
    engine: Engine, index_prefix: str, tmp_path: Path, code: str
) -> None:
    case = LANGUAGE_CASES[code]
    profile = language_profile(tmp_path, [code], [code])
    index = catalog(engine, profile, f"{index_prefix}-catalog", case["titles"])
    for query, expected in case["queries"].items():
        assert found(engine, index, "title", query) == expected, (query, "title")
        assert found(engine, index, f"title.{code}", query) == expected, (query, f"title.{code}")
    policies = policy_set(case["triggers"])
    policies_index = policy_store.write_index(
        engine, index_prefix, policies, analysis=profile.policy_analysis()
    )
    for intent, expected in case["intents"].items():
        assert fired(engine, policies_index, policies, intent) == expected, intent


def test_a_german_stop_word_does_not_fold_into_an_english_word(
    engine: Engine, index_prefix: str, tmp_path: Path
) -> None:
    """"für" is a German stop word: marked before folding, it never becomes English "fur";
    without German among the languages it folds like any word."""
    titles = {"d1": "Schuhe für Kinder", "e1": "Faux Fur Slippers"}
    both = language_profile(tmp_path, ["en", "de"], ["en", "de"])
    apart = catalog(engine, both, f"{index_prefix}-a", titles)
    assert found(engine, apart, "title", "fur") == {"e1"}
    assert found(engine, apart, "title", "für") == {"d1"}
    assert found(engine, apart, "title.en", "fur") == {"e1"}
    assert found(engine, apart, "title.de", "fur") == {"e1"}
    (tmp_path / "en").mkdir()
    english = catalog(engine, language_profile(tmp_path / "en", ["en"], ["en"]), f"{index_prefix}-b", titles)
    assert found(engine, english, "title", "fur") == {"d1", "e1"}  # the collision the marks remove


def test_stop_word_cues_and_exact_token_counts_keep_working(
    engine: Engine, index_prefix: str, tmp_path: Path
) -> None:
    """In the shared chain a stop word is marked, not dropped: a cue made of stop words
    ("no", "pas de", "free of") still matches and captures what follows, and an exact
    trigger still counts the intent's every word."""
    profile = language_profile(tmp_path, ["en", "fr"], ["en", "fr"])
    policies = build_policy_set(
        [
            Policy.model_validate({
                "id": "without", "title": "without", "owner": "test",
                "trigger": {"pattern": ["(no|pas de|free of) {item}"], "consume": True},
                "rules": [{"filter": {"field": "brand", "values": ["{item}"]}}],
            }),
            Policy.model_validate({
                "id": "exact", "title": "exact", "owner": "test", "trigger": {"exact": ["the orange"]},
                "rules": [{"boost": {"field": "brand", "values": ["x"], "weight": 1.5}}],
            }),
        ],
        (),
        GOVERNANCE,
    )
    index = policy_store.write_index(engine, index_prefix, policies, analysis=profile.policy_analysis())
    by_id = {p.id: p for p in policies.policies}
    for intent, item in [("chocolate no sugar", "sugar"), ("chocolat pas de sucre", "sucre"),
                         ("biscuits free of milk", "milk")]:
        (match,) = matcher.match(engine, index, intent, by_id, now=FIXED_NOW)
        assert [c.text for c in match.captures] == [item], intent
    assert fired(engine, index, policies, "the orange") == {"exact"}
    assert fired(engine, index, policies, "the orange juice") == set()
    assert fired(engine, index, policies, "thé orange") == set()  # thé is not the
    tea = policy_set({"tea": ["thé"]})
    tea_index = policy_store.write_index(
        engine, f"{index_prefix}-tea", tea, analysis=profile.policy_analysis()
    )
    assert fired(engine, tea_index, tea, "the vert") == set()  # unaccented, it is English "the"
    assert fired(engine, tea_index, tea, "Thé vert bio") == {"tea"}
    assert fired(engine, tea_index, tea, "what the french") == set()
    assert fired(engine, tea_index, tea, "The french popcorn") == set()


def test_a_change_of_languages_loads_a_new_catalog_index(
    engine: Engine, index_prefix: str, tmp_path: Path
) -> None:
    """The catalog index's name hashes its mapping, the generated analysis included: after a
    change of languages the load builds a new index, and the old one keeps its own chain."""
    products = tmp_path / "products.ndjson"
    products.write_text(
        json.dumps({"id": "p1", "title": "Pain de mie", "categories": ["Breads"], "price": 3.0}) + "\n",
        encoding="utf-8",
    )
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = language_profile(tmp_path / "a", ["en"], ["en"]).model_copy(
        update={"alias": f"{index_prefix}-cat"}
    )
    second = language_profile(tmp_path / "b", ["en", "fr"], ["en"]).model_copy(
        update={"alias": f"{index_prefix}-cat"}
    )
    old = load_catalog(engine, first, products).index
    new = load_catalog(engine, second, products).index
    assert old != new and engine.alias_targets(f"{index_prefix}-cat") == [new]
    old_filters = engine.request("GET", f"/{old}/_settings")[old]["settings"]["index"]["analysis"]["filter"]
    assert "govsearch_fr_stop_marks" not in old_filters and engine.index_exists(old)
    # French "de" is a stop word of the second profile only: "dé" (a die) folds into it in the
    # old index, which keeps its chain as it was written, and not in the new one
    assert found(engine, old, "title", "dé") == {"p1"}
    assert found(engine, new, "title", "dé") == set()
    assert found(engine, new, "title", "pain") == {"p1"}


def test_a_users_own_analyzer_reaches_the_policies_index(
    engine: Engine, index_prefix: str, tmp_path: Path
) -> None:
    """A profile naming an analyzer its mapping defines: the policies index gets the same
    definition, so "apple" fires on "apples" as the catalog's own analyzer matches them."""
    mapping = json.loads((ROOT / "mappings" / "catalog.json").read_text(encoding="utf-8"))
    mapping["settings"]["analysis"].update({
        "filter": {"shop_plural": {"type": "stemmer", "language": "minimal_english"}},
        "analyzer": {"shop_text": {"tokenizer": "standard", "filter": ["lowercase", "shop_plural"]}},
    })
    for field in ("title", "text"):
        mapping["mappings"]["properties"][field] = {"type": "text", "analyzer": "shop_text"}
    mapping["mappings"]["properties"]["brand"]["fields"]["text"]["analyzer"] = "shop_text"
    (tmp_path / "catalog.json").write_text(json.dumps(mapping), encoding="utf-8")
    raw = yaml.safe_load((ROOT / "mappings" / "catalog.profile.yaml").read_text(encoding="utf-8"))
    raw.update(mapping="catalog.json", analyzer="shop_text", fulltext=[{"field": "title", "weight": 1}])
    del raw["languages"]
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    profile = load_profile(tmp_path / "profile.yaml")

    index = catalog(engine, profile, f"{index_prefix}-catalog", {"p1": "Green Apples", "p2": "Apple Pie"})
    assert found(engine, index, "title", "apple") == found(engine, index, "title", "apples") == {"p1", "p2"}
    policies = policy_set({"apple": ["apple"]})
    analysis = profile.policy_analysis()
    policies_index = policy_store.write_index(engine, index_prefix, policies, analysis=analysis)
    settings = engine.request("GET", f"/{policies_index}/_settings")[policies_index]["settings"]
    assert settings["index"]["analysis"]["filter"]["shop_plural"]["language"] == "minimal_english"
    assert fired(engine, policies_index, policies, "green apples") == {"apple"}
    assert fired(engine, policies_index, policies, "apple pie") == {"apple"}
    # the same profile without its analyzer (language-neutral govsearch_text): no plural
    neutral = load_profile(tmp_path / "profile.yaml").model_copy(update={"analyzer": "govsearch_text"})
    other = policy_store.write_index(
        engine, f"{index_prefix}-n", policies, analysis=neutral.policy_analysis()
    )
    assert fired(engine, other, policies, "green apples") == set()


# --- indices written with the previous built-in govsearch_text -------------------------------


def write_v1_index(engine: Engine, prefix: str, policies: PolicySet) -> str:
    """A policies index as earlier releases wrote it: their mapping (one built-in
    ``govsearch_text``), no analysis recorded in the policy-set document."""
    name = policy_store.index_name(prefix, policies.version)
    engine.create_index(name, json.loads(V1_MAPPING.read_text(encoding="utf-8")))

    def count(phrase: str) -> int:
        return len(engine.analyze(name, "govsearch_text", phrase))

    for policy in policies.policies:
        engine.index_document(name, policy.id, matcher.percolator_document(policy, policies.version, count))
    for doc_id, source in matcher.phrase_documents(policies.policies):
        engine.index_document(name, doc_id, source)
    engine.index_document(
        name,
        policy_store.META_ID,
        {
            "doc_type": "policy_set",
            "policy_set_version": policies.version,
            "policy_set": json.loads(policies.model_dump_json(by_alias=True)),
        },
        refresh=True,
    )
    return name


def test_an_old_policies_index_keeps_serving_and_is_never_reused_silently(
    engine: Engine, index_prefix: str
) -> None:
    policies = policy_set({"chocolate": ["chocolat"]})
    old = write_v1_index(engine, index_prefix, policies)
    live = policy_store.alias_name(index_prefix, "live")
    policy_store.point_alias(engine, live, old, expected=None)
    resolved = policy_store.resolve(engine, index_prefix, "live")
    assert resolved is not None and resolved.index == old
    assert fired(engine, old, resolved.policy_set, "chocolats noirs") == {"chocolate"}  # serves as it was

    with pytest.raises(policy_store.AnalysisChanged) as refused:  # served: kept, and said so
        policy_store.write_index(engine, index_prefix, policies)
    message = str(refused.value)
    assert old in message and live in message and "earlier releases" in message
    assert "publish again" in message
    assert engine.get_document(old, policy_store.META_ID) is not None  # untouched

    engine.update_aliases([{"remove": {"index": old, "alias": live}}])  # not served any more:
    assert policy_store.write_index(engine, index_prefix, policies) == old  # rewritten in place
    meta = engine.get_document(old, policy_store.META_ID)
    assert meta is not None and meta["_source"]["analysis"] == policy_store.default_analysis().fingerprint
    settings = engine.request("GET", f"/{old}/_settings")[old]["settings"]["index"]["analysis"]
    assert "govsearch_en_stop_marks" in settings["filter"]
    assert fired(engine, old, policies, "chocolats noirs") == {"chocolate"}
    assert fired(engine, old, policies, "thé") == set()
