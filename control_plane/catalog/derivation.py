"""Derive the demo catalog from the Open Food Facts sample plus the demo supplement.

The derivation is deterministic: the same inputs give byte-identical output (documents
sorted by id, keys sorted, UTF-8, no clock, no randomness). See ``docs/catalog.md``; the
command line is :mod:`control_plane.catalog.derive`.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from control_plane.catalog.economics import model_economics
from control_plane.catalog.markets import DEFAULT_MARKET, parse_markets, unknown_countries
from control_plane.catalog.product import Product
from control_plane.catalog.supplement import DemoItem, parse_supplement
from control_plane.catalog.tags import allergen_tags, diet_flags, label_tags, split_tags
from control_plane.catalog.taxonomy import Taxonomy, load_taxonomy
from control_plane.catalog.text import clean_text, detect_language

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SOURCE = REPO_ROOT / "data" / "source" / "openfoodfacts-sample.tsv"
DEFAULT_SUPPLEMENT = REPO_ROOT / "data" / "supplement.yaml"
DEFAULT_RULES = REPO_ROOT / "data" / "category_rules.yaml"
DEFAULT_OUT = REPO_ROOT / "data" / "catalog.ndjson"

#: The Open Food Facts columns the derivation reads (the trimmed source keeps only these).
SOURCE_COLUMNS: tuple[str, ...] = (
    "code", "product_name", "generic_name", "brands", "countries", "categories_tags",
    "labels_tags", "allergens_tags", "traces_tags", "ingredients_text",
)


class DerivationReport(BaseModel):
    """What the derivation did, for the CLI summary, the docs and the tests."""

    model_config = ConfigDict(frozen=True)

    off_rows: int
    duplicates: tuple[str, ...]
    """ids of source rows dropped because an earlier row had the same code"""
    off_products: int
    supplement: int
    total: int
    placed_by: dict[str, int]
    """off products per classification source: tags, tags+rule, rule, other"""
    top_categories: dict[str, int]
    """all products per top-level category (``Other`` included)"""
    dropped_allergen_tags: dict[str, int]
    unknown_countries: dict[str, int]


class Derivation(BaseModel):
    model_config = ConfigDict(frozen=True)

    products: tuple[Product, ...]
    report: DerivationReport

    def documents(self) -> list[dict[str, Any]]:
        return [p.document() for p in self.products]


@lru_cache(maxsize=1)
def default_taxonomy() -> Taxonomy:
    """The taxonomy in ``data/category_rules.yaml`` (read once)."""
    return load_taxonomy(DEFAULT_RULES)


def read_tsv(path: Path | str) -> list[dict[str, str]]:
    """Rows of an Open Food Facts TSV export (unquoted, tab-separated, UTF-8)."""
    csv.field_size_limit(sys.maxsize)
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [{k: v or "" for k, v in row.items() if k is not None} for row in reader]


def write_trimmed_tsv(rows: Sequence[dict[str, str]], path: Path | str) -> None:
    """Write only :data:`SOURCE_COLUMNS`, in source row order (same derivation)."""
    lines = ["\t".join(SOURCE_COLUMNS)]
    for row in rows:
        values = [row.get(c, "") for c in SOURCE_COLUMNS]
        if any(ch in v for v in values for ch in "\t\n\r"):
            raise ValueError(f"row {row.get('code')!r}: a value holds a tab or newline")
        lines.append("\t".join(values))
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def off_product(row: dict[str, str], taxonomy: Taxonomy) -> tuple[Product, str]:
    """One Open Food Facts row as a product, and how its category was decided."""
    code = row["code"].strip()
    name = clean_text(row.get("product_name", ""))
    generic = clean_text(row.get("generic_name", ""))
    brands = [clean_text(b) for b in row.get("brands", "").split(",")]
    brand = next((b for b in brands if b), None)
    placed = taxonomy.classify(split_tags(row.get("categories_tags", "")), name, generic)
    category = placed.path[-1]
    title = name or generic or _fallback_title(brand, category, taxonomy)
    markets = parse_markets(row.get("countries", ""))
    language = detect_language(name, generic, markets)
    allergens, _ = allergen_tags(row.get("allergens_tags", ""))
    traces, _ = allergen_tags(row.get("traces_tags", ""))
    labels = label_tags(row.get("labels_tags", ""))
    base_price, base_margin = taxonomy.economics_base(category)
    economics = model_economics(code, base_price, base_margin)
    product = Product(
        id=code,
        title=title,
        brand=brand,
        text=" ".join(t for t in (generic, clean_text(row.get("ingredients_text", ""))) if t),
        language=language,
        market=markets or (DEFAULT_MARKET[language],),
        category=category,
        categories=placed.path,
        allergens=allergens,
        traces=traces,
        labels=labels,
        diet=diet_flags(labels),
        visible=True,
        source="openfoodfacts",
        **economics.model_dump(),
    )
    return product, placed.source


def _fallback_title(brand: str | None, category: str, taxonomy: Taxonomy) -> str:
    noun = "product" if category == taxonomy.other.name else category
    return f"{brand} {noun.lower()}" if brand else noun


def demo_product(item: DemoItem, taxonomy: Taxonomy) -> Product:
    """One supplement entry as a product; its category must be a taxonomy node."""
    if item.category not in taxonomy.paths:
        raise ValueError(f"{item.id}: unknown category {item.category!r}")
    return Product(
        id=item.id,
        title=item.title,
        brand=item.brand,
        text=item.text,
        language=item.language,
        market=item.market,
        category=item.category,
        categories=taxonomy.paths[item.category],
        allergens=item.allergens,
        traces=item.traces,
        labels=item.labels,
        diet=diet_flags(item.labels),
        in_stock=item.in_stock,
        visible=True,
        on_clearance=item.on_clearance,
        price=item.price,
        margin=item.margin,
        popularity=item.popularity,
        source="govsearch-demo",
    )


def derive(
    rows: Iterable[dict[str, str]],
    supplement: list[dict[str, Any]],
    taxonomy: Taxonomy | None = None,
) -> Derivation:
    """Products and a report. A repeated code keeps its first row (source order)."""
    taxonomy = taxonomy or default_taxonomy()
    products: dict[str, Product] = {}
    duplicates: list[str] = []
    placed_by: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    off_rows = 0
    for row in rows:
        off_rows += 1
        code = row.get("code", "").strip()
        if not code:
            raise ValueError(f"source row {off_rows} has no code")
        if code in products:
            duplicates.append(code)
            continue
        product, source = off_product(row, taxonomy)
        products[code] = product
        placed_by[source] += 1
        dropped.update(allergen_tags(row.get("allergens_tags", ""))[1])
        dropped.update(allergen_tags(row.get("traces_tags", ""))[1])
        unknown.update(unknown_countries(row.get("countries", "")))
    off_products = len(products)
    for item in parse_supplement(supplement):
        if item.id in products:
            raise ValueError(f"{item.id}: demo id collides with a source product")
        products[item.id] = demo_product(item, taxonomy)
    ordered = tuple(products[k] for k in sorted(products))
    report = DerivationReport(
        off_rows=off_rows,
        duplicates=tuple(duplicates),
        off_products=off_products,
        supplement=len(products) - off_products,
        total=len(products),
        placed_by=dict(sorted(placed_by.items())),
        top_categories=dict(sorted(Counter(p.categories[0] for p in ordered).items())),
        dropped_allergen_tags=dict(sorted(dropped.items())),
        unknown_countries=dict(sorted(unknown.items())),
    )
    return Derivation(products=ordered, report=report)


def derive_catalog(
    rows: Iterable[dict[str, str]],
    supplement: list[dict[str, Any]],
    taxonomy: Taxonomy | None = None,
) -> list[dict[str, Any]]:
    """The catalog documents, sorted by id (see :func:`derive`)."""
    return derive(rows, supplement, taxonomy).documents()


def ndjson_bytes(products: Iterable[dict[str, Any]]) -> bytes:
    """One compact JSON document per line, keys sorted, UTF-8 kept as is."""
    lines = (
        json.dumps(p, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
        for p in products
    )
    return "".join(lines).encode("utf-8")


def write_ndjson(products: Iterable[dict[str, Any]], path: Path | str) -> None:
    Path(path).write_bytes(ndjson_bytes(products))


def read_ndjson(path: Path | str) -> list[dict[str, Any]]:
    text = Path(path).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
