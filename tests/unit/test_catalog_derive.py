"""The demo catalog derivation: determinism, counts, normalisation, categories, drift."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from control_plane.catalog.derivation import (
    DEFAULT_OUT,
    DEFAULT_SOURCE,
    DEFAULT_SUPPLEMENT,
    SOURCE_COLUMNS,
    Derivation,
    default_taxonomy,
    derive,
    derive_catalog,
    ndjson_bytes,
    read_ndjson,
    read_tsv,
)
from control_plane.catalog.derive import main
from control_plane.catalog.economics import model_economics
from control_plane.catalog.personas import load_personas
from control_plane.catalog.product import MODELLED_FIELDS, Product
from control_plane.catalog.supplement import SupplementError, load_supplement, parse_supplement
from control_plane.catalog.tags import allergen_tags, diet_flags, label_tags
from control_plane.catalog.taxonomy import (
    CategoryRules,
    CategoryRulesError,
    Taxonomy,
    humanise_tag,
)

ROOT = Path(__file__).resolve().parents[2]
#: The untrimmed Open Food Facts sample, when this machine has it.
ORIGINAL_TSV = Path(
    os.environ.get("GOVSEARCH_OFF_TSV", "/work/shared/data/openfoodfacts/openfoodfacts-sample.tsv")
)
SOURCE_ROWS = 1541
BLOOD_ORANGE_SODAS = ("04656701467", "04656701999")
CANDIED_ORANGE_NOUGAT = "3217662920301"


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    return read_tsv(DEFAULT_SOURCE)


@pytest.fixture(scope="module")
def supplement() -> list[dict[str, Any]]:
    return load_supplement(DEFAULT_SUPPLEMENT)


@pytest.fixture(scope="module")
def derivation(rows: list[dict[str, str]], supplement: list[dict[str, Any]]) -> Derivation:
    return derive(rows, supplement)


@pytest.fixture(scope="module")
def by_id(derivation: Derivation) -> dict[str, Product]:
    return {p.id: p for p in derivation.products}


def row(code: str, **fields: str) -> dict[str, str]:
    base = {column: "" for column in SOURCE_COLUMNS}
    base.update(code=code, **fields)
    return base


# --- determinism and drift ------------------------------------------------------------


def test_deriving_twice_gives_identical_bytes(
    rows: list[dict[str, str]], supplement: list[dict[str, Any]]
) -> None:
    first = ndjson_bytes(derive_catalog(rows, supplement))
    second = ndjson_bytes(derive_catalog(list(rows), list(supplement)))
    assert first == second


def test_output_does_not_depend_on_input_order(
    rows: list[dict[str, str]], supplement: list[dict[str, Any]]
) -> None:
    forward = ndjson_bytes(derive_catalog(rows, supplement))
    backward = ndjson_bytes(derive_catalog(list(reversed(rows)), list(reversed(supplement))))
    assert forward == backward


def test_committed_catalog_equals_a_fresh_derivation(derivation: Derivation) -> None:
    committed = DEFAULT_OUT.read_bytes()
    assert committed == ndjson_bytes(derivation.documents()), (
        "data/catalog.ndjson is stale: run python -m control_plane.catalog.derive"
    )


def test_catalog_lines_are_sorted_compact_json_with_sorted_keys() -> None:
    lines = DEFAULT_OUT.read_text(encoding="utf-8").splitlines()
    ids = [doc["id"] for doc in read_ndjson(DEFAULT_OUT)]
    assert ids == sorted(ids)
    assert all(line.startswith('{"allergens":') for line in lines)
    assert "\\u00e9" not in DEFAULT_OUT.read_text(encoding="utf-8")  # ensure_ascii=False


@pytest.mark.skipif(not ORIGINAL_TSV.is_file(), reason="the untrimmed OFF sample is not here")
def test_trimmed_source_derives_like_the_original(derivation: Derivation) -> None:
    original = read_tsv(ORIGINAL_TSV)
    trimmed = read_tsv(DEFAULT_SOURCE)
    assert [{c: r[c] for c in SOURCE_COLUMNS} for r in original] == trimmed
    supplement = load_supplement(DEFAULT_SUPPLEMENT)
    assert derive_catalog(original, supplement) == derivation.documents()


def test_check_mode_detects_a_stale_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "catalog.ndjson"
    out.write_text("{}\n", encoding="utf-8")
    assert main(["--out", str(out), "--check"]) == 1
    assert main(["--out", str(out)]) == 0
    assert main(["--out", str(out), "--check"]) == 0
    assert out.read_bytes() == DEFAULT_OUT.read_bytes()
    capsys.readouterr()


# --- counts ---------------------------------------------------------------------------


def test_every_source_row_is_accounted_for(
    rows: list[dict[str, str]], supplement: list[dict[str, Any]], derivation: Derivation
) -> None:
    report = derivation.report
    assert report.off_rows == len(rows) == SOURCE_ROWS
    assert report.off_products + len(report.duplicates) == report.off_rows
    assert report.duplicates == ()  # the shipped sample has no repeated code
    off_ids = {p.id for p in derivation.products if p.source == "openfoodfacts"}
    assert off_ids == {r["code"] for r in rows}
    assert report.supplement == len(supplement)
    assert report.total == len(derivation.products) == report.off_products + report.supplement
    assert sum(report.top_categories.values()) == report.total
    assert sum(report.placed_by.values()) == report.off_products


def test_a_repeated_code_keeps_its_first_row() -> None:
    rows = [
        row("123", product_name="First chocolate"),
        row("456", product_name="Other"),
        row("123", product_name="Second chocolate"),
    ]
    result = derive(rows, [])
    assert result.report.duplicates == ("123",)
    assert result.report.off_rows == 3 and result.report.off_products == 2
    assert {p.id: p.title for p in result.products}["123"] == "First chocolate"


def test_most_products_land_in_a_real_category(derivation: Derivation) -> None:
    other = derivation.report.top_categories.get("Other", 0)
    assert other <= 0.02 * derivation.report.off_products
    assert derivation.report.placed_by["other"] == other


# --- fields ---------------------------------------------------------------------------


def test_documents_have_exactly_the_catalog_fields(derivation: Derivation) -> None:
    expected = set(Product.model_fields)
    assert expected == {
        "id", "title", "brand", "text", "language", "market", "category", "categories",
        "allergens", "traces", "labels", "diet", "in_stock", "visible", "on_clearance",
        "price", "margin", "popularity", "modelled", "source",
    }
    assert all(set(doc) == expected for doc in derivation.documents())


def test_titles_languages_and_markets_are_never_empty(derivation: Derivation) -> None:
    for product in derivation.products:
        assert product.title.strip()
        assert product.language in ("en", "fr")
        assert product.market
        assert product.categories[-1] == product.category


def test_a_row_without_names_gets_brand_and_category_as_title() -> None:
    result = derive([row("1", brands="Acme, Other", categories_tags="en:mustards")], [])
    (product,) = result.products
    assert product.title == "Acme mustards"
    assert product.brand == "Acme"
    assert product.categories == ("Groceries", "Sauces", "Mustards")


def test_markets_are_normalised_and_default_from_language() -> None:
    rows = [
        row("1", product_name="Yaourt nature au lait entier", countries="France, Suisse"),
        row("2", product_name="French Dressing", countries="United Kingdom,en:US, États-Unis"),
        row("3", product_name="Fromage de chèvre au lait cru", countries="Atlantis"),
        row("4", product_name="Creamy French Dressing", countries=""),
    ]
    products = {p.id: p for p in derive(rows, []).products}
    assert products["1"].market == ("fr", "ch") and products["1"].language == "fr"
    assert products["2"].market == ("uk", "us") and products["2"].language == "en"
    assert products["3"].market == ("fr",) and products["3"].language == "fr"
    assert products["4"].market == ("us",) and products["4"].language == "en"


def test_text_is_generic_name_and_cleaned_ingredients() -> None:
    rows = [row("1", product_name="X", generic_name="Sauce &quot;French&quot;",
                ingredients_text="Eau,  _lait_ entier,\tsel")]
    (product,) = derive(rows, []).products
    assert product.text == 'Sauce "French" Eau, lait entier, sel'


# --- modelled fields --------------------------------------------------------------------


def test_modelled_fields_are_in_range_and_marked(derivation: Derivation) -> None:
    for product in derivation.products:
        assert product.modelled == MODELLED_FIELDS
        assert product.price > 0 and round(product.price, 2) == product.price
        assert 0 <= product.margin <= 1
        assert 0 <= product.popularity <= 1000
        assert product.visible is True
        expected = "govsearch-demo" if product.id.startswith("demo-") else "openfoodfacts"
        assert product.source == expected


def test_modelled_stock_and_clearance_rates_are_plausible(derivation: Derivation) -> None:
    off = [p for p in derivation.products if p.source == "openfoodfacts"]
    in_stock = sum(p.in_stock for p in off) / len(off)
    clearance = sum(p.on_clearance for p in off) / len(off)
    assert 0.92 <= in_stock <= 0.98
    assert 0.02 <= clearance <= 0.08


def test_modelled_economics_depend_only_on_id_and_category_base() -> None:
    first = model_economics("3017620422003", 4.5, 0.38)
    assert first == model_economics("3017620422003", 4.5, 0.38)
    assert first != model_economics("3017620422004", 4.5, 0.38)
    assert 4.5 * 0.6 <= first.price <= 4.5 * 1.5
    assert 0.28 <= first.margin <= 0.48


def test_economics_follow_the_category_base_price(derivation: Derivation) -> None:
    taxonomy = default_taxonomy()
    for product in derivation.products:
        if product.source != "openfoodfacts":
            continue
        base, _ = taxonomy.economics_base(product.category)
        assert max(0.29, round(base * 0.6, 2)) <= product.price <= round(base * 1.5, 2)


# --- allergens, labels, diet ------------------------------------------------------------


def test_the_declared_peanut_rows_all_carry_peanuts(
    rows: list[dict[str, str]], by_id: dict[str, Product]
) -> None:
    declared = {r["code"] for r in rows if "en:peanuts" in r["allergens_tags"].split(",")}
    assert len(declared) == 13
    with_peanuts = {
        pid for pid, p in by_id.items() if "peanuts" in p.allergens and p.source == "openfoodfacts"
    }
    assert with_peanuts == declared  # nothing inferred from ingredient text


def test_allergens_keep_only_declared_eu_tags() -> None:
    kept, dropped = allergen_tags("en:milk,en:tree-nuts,fr:amidon,de:gerstenmalz,en:milk")
    assert kept == ("gluten", "milk", "nuts")
    assert dropped == ["fr:amidon"]
    assert allergen_tags("") == ((), [])


def test_real_rows_have_normalised_allergens(by_id: dict[str, Product]) -> None:
    for product in by_id.values():
        for tag in (*product.allergens, *product.traces):
            assert ":" not in tag and tag == tag.lower()


def test_labels_drop_prefixes_and_diet_follows_labels() -> None:
    labels = label_tags("en:vegan,fr:ab-agriculture-biologique,en:green-dot,fr:triman")
    assert labels == ("green-dot", "organic", "vegan")
    assert diet_flags(labels) == ("organic", "vegan", "vegetarian")
    assert diet_flags(("palm-oil-free", "gluten-free")) == ("gluten-free", "palm-oil-free")
    assert diet_flags(("green-dot",)) == ()


def test_supplement_labels_give_diet_flags(by_id: dict[str, Product]) -> None:
    vegan = by_id["demo-vegan-dark-chocolate-70"]
    assert vegan.diet == ("organic", "vegan", "vegetarian")
    assert by_id["demo-milk-chocolate-peanuts-100g"].allergens == ("milk", "peanuts")


# --- categories -------------------------------------------------------------------------


def test_blood_orange_sodas_are_sodas_not_oranges(by_id: dict[str, Product]) -> None:
    for code in BLOOD_ORANGE_SODAS:
        product = by_id[code]
        assert product.category == "Sodas"
        assert product.categories == ("Beverages", "Sodas")
        assert "Oranges" not in product.categories


def test_candied_orange_nougat_is_a_nougat(by_id: dict[str, Product]) -> None:
    assert by_id[CANDIED_ORANGE_NOUGAT].categories == ("Sweets", "Confectioneries", "Nougats")


def test_supplement_oranges_are_fresh_oranges(by_id: dict[str, Product]) -> None:
    oranges = [p for p in by_id.values() if p.category == "Oranges"]
    assert len(oranges) >= 4
    assert all(p.id.startswith("demo-") for p in oranges)  # the sample has no fresh oranges
    for product in oranges:
        assert product.categories == ("Fruits and vegetables", "Fresh fruits", "Oranges")
    assert {p.language for p in oranges} == {"en", "fr"}


def test_the_rule_table_agrees_with_every_supplement_category(
    supplement: list[dict[str, Any]],
) -> None:
    taxonomy = default_taxonomy()
    for item in parse_supplement(supplement):
        placed = taxonomy.classify([], item.title)
        assert placed.path[-1] == item.category, item.title


@pytest.mark.parametrize(
    ("title", "category"),
    [
        ("French Sparkling Soda, Blood Orange", "Sodas"),
        ("Blood oranges 1kg", "Oranges"),
        ("Oranges à jus", "Oranges"),
        ("Jus d'orange pressé", "Orange juices"),
        ("Seville orange marmalade", "Marmalades"),
        ("Handcrafted French Pot Ice Cream, Double Chocolate Chip", "Ice creams"),
        ("French Butter Cookies Coated In Dark Chocolate", "Cookies and biscuits"),
        ("Euroclassic, French Brioche Style Chocolate Croissant", "Brioches and viennoiseries"),
        ("Cocoa Classics, Hot Cocoa Mix, French Vanilla & Chocolate", "Hot chocolate"),
        ("Exquisite French Chocolate", "Chocolates"),
        ("Vegan dark chocolate 70%", "Dark chocolates"),
        ("Chocolats de Noël assortis", "Christmas chocolates"),
        ("Lait infantile 1er âge", "Baby formula"),
        ("French Burnt Peanuts", "Nuts and peanuts"),
        ("French Style Green Beans", "Green beans"),
        ("Creamy French Dressing", "Salad dressings"),
        ("French", "Salad dressings"),
        ("Something nobody sells", "Other"),
    ],
)
def test_text_rules(title: str, category: str) -> None:
    assert default_taxonomy().classify([], title).path[-1] == category


def test_no_source_product_claims_the_demo_only_categories(derivation: Derivation) -> None:
    demo_only = {"Oranges", "Orange juices", "Marmalades", "Baby formula", "Christmas chocolates"}
    for product in derivation.products:
        if product.source == "openfoodfacts":
            assert not demo_only & set(product.categories), product.title


def test_tags_decide_before_text_and_the_deepest_tag_wins() -> None:
    taxonomy = default_taxonomy()
    tags = ["en:snacks", "en:sweet-snacks", "en:cocoa-and-its-products", "en:chocolates",
            "en:dark-chocolates"]
    placed = taxonomy.classify(tags, "French Style Green Beans")
    assert placed.path == ("Sweets", "Chocolates", "Dark chocolates")
    assert placed.source == "tags"


def test_a_text_rule_only_refines_a_tagged_category() -> None:
    taxonomy = default_taxonomy()
    refined = taxonomy.classify(["en:beverages"], "Orange soda")
    assert refined.path == ("Beverages", "Sodas") and refined.source == "tags+rule"
    kept = taxonomy.classify(["en:cheeses"], "Orange soda")
    assert kept.path == ("Dairies", "Cheeses") and kept.source == "tags"


def test_humanise_tag() -> None:
    assert humanise_tag("en:dark-chocolates") == "Dark chocolates"
    assert humanise_tag("fr:fromages-blancs") == "Fromages blancs"


def test_a_bad_rules_file_reports_every_problem() -> None:
    rules = CategoryRules.model_validate(
        {
            "other": {"name": "Other", "base_price": 1, "base_margin": 0.3},
            "taxonomy": [
                {"name": "Sweets", "children": [{"name": "Chocolates"}]},
                {"name": "Drinks", "base_price": 2, "base_margin": 0.3,
                 "children": [{"name": "chocolates"}]},
            ],
            "rules": [
                {"category": "Sodas", "match": "soda"},
                {"category": "Chocolates", "match": "(unclosed"},
            ],
        }
    )
    with pytest.raises(CategoryRulesError) as error:
        Taxonomy(rules, "rules.yaml")
    problems = error.value.problems
    assert len(problems) == 4
    assert "needs base_price" in problems[0]
    assert "declared twice" in problems[1]
    assert "unknown category 'Sodas'" in problems[2]
    assert "bad regular expression" in problems[3]


# --- supplement ---------------------------------------------------------------------------


def test_supplement_size_and_ids(supplement: list[dict[str, Any]]) -> None:
    items = parse_supplement(supplement)
    assert 25 <= len(items) <= 40
    assert all(item.id.startswith("demo-") for item in items)
    formula = sorted(i.popularity for i in items if i.category == "Baby formula")
    assert len(formula) >= 4 and len(set(formula)) == len(formula)
    assert sum(i.on_clearance for i in items) >= 2


def test_supplement_errors_are_collected() -> None:
    bad = [
        {"id": "oranges", "title": "x", "language": "en", "market": ["us"], "category": "Oranges",
         "price": 1, "margin": 0.1, "popularity": 1},
        {"id": "demo-x", "title": "x", "language": "en", "market": ["mars"],
         "category": "Oranges", "allergens": ["arachide"], "price": 1, "margin": 0.1,
         "popularity": 1},
    ]
    with pytest.raises(SupplementError) as error:
        parse_supplement(bad)
    text = "\n".join(error.value.problems)
    assert "oranges.id" in text and "unknown market" in text and "unknown allergen" in text


def test_a_supplement_category_must_exist() -> None:
    item = {"id": "demo-x", "title": "x", "language": "en", "market": ["us"],
            "category": "Moon rocks", "price": 1, "margin": 0.1, "popularity": 1}
    with pytest.raises(ValueError, match="unknown category"):
        derive([], [item])


# --- personas -----------------------------------------------------------------------------


def test_personas_reference_catalog_products(by_id: dict[str, Product]) -> None:
    personas = load_personas(ROOT / "data" / "personas.yaml")
    assert [p.id for p in personas.personas] == ["alice", "bruno", "chloe"]
    assert personas.unknown_products(by_id) == []
    for persona in personas.personas:
        for purchase in persona.purchases:
            product = by_id[purchase.product_id]
            assert persona.market in product.market and product.in_stock
            assert purchase.last_purchased <= personas.as_of


def test_alice_most_bought_is_a_mid_popularity_chocolate(by_id: dict[str, Product]) -> None:
    alice = load_personas(ROOT / "data" / "personas.yaml").get("alice")
    top = alice.most_bought()
    assert top is not None
    product = by_id[top.product_id]
    assert "Chocolates" in product.categories and "chocolate" in product.title.lower()
    rivals = [p for p in by_id.values()
              if "Chocolates" in p.categories and "chocolate" in p.title.lower()
              and "us" in p.market and p.in_stock]
    assert product.popularity < max(p.popularity for p in rivals)
    assert product.margin < max(p.margin for p in rivals)


def test_bruno_buys_cheese_and_wine_and_chloe_buys_vegan(by_id: dict[str, Product]) -> None:
    personas = load_personas(ROOT / "data" / "personas.yaml")
    bruno = [by_id[p.product_id].categories for p in personas.get("bruno").purchases]
    assert sum("Cheeses" in c for c in bruno) >= 2 and sum("Wines" in c for c in bruno) >= 2
    chloe = personas.get("chloe")
    assert "vegan" in chloe.cohorts
    assert all("vegan" in by_id[p.product_id].diet for p in chloe.purchases)
