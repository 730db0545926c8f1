"""What the model may never be sent, read from the project's own files.

A term (field name, category, brand, policy id, number) may only reach the model when the
shopper typed it: every occurrence in a request must be traceable to the conversation
(user messages and the intents the model answered before). The fixed parts of a request
(persona prompt, schema, parameters) may contain none of them.

Skipped field names, with the reason: ``en`` and ``fr`` are the analyser subfields of
``title``/``text`` (``title.en``...), two-letter words that are also ordinary French
("en") -- the dotted names are checked in full.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_FIELD_NAMES = {"en", "fr"}
DSL_WORDS = {
    "query",
    "bool",
    "must",
    "must_not",
    "should",
    "filter",
    "terms",
    "term",
    "range",
    "match",
    "match_all",
    "multi_match",
    "function_score",
    "_source",
    "aggs",
    "_name",
}


def field_names() -> set[str]:
    mapping = json.loads((ROOT / "mappings" / "catalog.json").read_text())
    names: set[str] = set()

    def walk(properties: dict[str, Any], prefix: str = "") -> None:
        for name, spec in properties.items():
            names.add(prefix + name)
            names.add(name)
            walk(spec.get("properties", {}), prefix + name + ".")
            walk(spec.get("fields", {}), prefix + name + ".")

    walk(mapping["mappings"]["properties"])
    return names - SKIPPED_FIELD_NAMES


def catalog_terms() -> tuple[set[str], set[str]]:
    categories: set[str] = set()
    brands: set[str] = set()
    for line in (ROOT / "data" / "catalog.ndjson").read_text().splitlines():
        product = json.loads(line)
        categories.update(product.get("categories", []))
        if product.get("brand") and len(product["brand"]) >= 4:
            brands.add(product["brand"])
    return categories, brands


def policy_ids() -> set[str]:
    ids = set()
    for path in (ROOT / "policies").rglob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        if isinstance(data, dict) and "id" in data and "rules" in data:
            ids.add(str(data["id"]))
    return ids


def forbidden_terms() -> set[str]:
    categories, brands = catalog_terms()
    return field_names() | categories | brands | policy_ids() | DSL_WORDS


def _found(term: str, text: str) -> bool:
    return re.search(r"(?<![\w-])" + re.escape(term) + r"(?![\w-])", text, re.IGNORECASE) is not None


def violations(body: dict[str, Any]) -> list[str]:
    """Every term in a recorded request that the conversation does not explain."""
    messages = body["messages"]
    system = [m["content"] for m in messages if m["role"] == "system"]
    conversation = " ".join(m["content"] for m in messages if m["role"] != "system")
    fixed = " ".join(system) + " " + json.dumps({k: v for k, v in body.items() if k != "messages"})
    found = []
    for term in forbidden_terms():
        if _found(term, fixed):
            found.append(f"fixed text contains {term!r}")
    for number in re.findall(r"\d+(?:[.,]\d+)?", " ".join(system) + json.dumps(body.get("response_format"))):
        found.append(f"fixed text contains the number {number}")
    whole = json.dumps(body, ensure_ascii=False)
    for term in forbidden_terms():
        if _found(term, whole) and not _found(term, conversation):
            found.append(f"request contains {term!r}, which the shopper did not type")
    return found
